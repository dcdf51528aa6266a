"""psk-entry-wrapper: a `main` that runs one kernel on known inputs and prints its output.

For upstream `mlir-runner`: `main` allocates the kernel's buffers, fills input element n
(in row-major order) with ((n mod 7) + 1) / 4 for reals, 0 for indices and 1 for mask
elements, launches the kernel over its whole outer loop, and prints every output element
with `vector.print`, one a line (bf16 widened to f32). Runs on a module at the affine
stage; `kernel` names the kernel (default: the first).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from presk.errors import UsageError
from presk.kernel.loops import kernel_funcs
from presk.passes import Pass


def _nest(shape, body: list[str], indent: str = "    ") -> list[str]:
    """Affine loops over `shape` around `body`, with `%lin` the row-major position."""
    ivs = [f"%i{d}" for d in range(len(shape))]
    lines = [
        f"{indent}{'  ' * d}affine.for {iv} = 0 to {n} {{"
        for d, (iv, n) in enumerate(zip(ivs, shape, strict=True))
    ]
    inner = indent + "  " * len(shape)
    dims = ", ".join(f"d{d}" for d in range(len(shape)))
    expr = "0"
    for d, n in enumerate(shape):
        expr = f"d{d}" if d == 0 else f"({expr}) * {n} + d{d}"
    lines.append(f"{inner}%lin = affine.apply affine_map<({dims}) -> ({expr})>({', '.join(ivs)})")
    lines += [inner + line.replace("[IDX]", f"[{', '.join(ivs)}]") for line in body]
    lines += [f"{indent}{'  ' * d}}}" for d in reversed(range(len(shape)))]
    return lines


def wrapper_text(f: ir.Operation) -> str:
    block = f.regions[0].blocks[0]
    memrefs = [a.type for a in list(block.arguments)[:-2]]
    arith = "f64" if f.attributes["psk_kernel.type"].value == "f64" else "f32"
    name = f.attributes["sym_name"].value
    split = f.attributes["psk_kernel.split"].value
    lines = [
        "func.func @main() attributes {psk_kernel.entry} {",
        "  %c1 = arith.constant 1 : i64",
        "  %c7 = arith.constant 7 : i64",
        f"  %quarter = arith.constant 0.25 : {arith}",
    ]
    for k, t in enumerate(memrefs):
        elem = str(t.element_type)
        lines.append(f"  %b{k} = memref.alloc() : {t}")
        if k == len(memrefs) - 1:
            break
        if elem in ("i64", "i8"):
            fill = [f"%v = arith.constant {0 if elem == 'i64' else 1} : {elem}"]
        else:
            fill = [
                "%n = arith.index_cast %lin : index to i64",
                "%r = arith.remsi %n, %c7 : i64",
                "%r1 = arith.addi %r, %c1 : i64",
                f"%x = arith.sitofp %r1 : i64 to {arith}",
                f"%v = arith.mulf %x, %quarter : {arith}",
            ]
            if elem != arith:
                fill = [
                    *fill[:-1],
                    fill[-1].replace("%v =", "%w ="),
                    f"%v = arith.truncf %w : {arith} to {elem}",
                ]
        shape = list(t.shape) or [1]
        store = (
            f"affine.store %v, %b{k}[IDX] : {t}" if t.shape else f"affine.store %v, %b{k}[] : {t}"
        )
        lines += _nest(shape, [*fill, store], "  ")
    args = ", ".join(f"%b{k}" for k in range(len(memrefs)))
    types = ", ".join(str(t) for t in memrefs)
    lines += [
        "  %lo = arith.constant 0 : index",
        f"  %hi = arith.constant {split} : index",
        f"  func.call @{name}({args}, %lo, %hi) : ({types}, index, index) -> ()",
    ]
    out = memrefs[-1]
    elem = str(out.element_type)
    load = (
        f"%x = affine.load %b{len(memrefs) - 1}[IDX] : {out}"
        if out.shape
        else f"%x = affine.load %b{len(memrefs) - 1}[] : {out}"
    )
    show = [load]
    if elem == "bf16":
        show += ["%p = arith.extf %x : bf16 to f32", "vector.print %p : f32"]
    else:
        show.append(f"vector.print %x : {elem}")
    lines += _nest(list(out.shape) or [1], show, "  ")
    lines += ["  return", "}"]
    return "\n".join(lines)


def _signature(f: ir.Operation) -> str:
    types = [str(a.type) for a in f.regions[0].blocks[0].arguments]
    return f"({', '.join(types)})"


@dataclass(frozen=True)
class PskEntryWrapper(Pass):
    name = "psk-entry-wrapper"
    description = "add a main that runs one kernel on known inputs and prints its output"
    kernel: str = ""

    def run(self, module) -> None:
        kernels = {f.attributes["sym_name"].value: f for f in kernel_funcs(module)}
        if not kernels:
            raise UsageError("psk-entry-wrapper: the module has no kernel")
        if self.kernel and self.kernel not in kernels:
            raise UsageError(
                f"psk-entry-wrapper: no kernel {self.kernel} (kernels: {', '.join(kernels)})"
            )
        f = kernels[self.kernel] if self.kernel else next(iter(kernels.values()))
        if not any(isinstance(a.type, ir.MemRefType) for a in f.regions[0].blocks[0].arguments):
            raise UsageError("psk-entry-wrapper runs after psk-kernel-to-affine")
        # parsed beside a declaration of the kernel, for the call to verify
        decl = f"func.func private @{f.attributes['sym_name'].value}{_signature(f)}\n"
        parsed = ir.Module.parse(wrapper_text(f) + "\n" + decl, module.context)
        main = parsed.body.operations[0].operation
        main.move_before(list(module.regions[0].blocks[0].operations)[0].operation)


PASS = PskEntryWrapper
