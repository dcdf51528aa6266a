"""An entry's kernels as C, through MLIR's EmitC dialect and `mlir-translate --mlir-to-cpp`.

From the kernel stage, the kernels take the MLIR backend's route without its vector lanes
(the C compiler may vectorise; it reassociates nothing without fast-math), then leave it
for EmitC:

    psk-kernel-to-affine, psk-hoist-loads, psk-promote-registers     (SCALAR_AFFINE)
    psk-strip-host, arith-expand{include-bf16=true}, lower-affine    (SCALAR_LOOPS)
    bf16 buffers read as their bits (i16); bit casts as C helpers (below)
    convert-math-to-libm, convert-to-emitc                           (TO_EMITC)
    mlir-translate --mlir-to-cpp

`arith-expand{include-bf16=true}` makes every bf16 widening and rounding integer
operations on the value's bits, as the native pipeline does, so afterwards a bf16 is only
ever stored, loaded and bit-cast: the buffers are retyped as `i16` (EmitC has no C type
for bf16). EmitC has no bit cast between a float and an integer either; each becomes a
call of `presk_f32_bits` or `presk_bits_f32` (memcpy, in the export's runtime C). The
math functions call the C library's, as the native kernels do (`convert-math-to-libm`),
except presk's own exp, erf and tanh (presk/kernel/functions.py), which `psk-kernel-to-affine`
has already written as arithmetic and bit casts, so the C computes their bits too.
"""

from __future__ import annotations

import re
import struct
import subprocess

from mlir import ir
from mlir.dialects import arith, emitc, memref

from presk.errors import ToolchainError, UsageError
from presk.passes.psk_strip_host import PskStripHost
from presk.pipeline import Pipeline, Upstream
from presk.stages import SCALAR_AFFINE
from presk.toolchain import mlir_tool

SCALAR_LOOPS = Pipeline(
    (
        PskStripHost(),
        Upstream("func.func(arith-expand{include-bf16=true})"),
        Upstream("lower-affine"),
    )
)
TO_EMITC = Pipeline((Upstream("convert-math-to-libm"), Upstream("convert-to-emitc")))
# the C helpers a bit cast becomes, by (from, to) type
BIT_CASTS = {
    ("f32", "i32"): "presk_f32_bits",
    ("i32", "f32"): "presk_bits_f32",
    ("f64", "i64"): "presk_f64_bits",
    ("i64", "f64"): "presk_bits_f64",
}
_BF16 = re.compile(r'(?<!")\bbf16\b(?!")|(?<=x)bf16\b')


def c_name(kernel: str) -> str:
    """A kernel's C function name: `k3.cross_entropy` is `k3_cross_entropy`."""
    return re.sub(r"\W", "_", kernel)


def scalar_affine(module: ir.Module) -> ir.Module:
    """The kernel stage's kernels as scalar affine loops (the host program kept, for the
    trace). Changes `module` in place and returns it."""
    SCALAR_AFFINE.run(module)
    vectors = [op for op in _ops(module.operation) if op.name.startswith("vector.")]
    if vectors:
        raise UsageError(
            f"the C export runs kernels in scalar form; a layout put `{vectors[0].name}` in "
            "one (give a plan without lanes)"
        )
    return module


def emitc_module(module: ir.Module, launched: list[str], host: str) -> str:
    """The affine-stage `module`'s kernels named in `launched`, each a `static` C function
    named by `c_name`, then the ops of `host` (MLIR text: presk/export/host.py), in the
    EmitC dialect (its text); the module is consumed."""
    with module.context, ir.Location.unknown():
        SCALAR_LOOPS.run(module)
        for f in list(module.body.operations):
            f = f.operation
            name = f.attributes["sym_name"].value
            if name not in launched:
                f.erase()
                continue
            for attr in [a for a in f.attributes if a.startswith("psk_kernel.")]:
                del f.attributes[attr]
            f.attributes["sym_name"] = ir.StringAttr.get(c_name(name))
            f.attributes["sym_visibility"] = ir.StringAttr.get("private")
        for attr in list(module.operation.attributes):
            del module.operation.attributes[attr]
        _scalars_as_one_element(module)
        _unsigned_index_division_as_signed(module)
        _scratch_on_the_stack(module)
        _bf16_constants_as_bits(module)
        text = _BF16.sub("i16", str(module)).rstrip()
        assert text.endswith("}")
        module = ir.Module.parse(f"{text[:-1]}\n{host}\n}}", module.context)
        _bit_casts_as_calls(module)
        TO_EMITC.run(module)
        _drop_unused(module)
        return str(module)


def to_c(emitc_text: str) -> str:
    """EmitC text printed as C by the pinned `mlir-translate --mlir-to-cpp`."""
    run = subprocess.run(
        [mlir_tool("mlir-translate"), "--mlir-to-cpp"],
        input=emitc_text,
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        said = (run.stderr.strip().splitlines() or [f"exit status {run.returncode}"])[0]
        raise ToolchainError(f"mlir-translate --mlir-to-cpp failed: {said}")
    return run.stdout


def _ops(root: ir.Operation) -> list[ir.Operation]:
    found = []
    root.walk(lambda op: found.append(op) or ir.WalkResult.ADVANCE)
    return found


def _scalars_as_one_element(module: ir.Module) -> None:
    """Each buffer of rank 0 (a scalar, such as a mean over everything) a buffer of one
    element: EmitC gives a memref argument a C array type, which has a rank."""
    index = ir.IndexType.get()
    for f in module.body.operations:
        f = f.operation
        args = list(f.regions[0].blocks[0].arguments)
        scalars = [a for a in args if isinstance(a.type, ir.MemRefType) and a.type.rank == 0]
        for a in scalars:
            a.set_type(ir.MemRefType.get([1], a.type.element_type))
            for use in [u.owner for u in a.uses]:
                with ir.InsertionPoint(use), use.location:
                    zero = arith.ConstantOp(index, 0).result
                    if use.name == "memref.load":
                        new = memref.LoadOp(a, [zero])
                        use.results[0].replace_all_uses_with(new.result)
                    else:  # memref.store
                        memref.StoreOp(use.operands[0], a, [zero])
                use.erase()
        if scalars:
            inputs = [a.type for a in args]
            results = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value).results
            f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))


# EmitC ops without effects: erased when nothing reads what they compute
_PURE = {
    "emitc." + name
    for name in (
        "constant literal load cast add sub mul div rem cmp conditional logical_and "
        "logical_or logical_not bitwise_and bitwise_or bitwise_xor bitwise_not "
        "bitwise_left_shift bitwise_right_shift unary_minus unary_plus subscript"
    ).split()
}


def _pure(op: ir.Operation) -> bool:
    """Whether `op` has no effect: a pure EmitC op, a call of a bit-cast helper, or an
    expression of such ops."""
    if op.name == "emitc.call_opaque":
        return ir.StringAttr(op.attributes["callee"]).value in BIT_CASTS.values()
    if op.name == "emitc.expression":
        inner = [o for o in _ops(op) if o != op and o.name != "emitc.yield"]
        return all(_pure(o) for o in inner)
    return op.name in _PURE


def _drop_unused(module: ir.Module) -> None:
    """Erase each value computed and never read, as LLVM does for the native kernels (the
    conversion to EmitC folds `1.0 * x` to x, say, and leaves the constant): C's -Wall
    -Werror refuses an unused variable. Goes only: an op without effects (or a call of a
    bit-cast helper), and a variable only ever assigned, with its assignments."""
    while True:
        dead = []
        for op in _ops(module.operation):
            unused = op.results and all(not list(r.uses) for r in op.results)
            if unused and _pure(op):
                dead.append(op)
            elif op.name == "emitc.variable":
                users = [u.owner for u in op.results[0].uses]
                if all(u.name == "emitc.assign" and u.operands[0] == op.results[0] for u in users):
                    dead.extend([*users, op])
        if not dead:
            return
        for op in dead:
            op.erase()


_SIGNED = {"arith.divui": arith.DivSIOp, "arith.remui": arith.RemSIOp}


def _unsigned_index_division_as_signed(module: ir.Module) -> None:
    """Each unsigned division or remainder of an index by a positive constant (4-bit
    integer weights find an element's byte and half so) a signed one, which EmitC
    converts (it converts no unsigned index division). The same numbers: the dividend is
    an element's position in a buffer, from 0 to below 2^63."""
    for op in _ops(module.operation):
        if op.name not in _SIGNED or not isinstance(op.results[0].type, ir.IndexType):
            continue
        divisor = op.operands[1].owner
        positive = (
            isinstance(divisor, ir.OpView | ir.Operation)
            and divisor.name == "arith.constant"
            and ir.IntegerAttr(divisor.attributes["value"]).value > 0
        )
        if not positive:
            raise UsageError(f"the C export has no unsigned index `{op.name}` but by a constant")
        with ir.InsertionPoint(op), op.location:
            signed = _SIGNED[op.name](op.operands[0], op.operands[1])
        op.results[0].replace_all_uses_with(signed.result)
        op.erase()


def _scratch_on_the_stack(module: ir.Module) -> None:
    """Each kernel's scratch row (a softmax's or cross-entropy's exponentials, made once at
    the kernel's entry) a C array on the stack: EmitC converts a `memref.alloca` without
    an alignment, but not a `memref.dealloc`, so a large one, on the heap natively, is an
    `alloca` too. A row of a million f32 takes 4 MB of the program's 8 MB stack."""
    for op in _ops(module.operation):
        if op.name == "memref.dealloc":
            op.erase()
        elif op.name in ("memref.alloc", "memref.alloca"):
            with ir.InsertionPoint(op), op.location:
                on_stack = memref.AllocaOp(op.results[0].type, [], [])
            op.results[0].replace_all_uses_with(on_stack.result)
            op.erase()


def _bf16_constants_as_bits(module: ir.Module) -> None:
    """Each bf16 constant spelled by its bits (an i16 constant bit-cast to bf16), so the
    retyping of bf16 as i16 leaves a constant of the same bits."""
    i16, bf16 = ir.IntegerType.get_signless(16), ir.BF16Type.get()
    for op in _ops(module.operation):
        if op.name != "arith.constant" or op.results[0].type != bf16:
            continue
        value = ir.FloatAttr(op.attributes["value"]).value
        bits = struct.unpack("<I", struct.pack("<f", value))[0] >> 16  # exact: a bf16 value
        signed = bits - (1 << 16) if bits >= 1 << 15 else bits
        with ir.InsertionPoint(op), op.location:
            c = arith.ConstantOp(i16, ir.IntegerAttr.get(i16, signed))
            cast = arith.BitcastOp(bf16, c.result)
        op.results[0].replace_all_uses_with(cast.result)
        op.erase()


def _bit_casts_as_calls(module: ir.Module) -> None:
    """A bit cast of a type to itself (what was bf16 ↔ i16) dropped; a float ↔ integer one
    a call of its C helper."""
    for op in _ops(module.operation):
        if op.name != "arith.bitcast":
            continue
        source, result = op.operands[0], op.results[0]
        if source.type == result.type:
            result.replace_all_uses_with(source)
            op.erase()
            continue
        helper = BIT_CASTS.get((str(source.type), str(result.type)))
        if helper is None:
            raise UsageError(f"the C export has no bit cast from {source.type} to {result.type}")
        with ir.InsertionPoint(op), op.location:
            call = emitc.CallOpaqueOp([result.type], helper, [source])
        result.replace_all_uses_with(call.results[0])
        op.erase()
