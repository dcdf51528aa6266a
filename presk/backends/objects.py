"""Kernels compiled to object files, in this process and in worker processes.

`write_object` compiles kernels, each a `native.kernel_source` text given with the symbol
it takes, as one module: lowered by `stages.LLVM_PIPELINE`, compiled by MLIR's
ExecutionEngine at `OPT_LEVEL` for this machine's CPU and written out as an object file.
The kernels of a module share nothing (none calls another), so each one's code is what it
would be alone.

The bindings hold the GIL while LLVM works, so threads would only take turns.
`write_objects` therefore spreads many kernels over processes: it writes them in groups
to files, and this process and the worker processes it starts (`python -m
presk.backends.objects DIRECTORY`, each about 0.4 s to load MLIR) each take the next
group no one has taken, until none is left, and compile it into an object file. A worker
is a new Python, never a fork, so the replay runtime's threads are no concern. A group a
worker failed to compile is compiled again in this process, which raises the error if
there is one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mlir import ir
from mlir.execution_engine import ExecutionEngine

import presk
from presk import stages
from presk.ir.context import new_context
from presk.toolchain import mlir_runtime_lib

# LLVM's O2: the same bits as O3 (no fast-math flag, no contraction in either), the same
# machine code for the products and no slower kernels measured, but 15-20 % less time to
# compile; O3's larger unrolling thresholds spent 0.1-0.2 s on each small copy or sum
# whose loops are short and fixed (docs/performance.md's git history, "Compile time of an entry").
OPT_LEVEL = 2
# Kernels are compiled in modules of at most GROUP: small enough for the processes to
# share the work evenly and for a progress to advance, while a module more costs only a
# few milliseconds.
GROUP = 12
# A worker process costs about 0.4 s to start, what this process takes to compile some
# 20 kernels: each worker needs at least PER_WORKER kernels.
PER_WORKER = 32


def write_object(kernels: list[tuple[str, str]], ctx: ir.Context, obj: Path) -> None:
    """`kernels`, (symbol, `kernel_source`) pairs, compiled into the object file `obj`. The
    module and the ExecutionEngine, with its LLVM state, are freed on return."""
    module = ir.Module.create(ir.Location.unknown(ctx))
    for symbol, text in kernels:
        parsed = ir.Module.parse(text, ctx)  # alive until its function is moved out
        f = parsed.body.operations[0]
        f.attributes["sym_name"] = ir.StringAttr.get(symbol, ctx)
        module.body.append(f)
    stages.llvm(module)
    engine = ExecutionEngine(
        module,
        opt_level=OPT_LEVEL,
        shared_libs=[mlir_runtime_lib("libmlir_float16_utils.so")],
        enable_pic=True,
    )
    engine.dump_to_object_file(str(obj))


def write_objects(
    kernels: list[tuple[str, str]], ctx: ir.Context, directory: Path, workers: int, advance
) -> list[Path]:
    """`kernels` compiled into object files in `directory`, a group of at most GROUP at a
    time, by this process and up to `workers - 1` worker processes (one for each
    PER_WORKER kernels), each taking the next group left until none is (a group a worker
    failed to compile is compiled here); `advance(n)` is called as n more are compiled."""
    ordered = sorted(kernels, key=lambda k: len(k[1]), reverse=True)  # the largest first
    groups = [ordered[i : i + GROUP] for i in range(0, len(ordered), GROUP)]
    for i, group in enumerate(groups):
        (directory / f"group{i:04d}.json").write_text(json.dumps(group))
    helpers = min(workers, len(kernels) // PER_WORKER) - 1 if sys.executable else 0
    started = [_start(directory) for _ in range(helpers)]
    try:
        done = 0
        for group, obj in claimed(directory):
            write_object(group, ctx, obj)
            done += len(group)
            advance(len(group))
        for proc in started:
            proc.wait()
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    objects = [directory / f"group{i:04d}.o" for i in range(len(groups))]
    for group, obj in zip(groups, objects, strict=True):
        if not obj.is_file():  # its worker failed: compiled here, where an error is raised
            write_object(group, ctx, obj)
    advance(len(kernels) - done)
    return objects


def claimed(directory: Path):
    """Each group of kernels in `directory` this process is first to claim (by renaming its
    file, which one process alone can do), with the object file it is compiled into, until
    none is left."""
    for path in sorted(directory.glob("group*.json")):
        mine = path.with_suffix(".claimed")
        try:
            path.rename(mine)
        except FileNotFoundError:  # another process took it
            continue
        yield (
            [(symbol, text) for symbol, text in json.loads(mine.read_text())],
            path.with_suffix(".o"),
        )


def _start(directory: Path) -> subprocess.Popen:
    """A worker process taking the groups in `directory`."""
    root = os.path.dirname(os.path.dirname(presk.__file__))  # presk importable as here
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", __name__, str(directory)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": path},
    )


def main(argv: list[str]) -> int:
    """A worker: the groups of the directory `argv[0]` it claims, compiled."""
    ctx = new_context()
    for group, obj in claimed(Path(argv[0])):
        part = obj.with_suffix(".part")  # an object file is whole once it has its name
        write_object(group, ctx, part)
        part.rename(obj)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
