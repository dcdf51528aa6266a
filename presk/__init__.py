"""presk: a compiler for PSK, a differentiable tensor language with named axes, on MLIR.

Every execution is measured against an exact mpmath reference; see docs/architecture.md.
The library API (docs/api.md): `presk.load(path or text)` -> Program -> `.elaborate(…)`
-> Core -> `.lower(…)` -> Kernels -> `.compile(…)` -> a callable on numpy arrays; and
`presk.data(path)`, a data file's token windows and its tokenizer.
"""

__version__ = "0.1.0"

# What `presk.X` gives, imported on first use: the API loads MLIR, and `import presk`
# (which every submodule's import runs, the CLI's among them) stays free of it.
_EXPORTS = {
    "load": "presk.api",
    "data": "presk.api",
    "Data": "presk.api",
    "Tokenizer": "presk.api",
    "Program": "presk.api",
    "Core": "presk.api",
    "Kernels": "presk.api",
    "Compiled": "presk.api",
    "TrainStep": "presk.api",
    "StepResult": "presk.api",
    "Hyper": "presk.train.loop",
    "PreskError": "presk.errors",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'presk' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
