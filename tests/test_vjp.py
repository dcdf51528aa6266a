"""Reverse-mode derivatives (the psk-vjp pass) against central finite differences computed
by the reference at 256 bits with step 2^-60: the two agree to 2^-90 relative or better.

Each check is directional: for a random direction v and cotangent c, the derivative of
<c, f(x + h v)> at h = 0 must be Σ <vjp(x, c)_i, v_i>. The truncation error of the
central difference is O(h²), about 2^-120, and its rounding error about 2^-196.
"""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from programs import REPO

from presk import stages
from presk.backends.host import CallContext
from presk.backends.interp import Interpreter
from presk.core.program import read_host_program
from presk.front.bindings import parse_entry
from presk.front.check import check_program
from presk.front.elaborate import elaborate
from presk.front.parser import parse
from presk.ir.context import new_context
from presk.prims import exact
from presk.runtime.inputs import arguments, parameters
from presk.runtime.values import Tensor, leaves, map_tensors

BITS = 256
H = gmpy2.mpfr(2) ** -60
PRIMS = REPO / "tests" / "data" / "prims.psk"
DIMS = {"N": 3, "M": 4, "K": 5}
# entries of prims.psk whose output is not real (nothing to differentiate)
NOT_REAL = {"argmax_", "causal"}


def core_of(text: str, file: str, entry: str, dims: dict, remat: str = "store"):
    prog = parse(text, file)
    check_program(prog)
    e = elaborate(prog, parse_entry(entry), dims, {}, new_context())
    stages.core(e.module, remat)
    return read_host_program(e.module)


def _direction(value, seed: int):
    rng = np.random.default_rng(seed)
    return map_tensors(
        lambda t: Tensor(t.type, rng.standard_normal(t.type.shape)) if t.type.kind == "real" else t,
        value,
    )


def _zip(value, v, h):
    out = []
    for (_, t), (_, d) in zip(leaves(value), leaves(v), strict=True):
        if t.type.kind != "real":
            out.append(t)
        else:
            out.append(
                Tensor(
                    t.type, np.asarray(exact.exact(t.data) + exact.exact(d.data) * h, dtype=object)
                )
            )
    it = iter(out)
    return map_tensors(lambda _t: next(it), value)


def _dot(a, b) -> gmpy2.mpfr:
    total = gmpy2.mpfr(0)
    for (_, x), (_, y) in zip(leaves(a), leaves(b), strict=True):
        if x.type.kind == "real":
            products = np.asarray(exact.exact(x.data) * exact.exact(y.data), dtype=object)
            total += sum(products.ravel().tolist(), gmpy2.mpfr(0))
    return total


def _check(directional: gmpy2.mpfr, finite: gmpy2.mpfr, scale: gmpy2.mpfr) -> None:
    gap = abs(directional - finite)
    assert gap <= gmpy2.mpfr(2) ** -90 * max(abs(directional), scale), (
        float(directional),
        float(finite),
        float(gap),
    )


@pytest.mark.parametrize(
    "entry", sorted(set(parse(PRIMS.read_text(), str(PRIMS)).functions) - NOT_REAL)
)
def test_vjp_of_every_primitive_matches_finite_differences(entry):
    text = PRIMS.read_text() + f"\nfn {entry}__vjp = {entry}.vjp\n"
    f = core_of(text, str(PRIMS), entry, DIMS)
    fv = core_of(text, str(PRIMS), f"{entry}__vjp", DIMS)
    args = arguments(f, 0, None)
    y = Interpreter(f, BITS).call(args)
    ct = _direction(y, 1)
    v = _direction(args, 2)
    with gmpy2.context(precision=BITS):
        grads = Interpreter(fv, BITS).call(args + [ct])
        directional = _dot(grads, v)
        plus = Interpreter(f, BITS).call([_zip(a, d, H) for a, d in zip(args, v, strict=True)])
        minus = Interpreter(f, BITS).call([_zip(a, d, -H) for a, d in zip(args, v, strict=True)])
        finite = (_dot(plus, ct) - _dot(minus, ct)) / (2 * H)
        scale = sum((abs(_dot(g, d)) for g, d in zip(grads, v, strict=True)), gmpy2.mpfr(0))
        _check(directional, finite, scale)


SCALAR_ENTRIES = [
    ("tutorial/02_regression.psk", "MLP{4, 8, 1}.mse", {"N": 16}),
    ("tests/train/mlp_regression.psk", "Regression.loss", {"N": 8}),
    ("tutorial/05_minigpt.psk", "MiniGPT{64, 16, 2, 2}.loss", {"B": 2, "T": 8}),
]


@pytest.mark.parametrize("path,entry,dims", SCALAR_ENTRIES, ids=[e for _, e, _ in SCALAR_ENTRIES])
def test_gradient_of_scalar_entries_matches_finite_differences(path, entry, dims):
    module, fn = entry.rsplit(".", 1)
    text = (REPO / path).read_text().rstrip()
    # the gradient through the module's own alias, added inside it
    text = text[: text.rindex("}")] + f"  fn {fn}__grad = grad({fn})\n}}\n"
    f = core_of(text, path, entry, dims)
    g = core_of(text, path, f"{module}.{fn}__grad", dims)
    params, args = parameters(f, 0, None), arguments(f, 0, None)
    # draw the zero-initialised parameters too, so every path of the gradient is exercised
    params = _direction(params, 3)
    v = _direction(params, 4)
    with gmpy2.context(precision=BITS):
        grads = Interpreter(g, BITS).call([params] + args)
        directional = _dot(grads, v)
        plus = Interpreter(f, BITS).call([_zip(params, v, H)] + args)
        minus = Interpreter(f, BITS).call([_zip(params, v, -H)] + args)
        finite = (exact.exact(plus.data).item() - exact.exact(minus.data).item()) / (2 * H)
        _check(directional, finite, abs(directional))


def test_store_and_recompute_give_the_same_bits():
    path = "tutorial/05_minigpt.psk"
    text = (REPO / path).read_text().rstrip()
    text = text[: text.rindex("}")] + "  fn loss__grad = grad(loss)\n}\n"
    runs = []
    for remat in ("store", "recompute"):
        g = core_of(text, path, "MiniGPT{64, 16, 2, 2}.loss__grad", {"B": 2, "T": 8}, remat)
        params = _direction(parameters(g, 0, None), 3)
        out = Interpreter(g, 64).call([params] + arguments(g, 0, None), CallContext())
        runs.append([np.asarray(exact.to_float64(t.data)) for _, t in leaves(out)])
    for a, b in zip(*runs, strict=True):
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64))
