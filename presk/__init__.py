"""presk: a compiler for PSK, a differentiable tensor language with named axes, on MLIR.

Every execution is measured against an exact mpmath reference; see docs/architecture.md.
"""

__version__ = "0.1.0"
