"""Printing and writing a run's output: text with axes, JSON with every digit, npz. A
certified reference's balls print as their midpoints, then their radii and the bits of
the tensor every radius leaves certain."""

from __future__ import annotations

import io
import json
import math

import numpy as np

from presk.fileio import write_atomic
from presk.prims import balls, exact
from presk.runtime.values import Tensor, Value, leaves


def float64(t: Tensor) -> np.ndarray:
    """A real tensor's values as a C-ordered float64 array (an exact value rounded once;
    a scalar stays 0-d)."""
    if t.data.dtype == object:
        return exact.to_float64(t.data)
    return np.array(t.data, dtype=np.float64, order="C")


def arrays(value: Value) -> dict[str, np.ndarray]:
    """Each tensor of `value` by its dotted path: reals as float64, indices and masks as
    they are (int64, bool)."""
    return {
        p: float64(t) if t.type.kind == "real" else np.asarray(t.data) for p, t in leaves(value)
    }


def held_arrays(value: Value) -> dict[str, np.ndarray]:
    """Each tensor of `value` by its dotted path, in the type it is held in: a machine
    real as it is (float64, float32 or bfloat16), an exact one rounded once to float64,
    indices and masks as they are (int64, bool). Copies: a backend may reuse its buffers."""
    return {
        p: float64(t) if t.data.dtype == object else np.array(t.data, order="C")
        for p, t in leaves(value)
    }


def of_balls(t: Tensor) -> bool:
    """Whether a tensor holds the ball reference's balls."""
    return t.data.dtype == object and t.data.size > 0 and isinstance(t.data.flat[0], balls.arb)


def _array(data: np.ndarray, precision: int = 8) -> str:
    return np.array2string(data, precision=precision, max_line_width=100, threshold=2000)


def text(value: Value) -> str:
    """Each tensor with its type, values shown as float64 (JSON has every digit); balls
    as their midpoints, `±` their radii, and the bits certified."""
    out = []
    for path, t in leaves(value):
        head = f"{path} : {t.type.text()}" if path else t.type.text()
        out.append(head)
        data = float64(t) if t.type.kind == "real" else np.asarray(t.data)
        out.append(_array(data))
        if of_balls(t):
            out.append("± " + _array(balls.radius(t.data), 2))
            bits = balls.correct_bits(t.data)  # None: every ball exact
            certain = "every value exact" if bits is None else f"{bits} bits of every value"
            out.append(f"certified: {certain}")
    return "\n".join(out) + "\n"


def digits_for(t: Tensor, bits: int | None) -> int:
    """Significant decimal digits that identify a value of this buffer's precision."""
    if t.data.dtype == object:
        return math.ceil((bits or 256) * math.log10(2)) + 1
    return {np.dtype(np.float64): 17, np.dtype(np.float32): 9}.get(t.data.dtype, 5)


def _decimal(x, digits: int) -> str:
    return format(x, f".{digits - 1}e")


def json_value(value: Value, bits: int | None) -> object:
    if isinstance(value, Tensor):
        t = value
        certified = {}
        if t.type.kind == "real":
            d = digits_for(t, bits)
            data = t.data if t.data.dtype == object else np.asarray(t.data, dtype=np.float64)
            if of_balls(t):  # the midpoints' digits, then each radius and the bits certain
                radii = np.vectorize(lambda x: _decimal(x, 3), otypes=[object])
                certified = {
                    "radii": radii(balls.radius(data)).tolist(),
                    "certified_bits": balls.correct_bits(data),
                }
                data = balls.midpoints(data)
            values = np.vectorize(lambda x: _decimal(x, d), otypes=[object])(data).tolist()
        else:
            values = np.asarray(t.data).tolist()
        return {
            "type": t.type.text(),
            "kind": t.type.kind,
            "shape": list(t.type.shape),
            "axes": [a.name for a in t.type.axes],
            "values": values,
            **certified,
        }
    if isinstance(value, dict):
        return {"fields": {k: json_value(v, bits) for k, v in value.items()}}
    return {"items": [json_value(v, bits) for v in value]}


def json_text(value: Value, header: dict, bits: int | None) -> str:
    return (
        json.dumps({**header, "output": json_value(value, bits)}, indent=1, ensure_ascii=False)
        + "\n"
    )


def write_npz(path: str, value: Value) -> None:
    """Every leaf as a float64 (or int64, bool) array named by its path (`output` for a
    single tensor), written atomically."""
    named = {p or "output": a for p, a in arrays(value).items()}
    buf = io.BytesIO()
    np.savez(buf, **named)
    write_atomic(path, buf.getvalue())
