"""`make c-conformance`: every conformance case and tutorial entry exported to C
(`presk export --target c`), built with the system cc, run on its parameters written to a
float64 checkpoint (`./model --weights CKPT.psk.d`), and its outputs compared bit for bit
with `--backend mlir --weights CKPT.psk.d`'s on the same inputs, in f64, f32 and bf16.
model.bin is given other parameters, so only the checkpoint's can give the bits.

    .venv/bin/python tools/c_conformance.py [--types f64,f32] [-k SUBSTRING]

Prints a line a case and type, then a summary; exit status 1 on any mismatch or failure.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from programs import entries  # noqa: E402

from presk import backends  # noqa: E402
from presk.backends.host import CallContext  # noqa: E402
from presk.errors import PreskError  # noqa: E402
from presk.export import export_c  # noqa: E402
from presk.runtime import checkpoint  # noqa: E402
from presk.runtime.inputs import param_type  # noqa: E402
from presk.runtime.values import Tensor, leaves, map_tensors  # noqa: E402
from tests.conformance.suite import (  # noqa: E402
    TYPES,
    Case,
    all_cases,
    core_of,
    inputs,
    machine_output,
    module_of,
)


def tutorial_cases() -> list[Case]:
    out = []
    for path, args in entries():
        if path.parent.name != "tutorial":
            continue
        entry = args[args.index("--entry") + 1]
        dims = tuple(args[i + 1] for i, a in enumerate(args) if a == "--dim")
        out.append(Case(f"{path.name} {entry}", str(path.relative_to(REPO)), entry, dims))
    return out


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def run_c(case: Case, machine: str, work: Path, ckpt_dtype=np.float64) -> list[np.ndarray]:
    """The case's outputs from its C export, built in `work` and run on its parameters
    stored as `ckpt_dtype` in `work/checkpoint.psk.d` (model.bin holds other ones)."""
    given = inputs(case)
    core = core_of(case)
    takes_params = param_type(core.view) is not None
    params, args = (given[0], given[1:]) if takes_params else (None, given)
    others = None
    if takes_params:  # model.bin's parameters, which --weights replaces
        others = map_tensors(lambda t: Tensor(t.type, np.asarray(t.data) + 1), params)
    model = export_c(core.lower(machine), params=others)
    model.write(work)
    build = subprocess.run(["make", "-s", "-C", str(work), "model"], capture_output=True, text=True)
    if build.returncode != 0:
        raise RuntimeError(f"the build failed: {build.stderr.strip()[-2000:]}")
    (work / "inputs.bin").write_bytes(model.input_bytes(args))
    names = [str(work / n) for n in ("model", "model.bin", "inputs.bin", "outputs.bin")]
    if takes_params:
        stored = map_tensors(
            lambda t: Tensor(t.type, np.asarray(t.data).astype(ckpt_dtype)), params
        )
        checkpoint.save(str(work / CHECKPOINT), stored, {"entry": case.entry})
        names[1:1] = ["--weights", str(work / CHECKPOINT)]
    ran = subprocess.run(names, capture_output=True, text=True)
    if ran.returncode != 0:
        raise RuntimeError(f"./model exited {ran.returncode}: {ran.stderr.strip()}")
    return model.read_outputs((work / "outputs.bin").read_bytes())


CHECKPOINT = "checkpoint.psk.d"


def mlir_output(case: Case, machine: str, work: Path):
    """`--backend mlir --weights work/checkpoint.psk.d` on the case's inputs (its own
    parameters where it takes none)."""
    core = core_of(case)
    t = param_type(core.view)
    if t is None:
        return machine_output(case, machine, "mlir")
    params = checkpoint.load(str(work / CHECKPOINT), t)[0]
    mlir = backends.make("mlir", module_of(case), realize=machine)
    return mlir.call([params, *inputs(case)[1:]], CallContext())


def check(case: Case, machine: str, work: Path, ckpt_dtype=np.float64) -> str:
    """ "same", or what differs."""
    got = run_c(case, machine, work, ckpt_dtype)
    want = [np.asarray(t.data) for _, t in leaves(mlir_output(case, machine, work))]
    if len(got) != len(want):
        return f"{len(got)} outputs, mlir gives {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if not same_bits(g, w):
            return f"output {i} differs in {int(np.sum(g != w))} of {w.size} elements"
    return "same"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--types", default=",".join(TYPES))
    p.add_argument("-k", default="", help="only the cases whose name holds this")
    a = p.parse_args(argv)
    types = a.types.split(",")
    cases = [c for c in all_cases() + tutorial_cases() if a.k in c.name]
    failed = refused = 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="presk-c-conformance-") as tmp:
        for i, case in enumerate(cases):
            name = case.name + (" (drawn)" if case.drawn else "")
            for machine in types:
                work = Path(tmp) / f"{i}-{machine}"
                try:
                    result = check(case, machine, work)
                except PreskError as e:  # a host step the export refuses: not covered
                    result = f"refused: {e.message}"
                    refused += 1
                except RuntimeError as e:
                    result = f"failed: {e}"
                failed += result not in ("same",) and not result.startswith("refused")
                print(f"{name:48s} {machine:5s} {result}", flush=True)
    total = len(cases) * len(types)
    took = time.perf_counter() - start
    same = total - failed - refused
    print(
        f"\n{same} of {total} exports bit-identical to --backend mlir, {failed} not, "
        f"{refused} refused by the export ({took:.0f} s)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
