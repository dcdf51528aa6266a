"""The stages of presk's lowering, each one function from the stage before.

    source --elaborate--> core --psk-vjp, psk-verify--> core (derivatives expanded)
      --psk-fuse, psk-lower-to-kernel{type}--> kernel (a host program of launches, and
      the kernels: loop nests over buffers in a machine type)
      --psk-kernel-to-affine and the code-generation passes--> affine (the kernels as
      affine loops over memrefs, in registers and vector lanes)
      --psk-strip-host, upstream lowering--> llvm (the kernels alone, in the LLVM dialect)

The pipelines are spelled here once, so `presk dump --stage X`, the MLIR backend and
`presk-opt --pass-pipeline=...` run the same passes.
"""

from __future__ import annotations

from mlir import ir

from presk.ir.diagnostics import compile_error
from presk.ir.pipeline import build_pass_manager

REMATS = ("store", "recompute")


def core(module: ir.Module, remat: str = "store") -> ir.Module:
    """PSK-Core with every `grad` and `vjp` expanded into forward and backward functions,
    verified. Changes `module` in place and returns it."""
    text = f"builtin.module(psk-vjp{{remat={remat}}},psk-verify)"
    run_pipeline(text, module)
    return module


def run_pipeline(text: str, module: ir.Module) -> None:
    """Run the pipeline `text` over `module`; a pass's refusal (a second derivative, say)
    becomes a located presk error (E2020), not an MLIR exception."""
    with module.context:
        try:
            build_pass_manager(text, module.context).run(module.operation)
        except ir.MLIRError as e:
            raise compile_error(e) from None


def kernel(module: ir.Module, realize) -> ir.Module:
    """PSK-Core (its derivatives expanded) lowered to kernels, fused, in the machine type
    `realize` names (f64, f32, bf16), or a realization's default and, by site, its
    storage types and the types its parameters are read in. Changes `module` in place and
    returns it."""
    machine = realize if isinstance(realize, str) else realize.default
    storage, params = {}, {}
    if not isinstance(realize, str):
        storage = realize.storage
        if realize.params or realize.quant:
            from presk.ir.program import read_program
            from presk.realize import spellings
            from presk.runtime.inputs import param_type

            params = spellings(realize, param_type(read_program(module)))
    with module.context:
        for name, entries in (("psk_kernel.storage", storage), ("psk_kernel.params", params)):
            if entries:
                text = ", ".join(f'"{k}" = "{v}"' for k, v in sorted(entries.items()))
                module.operation.attributes[name] = ir.Attribute.parse("{" + text + "}")
        text = f"builtin.module(psk-fuse,psk-lower-to-kernel{{type={machine}}},psk-dce,psk-verify)"
    run_pipeline(text, module)
    return module


def affine_pipeline(vector_bytes: int) -> str:
    """From the kernel stage to the affine stage, vectorising for `vector_bytes` lanes."""
    return (
        "builtin.module(psk-kernel-to-affine,psk-hoist-loads,psk-promote-registers,"
        f"psk-vectorize{{bytes={vector_bytes}}})"
    )


# No pass here may contract a multiply and an add or reassociate: the upstream passes
# below keep every arith op's rounding (none sets fastmath flags).
LLVM_PIPELINE = (
    "builtin.module(psk-strip-host,"
    "func.func(arith-expand{include-bf16=true}),"  # bf16 rounding by integer ops, exactly
    "lower-affine,convert-scf-to-cf,"
    "convert-math-to-libm,"  # exp, log, … call the C library, as the kernel evaluator does
    "convert-vector-to-llvm,convert-math-to-llvm,expand-strided-metadata,"
    "finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,"
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},"  # kernels take plain pointers
    "reconcile-unrealized-casts,"
    "psk-keep-libm-calls)"  # pow(x, 2) stays a call of pow, as the kernel evaluator makes it
)


def affine(module: ir.Module, vector_bytes: int) -> ir.Module:
    """The kernel stage's kernels lowered to affine loops and code-generated (the host
    program untouched). Changes `module` in place and returns it."""
    run_pipeline(affine_pipeline(vector_bytes), module)
    return module


def llvm(module: ir.Module) -> ir.Module:
    """An affine-stage module's kernels alone, in the LLVM dialect. Changes `module` in
    place and returns it."""
    run_pipeline(LLVM_PIPELINE, module)
    return module
