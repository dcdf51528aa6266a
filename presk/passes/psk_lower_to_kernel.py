"""psk-lower-to-kernel: every compute op of PSK-Core becomes a kernel and a launch.

Expects verified PSK-Core (derivatives expanded; fusion groups marked by `psk-fuse`, or
none). Leaves the host program — the same functions, calls, folds, records and tuples —
with each primitive (or fusion group) replaced by `psk_kernel.launch` of a kernel: a
`func.func` over buffers of the machine type `type` (f64, f32 or bf16), built by the
primitive's `kernel` rule, or, for an elementwise group, one nest computing its members'
`scalar` rules in registers and storing the root. A module attribute
`psk_kernel.storage = {"<site>" = "bf16", …}` (a realization's `storage`) gives a group
root's kernel another machine type than `type`; a kernel reads another kernel's output in
the type it was stored in, widening or rounding at the load, across function calls and
folds too where every run of the function agrees on it. `psk_kernel.params =
{"<path>" = "bf16" | {bits = 8 : i64, over = -2 : i64, scheme = "absmax"}, …}` (a
realization's `params` and `quant`: a type, or integer weights with the axis their scales
are constant along counted from the end) does the same for parameters, integer weights
dequantised at the load. Kernels are specialised on their signature (the ops, their
attributes and wiring, the buffer types) and shared by every launch with that signature.
Constants, renames and samples stay on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from presk.core.build import Builder, V
from presk.errors import UsageError
from presk.ir.ops import module_functions, psk_type, python_value, site_of, string_attr
from presk.ir.types import TensorType
from presk.kernel.builder import KernelBuilder
from presk.kernel.machine import MACHINES, Machine, storage_of
from presk.kernel.nests import aligned_index, loops
from presk.kernel.weights import Weights
from presk.passes import Pass
from presk.prims import by_op, read_attrs
from presk.prims.base import Apply
from presk.reach import parameter_elements, stored_elements


@dataclass
class Group:
    ops: list  # ir.Operation, in block order, the root last

    @property
    def root(self):
        return self.ops[-1]

    @property
    def elementwise(self) -> bool:
        """Built as one nest of scalar rules (a kernel rule builds a lone op otherwise)."""
        return len(self.ops) > 1 or by_op(self.root.name).kernel is None

    @property
    def inputs(self) -> list:
        """The values from outside the group it reads, in order of first use (read when
        asked: launches placed before this group changed what its ops read)."""
        produced = {r for o in self.ops for r in o.results}
        out: list = []
        for o in self.ops:
            for v in o.operands:
                if v not in produced and v not in out:
                    out.append(v)
        return out


def _const_text(v) -> str | None:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "psk.const":
        return None
    return string_attr(owner.operation, "value")


def _groups(block) -> list[Group]:
    """The kernels of a host block: each fusion group, and each other lowerable op."""
    by_root: dict[str, list] = {}
    singles = []
    for op in block.operations:
        op = op.operation
        prim = by_op(op.name)
        if prim is None or prim.on_host:
            continue
        group = string_attr(op, "psk.group") or site_of(op)
        by_root.setdefault(group, []).append(op)
        singles.append(group) if group == site_of(op) else None
    return [Group(by_root[site]) for site in singles]


class Lowering:
    def __init__(
        self, module, machine: Machine, storage: dict[str, str], params: dict, hosts: list
    ):
        self.module = module
        self.default = machine
        self.storage = storage  # a group root's site -> its machine type, where not the default
        self.body = module.regions[0].blocks[0]
        self.kernels: dict[str, str] = {}  # signature -> symbol
        self.produced: dict = {}  # a launch's result -> its buffer element type
        self.params = params  # a realized parameter leaf -> its type or integer weights
        self.groups = {f: _groups(f.regions[0].blocks[0]) for f in hosts}
        roots = {g.root.results[0]: self.machine_of(g) for gs in self.groups.values() for g in gs}
        # a host value every run of its function receives from kernels of one element type
        self.stored = stored_elements(module, lambda op: _stored(op, roots))

    def element(self, v, machine: Machine) -> str | Weights:
        """The element type a kernel in `machine` reads `v` in: the type the launch that
        made it stored it, or a realized parameter's (`bf16`, or `Weights`:
        presk/reach.py), read through widening, rounding or dequantising loads
        with no copy; else the kernel's own (the host converts at its edge)."""
        return (
            self.produced.get(v)
            or self.params.get(v)
            or self.stored.get(v)
            or storage_of(psk_type(v), machine)
        )

    def machine_of(self, g: Group) -> Machine:
        return MACHINES[self.storage.get(site_of(g.root) or "", self.default.name)]

    def signature(self, g: Group, inputs: list, consts: dict, machine: Machine) -> str:
        index = {v: ("in", i) for i, v in enumerate(inputs)}
        index.update({v: ("const", text) for v, text in consts.items()})
        parts = []
        for k, op in enumerate(g.ops):
            for r in op.results:
                index[r] = ("op", k)
            prim = by_op(op.name)
            wiring = [index[v] for v in op.operands]
            parts.append((prim.name, sorted(read_attrs(prim, op).items()), wiring))
        ins = [(self.element(v, machine), psk_type(v)) for v in inputs]
        return repr((machine.name, parts, ins, psk_type(g.root.results[0])))

    def kernel(self, g: Group, inputs: list, consts: dict) -> str:
        machine = self.machine_of(g)
        key = self.signature(g, inputs, consts, machine)
        if key in self.kernels:
            return self.kernels[key]
        root = by_op(g.root.name)
        symbol = f"k{len(self.kernels)}.{root.name}"
        out_t = psk_type(g.root.results[0])
        buffers = [(self.element(v, machine), psk_type(v)) for v in inputs]
        if root.draws:  # the mask the host draws comes last
            buffers.append(("i8", out_t.with_kind("bool")))
        out = (storage_of(out_t, machine), out_t)
        kb = KernelBuilder(self.body, symbol, root.name, machine, buffers, out, g.root.location)
        if not g.elementwise:
            op = g.root
            types = [psk_type(v) for v in op.operands]
            root.kernel(kb, Apply(read_attrs(root, op), types, out_t, site_of(op) or ""))
        else:
            self.elementwise(kb, g, inputs, consts, out_t, root.draws is not None)
        kb.finish()
        with kb.ctx:  # how many ops of PSK-Core the kernel computes (fusion's saving)
            kb.func.attributes["psk_kernel.ops"] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), len(g.ops)
            )
        self.kernels[key] = symbol
        return symbol

    def elementwise(
        self,
        kb: KernelBuilder,
        g: Group,
        inputs: list,
        consts: dict,
        out_t: TensorType,
        masked: bool,
    ) -> None:
        with loops(kb, out_t.shape) as o:
            values: dict = {}
            for op in g.ops:
                prim = by_op(op.name)
                args = []
                for v in op.operands:
                    if v in values:
                        args.append(values[v])
                    elif v in consts:  # in the arithmetic type, rounded once from its text
                        args.append(kb.const(consts[v]))
                    else:
                        i = inputs.index(v)
                        args.append(kb.load(i, aligned_index(psk_type(v), out_t, o)))
                if masked:
                    args.append(kb.load(len(inputs), o))
                types = [psk_type(v) for v in op.operands]
                ap = Apply(read_attrs(prim, op), types, psk_type(op.results[0]), site_of(op) or "")
                values[op.results[0]] = prim.scalar(kb, args, ap)
            kb.store(values[g.root.results[0]], o)

    def launch(self, g: Group, inputs: list, symbol: str) -> None:
        root = g.root
        prim = by_op(root.name)
        b = Builder(root.context, ir.InsertionPoint(root), "", root.location)
        packed = b.tuple([V(v, psk_type(v)) for v in inputs])
        with root.context:
            attrs = {
                "kernel": ir.FlatSymbolRefAttr.get(symbol),
                "psk.site": ir.StringAttr.get(site_of(root) or ""),
            }
            if prim.draws:  # what the host needs to draw: the kind, the attributes, the key
                attrs["psk_kernel.draw"] = ir.StringAttr.get(prim.name)
                attrs.update({name: root.attributes[name] for name in prim.attr_kinds})
                if "psk.key" in root.attributes:
                    attrs["psk.key"] = root.attributes["psk.key"]
        new = b.op("psk_kernel.launch", [packed], psk_type(root.results[0]), attrs)
        self.produced[new.value] = storage_of(psk_type(root.results[0]), self.machine_of(g))
        root.results[0].replace_all_uses_with(new.value)
        for op in reversed(g.ops):
            op.erase()


def _stored(op, roots: dict) -> str | None:
    """The element a group root's kernel stores its result in (None for an op the host
    computes, or a member of a group)."""
    machine = roots.get(op.results[0]) if len(op.results) == 1 else None
    if machine is None:
        return None
    t = psk_type(op.results[0])
    return storage_of(t, machine) if isinstance(t, TensorType) else None


def _parameter_elements(module) -> dict[str, str | Weights]:
    """A realization's parameter types and integer weights by path, read from the
    `psk_kernel.params` dictionary's typed entries."""
    if "psk_kernel.params" not in module.attributes:
        return {}
    out: dict[str, str | Weights] = {}
    for entry in ir.DictAttr(module.attributes["psk_kernel.params"]):
        if isinstance(entry.attr, ir.StringAttr):
            out[entry.name] = entry.attr.value
        elif isinstance(entry.attr, ir.DictAttr) and "bits" in entry.attr and "over" in entry.attr:
            out[entry.name] = Weights.read(entry.attr)
        else:
            raise UsageError(
                f"psk-lower-to-kernel: parameter {entry.name} is read as {entry.attr}, not a "
                "type or {bits, over}"
            )
    return out


@dataclass(frozen=True)
class PskLowerToKernel(Pass):
    name = "psk-lower-to-kernel"
    description = (
        "replace each primitive (or fusion group) by a kernel in a machine type and its launch"
    )
    type: str = "f64"

    def run(self, module) -> None:
        machine = MACHINES.get(self.type)
        if machine is None:
            raise UsageError(f"psk-lower-to-kernel: type is f64, f32 or bf16, not {self.type!r}")
        storage = {}
        if "psk_kernel.storage" in module.attributes:  # a realization's types by site
            storage = python_value(module.attributes["psk_kernel.storage"])
        for site, name in storage.items():
            if name not in MACHINES:
                raise UsageError(f"psk-lower-to-kernel: {site} has type {name!r}")
        elements = _parameter_elements(module)
        hosts = [f for f in module_functions(module) if "psk_kernel.kernel" not in f.attributes]
        params = parameter_elements(module, elements)
        lowering = Lowering(module, machine, storage, params, hosts)
        module.attributes["psk_kernel.type"] = ir.StringAttr.get(machine.name)
        for func in hosts:
            for g in lowering.groups[func]:
                inputs, consts = g.inputs, {}
                if g.elementwise:  # constants go into the nest, not through buffers
                    consts = {v: t for v in inputs if (t := _const_text(v)) is not None}
                    inputs = [v for v in inputs if v not in consts]
                lowering.launch(g, inputs, lowering.kernel(g, inputs, consts))


PASS = PskLowerToKernel
