"""The stages of presk's lowering, each one function from the stage before.

    source --elaborate--> core --psk-vjp, psk-verify--> core (derivatives expanded)
      --psk-fuse, psk-lower-to-kernel{type}, psk-contract (a realization's fused
      multiply-adds), psk-sum-order (its orders),
      psk-plan (a plan's layouts)--> kernel (a host program of launches, and the
      kernels: loop nests over buffers in a machine type)
      --psk-kernel-to-affine and the code-generation passes--> affine (the kernels as
      affine loops over memrefs, in registers and vector lanes)
      --psk-strip-host, upstream lowering--> llvm (the kernels alone, in the LLVM dialect)

The pipelines are spelled here once, so `presk dump --stage X`, the MLIR backend and
`presk-opt --pass-pipeline=...` run the same passes.
"""

from __future__ import annotations

import re
from dataclasses import replace

from mlir import ir

from presk import plans
from presk import realize as realizations
from presk.core.program import read_host_program
from presk.ir.diagnostics import compile_error
from presk.ir.ops import module_launches, string_attr
from presk.ir.types import leaves
from presk.pipeline import build_pass_manager
from presk.plans import read_plan
from presk.quantize import realized_elements
from presk.runtime.inputs import param_type
from presk.toolchain import default_threads, host_cpu, vector_bytes

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


def realization(realize, plan: str | None = None):
    """The realization the kernel stage runs: `realize` (a `Realization` or its spelling,
    `f32` or `@R.json`: presk/realize.py), its machine type the plan's if the plan file
    names one and `realize` is uniform."""
    r = realize if isinstance(realize, realizations.Realization) else realizations.read(realize)
    if plan is None or plan in plans.NAMED:
        return r
    named = read_plan(plan).get("realize")
    if named and r.uniform:
        r = replace(r, default=realizations.read(named).default)
    return r


def kernel(module: ir.Module, realize, plan: str | None = None) -> ir.Module:
    """PSK-Core (its derivatives expanded) lowered to kernels, fused, in the machine type of
    `realize` (a realization or its spelling: f64, f32, bf16, @R.json), with the
    realization's storage types and parameter types by site, its sums' orders, and the
    layouts of the plan file `plan`: `kernel_pipeline(realize, plan)`. The realization's
    sites are checked against the kernels' (E7001) before any nest moves. Changes `module`
    in place and returns it. Runs `kernel_pipeline` in two parts, the sites checked
    between them."""
    r = realization(realize, plan)
    realize_attributes(module, r)
    run_pipeline(_module_pipeline(_lowering(r)), module)
    realizations.check_sites(r, launch_sites(module), "kernel")
    layouts = _layouts(r, plan)
    if layouts:
        run_pipeline(_module_pipeline(layouts), module)
    return module


def kernel_pipeline(realize, plan: str | None = None) -> str:
    """The pipeline `kernel` runs from PSK-Core (as `presk dump --stage core --format mlir`
    prints it, with the realization's attributes) to the kernel stage."""
    r = realization(realize, plan)
    return _module_pipeline(_lowering(r) + _layouts(r, plan))


def _module_pipeline(steps: list[str]) -> str:
    return "builtin.module(" + ",".join(steps) + ")"


def _lowering(r) -> list[str]:
    return ["psk-fuse", f"psk-lower-to-kernel{{type={r.default}}}", "psk-dce", "psk-verify"]


def _layouts(r, plan: str | None) -> list[str]:
    """A psk-contract for the realization's contract default and each site it names, a
    psk-functions where presk's exp and erf may replace the C library's (an f32 or bf16
    kernel, the default), a psk-sum-order for each site it orders, then the plan's
    psk-plan."""
    steps = ["psk-contract{contract=fma}"] if r.contract.get("default") == "fma" else []
    narrow = {r.default, *r.storage.values()} & {"f32", "bf16"}
    steps += ["psk-functions{impl=presk}"] if r.functions == "presk" and narrow else []
    steps += [
        f"psk-contract{{nest={_option(site)} contract={c}}}"
        for site, c in sorted(r.contract_sites.items())
    ]
    steps += [
        f"psk-sum-order{{nest={_option(site)} order={order}}}"
        for site, order in sorted(r.order.items())
        if order != "sequential"
    ]
    if plan == plans.AUTO:  # this machine's target, spelled out so presk-opt repeats it
        steps.append(
            f"psk-auto-layout{{bytes={vector_bytes()} workers={default_threads()} "
            f"cpu={host_cpu()[0]}}}"
        )
    elif plan is not None and plan != plans.DEFAULT:
        steps.append(f"psk-plan{{file={_option(plan)}}}")
    return steps


_PLAIN = re.compile(r"[\w@%+=:./-]+")  # what a pass option may hold unquoted


def _option(value: str) -> str:
    """`value` as a pass option, quoted as a shell would when it holds anything else (a
    space, a comma, a quote, a bracket): presk/pipeline.py reads it back."""
    if _PLAIN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def launch_sites(module: ir.Module) -> list[str]:
    """The sites of a kernel-stage module's launches, sorted."""
    return sorted({string_attr(op, "psk.site") for op in module_launches(module.operation)})


def realize_attributes(module: ir.Module, realize) -> None:
    """The realization's storage types by site and the ways its parameters are read, as
    the module attributes `psk_kernel.storage` (`{"<site>" = "bf16"}`) and
    `psk_kernel.params` (`{"<path>" = "bf16"}`, integer weights `{"<path>" = {bits = 8 :
    i64, over = -2 : i64, scheme = "absmax"}}`), built as typed attributes that
    psk-lower-to-kernel reads back; the parameters it names checked (E7001)."""
    r = realization(realize)
    params = {}
    if r.params or r.quant or r.storage:
        program = read_host_program(module)
        realizations.check_paths(r, parameter_paths(program))
        params = _parameters_read_as(r, param_type(program))
    with module.context:
        storage = {site: ir.StringAttr.get(t) for site, t in r.storage.items()}
        read_as = {path: _parameter_attr(path, e, r) for path, e in params.items()}
        for name, entries in (("psk_kernel.storage", storage), ("psk_kernel.params", read_as)):
            if entries:
                module.operation.attributes[name] = ir.DictAttr.get(entries)


def _parameters_read_as(r, ptype) -> dict:
    """How kernels read each parameter under a mixed realization: a typed or quantised one
    as realized, every other real leaf in the default type it is stored in, so a kernel of
    another type widens or rounds it at the load rather than the host converting it."""
    if ptype is None:
        return {}
    stored = {path: r.default for path, leaf in leaves(ptype) if leaf.kind == "real"}
    return {**stored, **realized_elements(r, ptype)}


def _parameter_attr(path: str, element, r) -> ir.Attribute:
    """How kernels read a realized parameter: its type, or its integer weights (bits, the
    axis their scales are constant along from the end, and the realization's scheme)."""
    if isinstance(element, str):
        return ir.StringAttr.get(element)
    scheme = ir.StringAttr.get(r.quant[path].scheme)
    return ir.DictAttr.get({**element.entries(), "scheme": scheme})


def parameter_paths(program) -> list[str]:
    """The dotted paths of a program's parameters (none if its entry has none)."""
    t = param_type(program)
    return [p for p, _ in leaves(t)] if t is not None else []


def affine_pipeline(vector_bytes: int) -> str:
    """From the kernel stage to the affine stage, vectorising for `vector_bytes` lanes."""
    return (
        "builtin.module(psk-kernel-to-affine,psk-hoist-loads,psk-promote-registers,"
        f"psk-vectorize{{bytes={vector_bytes}}})"
    )


# No pass here may contract a multiply and an add or reassociate: the upstream passes
# below keep every arith op's rounding (none sets fastmath flags). Only a realization's
# math.fma fuses, as LLVM's fma intrinsic (psk-fma-to-llvm), never a C library call.
LLVM_PIPELINE = (
    "builtin.module(psk-strip-host,psk-fma-to-llvm,"
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
