"""The stages of presk's lowering, each a pipeline of pass objects from the stage before.

    source --elaborate--> core --psk-vjp, psk-verify--> core (derivatives expanded)
      --psk-fuse, psk-lower-to-kernel{type}, psk-contract (a realization's fused
      multiply-adds), psk-sum-order (its orders),
      psk-plan (a plan's layouts)--> kernel (a host program of launches, and the
      kernels: loop nests over buffers in a machine type)
      --psk-kernel-to-affine and the code-generation passes--> affine (the kernels as
      affine loops over memrefs, in registers and vector lanes)
      --psk-strip-host, upstream lowering--> llvm (the kernels alone, in the LLVM dialect)

The pipelines are built here once, from the passes' own objects, so `presk dump --stage
X`, the backends and `presk-opt --pass-pipeline=...` (which takes a pipeline's `text()`)
run the same passes. What a lowering to the kernel stage is for, a realization and a
plan, is resolved once into a `Lowering`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mlir import ir

from presk import plans
from presk import realize as realizations
from presk.core.program import read_host_program
from presk.ir.ops import module_launches, string_attr
from presk.ir.types import leaves
from presk.passes.psk_auto_layout import PskAutoLayout
from presk.passes.psk_contract import PskContract
from presk.passes.psk_dce import PskDce
from presk.passes.psk_fma_to_llvm import PskFmaToLlvm
from presk.passes.psk_functions import PskFunctions
from presk.passes.psk_fuse import PskFuse
from presk.passes.psk_hoist_loads import PskHoistLoads
from presk.passes.psk_keep_libm_calls import PskKeepLibmCalls
from presk.passes.psk_kernel_to_affine import PskKernelToAffine
from presk.passes.psk_lower_to_kernel import PskLowerToKernel
from presk.passes.psk_plan import PskPlan
from presk.passes.psk_promote_registers import PskPromoteRegisters
from presk.passes.psk_strip_host import PskStripHost
from presk.passes.psk_sum_order import PskSumOrder
from presk.passes.psk_vectorize import PskVectorize
from presk.passes.psk_verify import PskVerify
from presk.passes.psk_vjp import PskVjp
from presk.pipeline import Pipeline, Upstream
from presk.plans import read_plan
from presk.quantize import realized_elements
from presk.realize import Realization
from presk.runtime.inputs import param_type
from presk.toolchain import default_threads, host_cpu, vector_bytes


def core_pipeline(remat: str = "store") -> Pipeline:
    """From elaborated PSK-Core to PSK-Core with every `grad` and `vjp` expanded into
    forward and backward functions, verified."""
    return Pipeline((PskVjp(remat=remat), PskVerify()))


def core(module: ir.Module, remat: str = "store") -> ir.Module:
    """`core_pipeline(remat)` run over `module` in place; returns it."""
    return core_pipeline(remat).run(module)


@dataclass(frozen=True)
class Lowering:
    """What the kernel stage is lowered for, resolved once: the realization, its machine
    type the plan's where the plan file names one and the realization is uniform, and the
    plan (a plan file's path, `auto`, `default`, or None: each nest's default layout,
    which a native backend moves to the cost model's, `auto`)."""

    realization: Realization
    plan: str | None = None

    @classmethod
    def of(cls, realize, plan: str | None = None) -> Lowering:
        """`realize` (a `Realization` or its spelling, `f32` or `@R.json`:
        presk/realize.py) and `plan` resolved."""
        r = realize if isinstance(realize, Realization) else realizations.read(realize)
        if plan is not None and not plans.is_named(plan):
            named = read_plan(plan).get("realize")
            if named and r.uniform:
                r = replace(r, default=realizations.read(named).default)
        return cls(r, plan)

    def pipeline(self) -> Pipeline:
        """From PSK-Core (as `presk dump --stage core --format mlir` prints it, with the
        realization's attributes) to the kernel stage."""
        return self._lowering() + self._layouts()

    def lower(self, module: ir.Module) -> ir.Module:
        """PSK-Core (its derivatives expanded) lowered to kernels, fused, in the
        realization's machine type, with its storage and parameter types by site, its
        sums' orders, and the plan's layouts: `pipeline()`, run in two parts, the
        realization's sites checked against the kernels' (E7001) between them, before any
        nest moves. Changes `module` in place and returns it."""
        realize_attributes(module, self.realization)
        self._lowering().run(module)
        realizations.check_sites(self.realization, launch_sites(module))
        return self._layouts().run(module)

    def _lowering(self) -> Pipeline:
        lower = PskLowerToKernel(type=self.realization.default)
        return Pipeline((PskFuse(), lower, PskDce(), PskVerify()))

    def _layouts(self) -> Pipeline:
        """A psk-contract for the realization's contract default and each site it names, a
        psk-functions where presk's exp and erf may replace the C library's (an f32 or
        bf16 kernel, the default), a psk-sum-order for each site it orders, then the plan's
        layouts."""
        r = self.realization
        steps = [PskContract(contract="fma")] if r.contract.get("default") == "fma" else []
        if r.functions == "presk" and {r.default, *r.storage.values()} & {"f32", "bf16"}:
            steps.append(PskFunctions(impl="presk"))
        steps += [PskContract(nest=s, contract=c) for s, c in sorted(r.contract_sites.items())]
        steps += [
            PskSumOrder(nest=site, order=order)
            for site, order in sorted(r.order.items())
            if order != "sequential"
        ]
        return Pipeline(tuple(steps)) + layout_pipeline(self.plan)


def layout_pipeline(plan: str | None) -> Pipeline:
    """The plan's layouts alone: `auto` this machine's cost model's (its target spelled
    out, so presk-opt repeats it), and a `tuned` plan's before the mlir backend measures
    from them (presk/backends/tuning.py); a plan file's by psk-plan; none for `default` or
    None."""
    if plan == plans.AUTO or plans.is_tuned(plan):
        auto = PskAutoLayout(bytes=vector_bytes(), workers=default_threads(), cpu=host_cpu()[0])
        return Pipeline((auto,))
    if plan is None or plan == plans.DEFAULT:
        return Pipeline()
    return Pipeline((PskPlan(file=plan),))


def kernel(module: ir.Module, realize, plan: str | None = None) -> ir.Module:
    """`module` lowered to the kernel stage for `realize` and `plan` (`Lowering`)."""
    return Lowering.of(realize, plan).lower(module)


def launch_sites(module: ir.Module) -> list[str]:
    """The sites of a kernel-stage module's launches, sorted."""
    return sorted({string_attr(op, "psk.site") for op in module_launches(module.operation)})


def realize_attributes(module: ir.Module, realize) -> None:
    """The realization's storage types by site and the ways its parameters are read, as
    the module attributes `psk_kernel.storage` (`{"<site>" = "bf16"}`) and
    `psk_kernel.params` (`{"<path>" = "bf16"}`, integer weights `{"<path>" = {bits = 8 :
    i64, over = -2 : i64, scheme = "absmax"}}`), built as typed attributes that
    psk-lower-to-kernel reads back; the parameters it names checked (E7001)."""
    r = Lowering.of(realize).realization
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


# The kernel stage's kernels as scalar affine loops, values kept in registers (the host
# program untouched): the affine stage before its vector lanes, the C export's form.
SCALAR_AFFINE = Pipeline((PskKernelToAffine(), PskHoistLoads(), PskPromoteRegisters()))


def affine_pipeline(width: int) -> Pipeline:
    """From the kernel stage to the affine stage, vectorising for lanes of `width` bytes."""
    return SCALAR_AFFINE + Pipeline((PskVectorize(bytes=width),))


# No pass here may contract a multiply and an add or reassociate: the upstream passes
# below keep every arith op's rounding (none sets fastmath flags). Only a realization's
# math.fma fuses, as LLVM's fma intrinsic (psk-fma-to-llvm), never a C library call.
LLVM_PIPELINE = Pipeline(
    (
        PskStripHost(),
        PskFmaToLlvm(),
        Upstream("func.func(arith-expand{include-bf16=true})"),  # bf16 rounding by integer ops
        Upstream("lower-affine"),
        Upstream("convert-scf-to-cf"),
        # exp, log, … call the C library, as the kernel evaluator does
        Upstream("convert-math-to-libm"),
        Upstream("convert-vector-to-llvm"),
        Upstream("convert-math-to-llvm"),
        Upstream("expand-strided-metadata"),
        Upstream("finalize-memref-to-llvm"),
        Upstream("convert-arith-to-llvm"),
        Upstream("convert-cf-to-llvm"),
        # kernels take plain pointers
        Upstream("convert-func-to-llvm{use-bare-ptr-memref-call-conv=1}"),
        Upstream("reconcile-unrealized-casts"),
        PskKeepLibmCalls(),  # pow(x, 2) stays a call of pow, as the kernel evaluator makes it
    )
)


def affine(module: ir.Module, width: int) -> ir.Module:
    """The kernel stage's kernels lowered to affine loops and code-generated for vectors
    of `width` bytes (the host program untouched). Changes `module` in place and returns
    it."""
    return affine_pipeline(width).run(module)


def llvm(module: ir.Module) -> ir.Module:
    """An affine-stage module's kernels alone, in the LLVM dialect. Changes `module` in
    place and returns it."""
    return LLVM_PIPELINE.run(module)
