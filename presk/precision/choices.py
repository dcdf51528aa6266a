"""The choices of the precision commands' flags, known without MLIR: a command's parser is
built before it runs, and `presk dump --stage ast` runs without loading MLIR."""

from __future__ import annotations

# Where a sensitivity sweep runs: on the exact reference, or in binary64 on the kernel
# evaluator (presk/precision/sensitivity.py).
SWEEPS = ("reference", "f64")
