"""Where the tiny training step's compile time goes, cold and warm (issue 17).

The tiny MiniGPT (`MiniGPT{64, 16, 2, 2}.loss`, B=2, T=8) with its training step, on the
MLIR backend. Two measurements, each in fresh processes with a temporary kernel cache:

- the first call, which traces the schedule and compiles the kernels: cold (an empty
  cache) then warm (a new process, the cache the cold run filled), `--repeat` times. The
  clock starts at the call, after Python's imports and the lowering (printed beside),
  and stops once the step has run. The cold call is split into where its seconds went:
  the bundle looked for (`bundled`), the kernels' sources and the cache looked up for each
  (`sources`, `lookups`), this process's share of LLVM (`own share`), the rest of making
  the objects, mostly the wait for the worker processes' shares (`workers`), the link
  (`link`), loading and storing the library (`store+load`), the trace's own work
  (`trace`) and the replay runtime (`replay`: built or loaded on a thread beside a
  bundle's compilation, else after);
- `--split`: each kernel compiled in this process one phase at a time, alone (as a
  kernel asked for alone is, a library of its own) and together (one module, one
  object, one link): its text made (`source`), parsed, lowered by
  `stages.LLVM_PIPELINE` (`llvm passes`), LLVM's optimization at `--opt` (presk's
  `objects.OPT_LEVEL` unless given; the ExecutionEngine's construction, `llvm opt`),
  code generation (`codegen`, writing the object), the `cc` link and the `dlopen` (with
  the symbols looked up).

    python bench/compile_time.py [--realize f32] [--repeat 3] [--workers N] [--split]
                                 [--opt N] [--json]

`--json` prints the runs as one JSON object on stdout (the report goes to stderr): the
realization, and each cold and warm run's kernels, its first call, a later call and the
lowering in seconds, and the first call's parts (bench/record.py reads it).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FILE = str(REPO / "tutorial" / "05_minigpt.psk")
ENTRY = "MiniGPT{64, 16, 2, 2}.loss"
DIMS = {"B": 2, "T": 8}
# The cold call's parts, timed by wrapping the functions that do them (module, name).
PARTS = {
    "bundled": ("presk.backends.native", "Compiler.bundled"),
    "sources": ("presk.backends.mlir", "kernel_source"),
    "lookups": ("presk.backends.native", "Compiler.holds"),
    "bundle": ("presk.backends.native", "Compiler.bundle"),
    "build": ("presk.backends.native", "_build"),
    "objects": ("presk.backends.native", "write_objects"),
    "own share": ("presk.backends.objects", "write_object"),
    "replay": ("presk.backends.replay", "load"),
}


def tiny_step(realize: str):
    import presk

    core = presk.load(FILE).elaborate(ENTRY, dims=DIMS, train_step=True)
    return core.lower(realize).compile("mlir")


def child(realize: str, workers: int) -> dict:
    """One process's first call, timed and split (the JSON it prints)."""
    import importlib

    from presk.backends.native import shared_compiler

    if workers:
        shared_compiler().workers = workers

    spent = {part: 0.0 for part in PARTS}

    def timed(part, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - start

        return wrapper

    for part, (module, name) in PARTS.items():
        owner = importlib.import_module(module)
        *path, attr = name.split(".")
        for step in path:
            owner = getattr(owner, step)
        setattr(owner, attr, timed(part, getattr(owner, attr)))
    start = time.perf_counter()
    compiled = tiny_step(realize)
    lowered = time.perf_counter()
    step = compiled.drawn(0)
    begin = time.perf_counter()
    step()
    first = time.perf_counter() - begin
    begin = time.perf_counter()
    step()
    second = time.perf_counter() - begin
    parts = {
        "bundled": spent["bundled"],
        "sources": spent["sources"],
        "lookups": spent["lookups"],
        "own share": spent["own share"],
        "workers": spent["objects"] - spent["own share"],
        "link": spent["build"] - spent["objects"],
        "store+load": spent["bundle"] - spent["build"],
    }
    parts["trace"] = first - sum(parts.values())
    if not spent["bundle"]:  # else the replay runtime was loaded beside the bundle's LLVM
        parts["trace"] -= spent["replay"]
    parts["replay"] = spent["replay"]
    return {
        "lower": lowered - start,
        "first": first,
        "second": second,
        "kernels": len(compiled.backend.kernels),
        "parts": parts,
    }


def run_child(cache: str, realize: str, workers: int) -> dict:
    env = {**os.environ, "PRESK_CACHE": cache, "PRESK_PROGRESS": "0"}
    argv = [sys.executable, __file__, "--child", "--realize", realize, "--workers", str(workers)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stderr)
    return json.loads(done.stdout)


def cold_and_warm(realize: str, repeat: int, workers: int, out) -> dict[str, list[dict]]:
    """Each run's child report, cold and warm, printed to `out`."""
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="presk-compile-time-") as cache:
            for phase in runs:
                runs[phase].append(run_child(cache, realize, workers))
    print(f"{runs['cold'][0]['kernels']} kernels; first call (s): min, median, all", file=out)
    for phase, rows in runs.items():
        firsts = [r["first"] for r in rows]
        print(
            f"  {phase}: {min(firsts):.3f}  {statistics.median(firsts):.3f}  "
            f"[{', '.join(f'{x:.3f}' for x in firsts)}]   (a later call "
            f"{statistics.median(r['second'] for r in rows) * 1e3:.2f} ms, lowering "
            f"{statistics.median(r['lower'] for r in rows):.2f} s)",
            file=out,
        )
    for phase, rows in runs.items():
        best = min(rows, key=lambda r: r["first"])
        split = ", ".join(f"{k} {v:.3f}" for k, v in best["parts"].items() if v >= 5e-4)
        print(f"  {phase} call at its min (s): {split}", file=out)
    return runs


def split(realize: str, opt: int | None) -> None:
    """Each phase of compiling the step's kernels, alone and together, in this process."""
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine

    from presk import stages
    from presk.backends import native
    from presk.backends.objects import OPT_LEVEL
    from presk.toolchain import mlir_runtime_lib

    opt = OPT_LEVEL if opt is None else opt
    backend = tiny_step(realize).backend
    ops = backend.kernel_ops
    libs = [mlir_runtime_lib("libmlir_float16_utils.so")]

    def phases(groups: list[list[tuple[str, ir.Operation]]], tmp: Path) -> dict[str, float]:
        t = dict.fromkeys(["source", "parse", "llvm passes", "llvm opt", "codegen"], 0.0)
        t |= {"link": 0.0, "dlopen": 0.0}
        for i, group in enumerate(groups):
            start = time.perf_counter()
            texts = [(name, native.kernel_source(f)) for name, f in group]
            t["source"] += time.perf_counter() - start
            start = time.perf_counter()
            module = ir.Module.create(ir.Location.unknown(group[0][1].context))
            for name, text in texts:
                parsed = ir.Module.parse(text, module.context)
                f = parsed.body.operations[0]
                f.attributes["sym_name"] = ir.StringAttr.get(name, module.context)
                module.body.append(f)
            t["parse"] += time.perf_counter() - start
            mark = time.perf_counter()
            stages.llvm(module)
            t["llvm passes"] += time.perf_counter() - mark
            mark = time.perf_counter()
            engine = ExecutionEngine(module, opt_level=opt, shared_libs=libs, enable_pic=True)
            t["llvm opt"] += time.perf_counter() - mark
            mark = time.perf_counter()
            obj = tmp / f"{i}.o"
            engine.dump_to_object_file(str(obj))
            t["codegen"] += time.perf_counter() - mark
            del engine
            mark = time.perf_counter()
            so = tmp / f"{i}.so"
            subprocess.run(
                [native.c_compiler(), "-shared", "-o", so, obj, *native._LIBS], check=True
            )
            t["link"] += time.perf_counter() - mark
            mark = time.perf_counter()
            library = ctypes.CDLL(str(so))
            for name, _ in group:
                library[name]
            t["dlopen"] += time.perf_counter() - mark
        return t

    kernels = list(ops.items())
    print(f"{len(kernels)} kernels compiled in this process at opt level {opt} (s):")
    for label, groups in (("alone", [[k] for k in kernels]), ("together", [kernels])):
        with tempfile.TemporaryDirectory(prefix="presk-compile-time-") as tmp:
            t = phases(groups, Path(tmp))
        parts = ", ".join(f"{k} {v:.3f}" for k, v in t.items())
        print(f"  {label}: {sum(t.values()):.3f} = {parts}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--realize", default="f32")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--split", action="store_true", help="also split each phase, in process")
    p.add_argument("--opt", type=int, help="the opt level of --split (presk's own if not given)")
    p.add_argument(
        "--workers", type=int, default=0, help="processes compiling a bundle (default: the cores)"
    )
    p.add_argument("--json", action="store_true", help="the first calls as JSON on stdout")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.realize, args.workers)))
        return
    from presk.toolchain import machine

    out = sys.stderr if args.json else sys.stdout
    print(f"{datetime.date.today()}  {machine()}  load {os.getloadavg()[0]:.1f}", file=out)
    print(f"{ENTRY}, B=2 T=8, training step, {args.realize}", file=out)
    runs = cold_and_warm(args.realize, args.repeat, args.workers, out)
    if args.split:
        with contextlib.redirect_stdout(out):
            split(args.realize, args.opt)
    print(f"load average after: {os.getloadavg()[0]:.1f}", file=out)
    if args.json:
        print(json.dumps({"realize": args.realize, **runs}))


if __name__ == "__main__":
    main()
