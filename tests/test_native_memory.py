"""Memory safety of native runs, with the tools that make a heap error loud: freed memory
filled with a pattern (MALLOC_PERTURB_) so a read of it crashes, kernels called on
buffers that end against inaccessible pages, and the replay runtime's thread pool under
ThreadSanitizer. Each runs in a child process, so a crash fails one test, not the run."""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from presk.kernel.machine import ELEMENTS

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
BERT = REPO / "corpus" / "nlp" / "07_bert.psk"
# every free'd chunk filled with 0xa5 and none kept for reuse (glibc's tcache off), so a
# read of a freed MLIR operation dereferences 0xa5a5… and crashes
PERTURBED = {"MALLOC_PERTURB_": "165", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}


def _child(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def test_folding_bias_adds_reads_no_launch_it_erased():
    """psk-auto-layout folds each bias add into the product before it and erases the add's
    launch; the fold's walk must not visit that launch afterwards (an MLIR handle to an
    erased op reads freed memory: valgrind's "invalid read" in fold_epilogues)."""
    proc = _child(
        f"""
        import presk
        core = presk.load({str(BERT)!r}).elaborate("Block{{16, 2, 32}}.layer", dims={{"B": 1, "T": 4}})
        print(sorted(core.lower("f32").compile("mlir", 1).backend.kernel_ops))
        """,
        PERTURBED,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "k9.dot.bias" in proc.stdout  # the fold did happen


# ---- kernels against guard pages ----

PAGE = mmap.PAGESIZE
GUARD = 16 * PAGE  # inaccessible bytes on each side of a buffer
# the block's weight matrices, as `presk quantize … --list` names them
MATRICES = ("attn.q.w", "attn.k.w", "attn.v.w", "attn.o.w", "ff.up.w", "ff.down.w")


class _Guarded:
    """`nbytes` of memory between two inaccessible regions, flush against the one after
    it (`tail`) or the one before it."""

    def __init__(self, nbytes: int, tail: bool):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        body = -(-max(nbytes, 1) // PAGE) * PAGE
        self.map = mmap.mmap(-1, GUARD + body + GUARD)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        for start in (base, base + GUARD + body):
            assert libc.mprotect(start, GUARD, 0) == 0, ctypes.get_errno()
        self.address = base + GUARD + (body - nbytes if tail else 0)

    def array(self, dtype: np.dtype, shape: list[int]) -> np.ndarray:
        n = math.prod(shape) * np.dtype(dtype).itemsize
        raw = (ctypes.c_char * max(n, 1)).from_address(self.address)
        return np.frombuffer(raw, np.uint8, n).view(dtype).reshape(shape)


def _guarded_calls(entry: str, dims: dict, weights: list[tuple[int, int]]) -> None:
    """Call every kernel of `entry` natively, on f32 weights and on each (bits, over) of
    integer weights, whole and in two and three pieces of its splittable loop, on random
    buffers flush against a guard at their end, then at their start: a load or store
    outside a buffer faults. Run in a child process."""
    from mlir import ir

    import presk
    from presk.realize import Quant, Realization

    core = presk.load(BERT).elaborate(entry, dims=dims)
    rng = np.random.default_rng(0)
    realizations = [Realization("f32", spelling="f32")] + [
        Realization("f32", quant={m: Quant(bits, over, "absmax") for m in MATRICES})
        for bits, over in weights
    ]
    for realize in realizations:
        compiled = core.lower(realize).compile("mlir", 2)
        compiled.drawn(0)()  # traced: every kernel compiled
        backend = compiled.backend
        for name, kernel in list(backend.kernels.items()):
            args = list(backend.kernel_ops[name].regions[0].blocks[0].arguments)[:-2]
            buffers = [
                (str(t.element_type), list(t.shape))
                for t in map(ir.MemRefType, [a.type for a in args])
            ]
            for tail in (True, False):
                guarded, pointers = [], []
                for element, shape in buffers:
                    dtype = ELEMENTS[element]
                    g = _Guarded(math.prod(shape) * dtype.itemsize, tail)
                    a = g.array(dtype, shape)
                    if element == "i8":  # integer weights
                        a[...] = rng.integers(-127, 128, a.shape)
                    elif element != "i64":  # indices stay 0, in range
                        a[...] = rng.standard_normal(a.shape)
                    guarded.append(g)
                    pointers.append(g.address)
                trips = kernel.split
                for n in {1, min(2, trips or 1), min(3, trips or 1)}:
                    for i in range(n):
                        kernel.native.fn(*pointers, trips * i // n, trips * (i + 1) // n)
        print("clean:", len(backend.kernels), "kernels")


@pytest.mark.slow
def test_integer_weight_kernels_stay_inside_their_buffers():
    """A BERT block's kernels on f32, int8 and int4 weights (scales along either axis):
    none reads or writes past either end of a buffer, whole or split."""
    weights = [(8, 0), (4, 0), (4, -1)]
    proc = _child(
        f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from test_native_memory import _guarded_calls
        _guarded_calls("Block{{64, 4, 256}}.layer", {{"B": 1, "T": 32}}, {weights!r})
        """
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("clean") == 1 + len(weights)


# ---- the replay runtime's pool under ThreadSanitizer ----

DRIVER = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct { void *fn; int64_t buffers; const int64_t *at; int64_t lo, hi, pieces, workers; } step;
void presk_replay(const step *steps, int n, void **regions);

static void twice(void *a, void *b, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; i++) ((float *)b)[i] = ((float *)a)[i] * 2;
}
static void inc(void *b, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi; i++) ((float *)b)[i] += 1;
}

#define N 4099
/* A caller replaying three steps of 1 to 8 pieces claimed by 1 to 8 threads (as many as
   the pieces, or fewer), again and again, checking each element; caller 0 forks now and
   then, and the child replays too. */
static void *caller(void *arg) {
  int id = (int)(intptr_t)arg;
  float *in = malloc(N * sizeof(float)), *out = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) in[i] = (float)i;
  void *regions[2] = {in, out};
  int64_t both[4] = {0, 0, 1, 0}, second[2] = {1, 0};
  for (int it = 0; it < 4000; it++) {
    int64_t p = 1 + (it + id) % 7;
    int64_t q = 1 + it % 3;
    step steps[3] = {{(void *)twice, 2, both, 0, N, p, 1 + it % p}, {(void *)inc, 1, second, 0, N, q, q},
                     {(void *)inc, 1, second, 0, N, p + 1, 2}};
    presk_replay(steps, 3, regions);
    for (int i = 0; i < N; i++)
      if (out[i] != 2.0f * i + 2) { printf("caller %d call %d: out[%d] = %f\n", id, it, i, out[i]); exit(1); }
    if (id == 0 && it % 500 == 0) {
      pid_t child = fork();
      if (child == 0) { presk_replay(steps, 3, regions); _exit(out[5] == 12.0f ? 0 : 3); }
      int status;
      waitpid(child, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status)) { printf("child: %d\n", status); exit(1); }
    }
  }
  free(in);
  free(out);
  return 0;
}

int main(void) {
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, caller, (void *)(intptr_t)i);
  for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
  puts("ok");
  return 0;
}
"""


@pytest.mark.parametrize("sanitizer", ["thread", "address,undefined"])
def test_the_replay_pool_has_no_race_and_no_heap_error(tmp_path, sanitizer):
    """presk/backends/replay.c built with a sanitizer and driven by three callers at once
    (one forking), its split steps of 1 to 8 pieces on fewer threads or as many: every
    element right, no data race,
    no heap error. Before the ticket carried the job's piece count, a worker could claim
    a piece of a job not yet published (the last job's ticket, the next job's count) and
    run it twice, or run the last job's step on the next job's regions: ThreadSanitizer
    saw two workers write one element in every run of this driver."""
    cc = shutil.which("cc") or shutil.which("gcc")
    driver, program = tmp_path / "driver.c", tmp_path / "driver"
    driver.write_text(DRIVER)
    source = REPO / "presk" / "backends" / "replay.c"
    flags = ["-O1", "-g", f"-fsanitize={sanitizer}", "-fno-sanitize-recover=all", "-pthread"]
    built = subprocess.run(
        [cc, *flags, "-o", program, driver, source], capture_output=True, text=True
    )
    if built.returncode != 0:
        pytest.skip(f"{cc} cannot build with -fsanitize={sanitizer}: {built.stderr[-300:]}")
    env = {**os.environ, "TSAN_OPTIONS": "die_after_fork=0 halt_on_error=1"}
    ran = subprocess.run([program], capture_output=True, text=True, env=env, timeout=300)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stdout + ran.stderr[-3000:]
    assert "WARNING: ThreadSanitizer" not in ran.stderr
