"""The stages of presk's lowering, each one function from the stage before.

    source --elaborate--> core --psk-vjp, psk-verify--> core (derivatives expanded)
      --psk-fuse, psk-lower-to-kernel{type}--> kernel (a host program of launches, and
      the kernels: loop nests over buffers in a machine type)

Each later stage (kernel, affine, llvm, jit) is added here as a function of the one
before, so `presk dump --stage X` and `presk-opt` stop at the same points.
"""

from __future__ import annotations

from mlir import ir

from presk.ir.pipeline import build_pass_manager

REMATS = ("store", "recompute")


def core(module: ir.Module, remat: str = "store") -> ir.Module:
    """PSK-Core with every `grad` and `vjp` expanded into forward and backward functions,
    verified. Changes `module` in place and returns it."""
    text = f"builtin.module(psk-vjp{{remat={remat}}},psk-verify)"
    with module.context:
        build_pass_manager(text, module.context).run(module.operation)
    return module


def kernel(module: ir.Module, machine: str) -> ir.Module:
    """PSK-Core (its derivatives expanded) lowered to kernels in a machine type, fused.
    Changes `module` in place and returns it."""
    text = f"builtin.module(psk-fuse,psk-lower-to-kernel{{type={machine}}},psk-dce,psk-verify)"
    with module.context:
        build_pass_manager(text, module.context).run(module.operation)
    return module
