"""Segments: runs of launches replayed in C by one native call (presk/backends/replay.py),
with the bits of the step-by-step replay, a training step's layers stacked inside them,
from a runtime the cache verifies."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import presk
from presk.backends import replay
from presk.backends.mlir import MlirBackend
from presk.backends.native import Compiler, Entry, c_compiler
from presk.backends.schedule import ALIGN, STACK, Launch, Schedule
from presk.errors import ToolchainError
from presk.runtime.inputs import arguments, parameters
from presk.runtime.values import Tensor, leaves

# A library with the runtime's symbols that is not the runtime.
IMPOSTOR = """\
#include <stdlib.h>
int presk_replay_buffers(void) { return 7; }
void presk_replay(const void *steps, int n, void **regions) { abort(); }
"""


def _bits(value) -> list[tuple[str, bytes]]:
    return [(path, np.asarray(t.data).tobytes()) for path, t in leaves(value)]


@pytest.mark.parametrize("realize", ["f32", "bf16"])
def test_a_segment_replay_gives_the_step_by_step_bits_on_the_tiny_training_step(realize):
    core = presk.load("tutorial/05_minigpt.psk").elaborate(
        "MiniGPT{64, 16, 2, 2}.loss", dims={"B": 2, "T": 8}, train_step=True
    )
    compiled = core.lower(realize).compile("mlir", threads=1)
    step = compiled.drawn(0)
    segmented = step()
    (schedule,) = compiled.backend.schedules.values()
    launches = sum(isinstance(x, Launch) for x in schedule.labels)
    assert len(schedule.segments) < launches // 10, "the launches run in a few segments"
    # one ctypes call a launch, as before segments
    schedule.segments = list(zip(schedule.steps, schedule.labels, strict=True))
    assert _bits(segmented) == _bits(step())


@pytest.mark.parametrize("realize", ["f64", "bf16"])
def test_a_training_step_is_one_native_call_after_its_checks_with_the_host_copys_bits(
    realize, monkeypatch
):
    """The tiny MiniGPT's step stacks its folds' layers by the runtime's copy, in the
    segment, so all its launches are one native call; the bits are those of the copies
    made by host steps between segments (the C export's way). Each call on a new arena of
    NaN bytes: an arena freed by an earlier run of the same schedule may hold the very
    bytes a copy left out."""
    core = presk.load("tutorial/05_minigpt.psk").elaborate(
        "MiniGPT{64, 16, 2, 2}.loss", dims={"B": 2, "T": 8}, train_step=True
    )
    monkeypatch.setattr(
        Schedule, "_free_arena", lambda self: np.full(self.arena + ALIGN, 0xFF, np.uint8)
    )
    compiled = core.lower(realize).compile("mlir", threads=2)
    one = compiled.drawn(0)()
    (schedule,) = compiled.backend.schedules.values()
    assert [str(label) for _, label in schedule.segments][:-1] == ["host: gather check"] * 3
    assert isinstance(schedule.segments[-1][0], replay.Segment)
    assert sum(x.site == STACK for x in schedule.labels if isinstance(x, Launch)) == 26
    monkeypatch.setattr(MlirBackend, "copy", lambda self, nbytes: None)
    host = core.lower(realize).compile("mlir", threads=2)
    assert _bits(one) == _bits(host.drawn(0)())
    (schedule,) = host.backend.schedules.values()
    assert "host: stack layers" in map(str, schedule.labels)


def test_a_corrupted_replay_library_in_the_cache_is_rebuilt_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr(replay, "INSTALLED", tmp_path / "not-set-up")
    compiler = Compiler(tmp_path / "cache")
    assert replay.load(compiler).buffers == 32
    (lib,) = compiler.directory.glob("replay/*/*.so")
    entry = Entry(lib.parent.parent, lib.stem, ".c")
    assert entry.holds(replay.source_text())
    built = lib.read_bytes()
    source = tmp_path / "impostor.c"
    source.write_text(IMPOSTOR)
    cc = c_compiler()
    subprocess.run([cc, *replay.FLAGS, "-o", lib, source], check=True)
    assert lib.read_bytes() != built
    assert replay.load(compiler).buffers == 32, "the impostor was run"
    assert entry.holds(replay.source_text()), "the entry was rewritten"
    lib.write_bytes(built[: len(built) // 2])  # truncated
    assert replay.load(compiler).buffers == 32
    assert entry.holds(replay.source_text())


def test_the_runtime_built_at_set_up_is_loaded_verified_before_the_cache(tmp_path, monkeypatch):
    installed = tmp_path / "built"
    stale = installed / "00" / ("0" * 32 + ".so")
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an earlier source's library")
    monkeypatch.setattr(replay, "INSTALLED", installed)
    lib = replay.install(installed)
    assert not stale.exists(), "an earlier source's entry stays"
    assert replay.install(installed) == lib and lib.is_file()
    compiler = Compiler(tmp_path / "cache")
    assert replay.load(compiler).buffers == 32
    assert not list(compiler.directory.glob("replay/*/*.so")), "the cache built its own"
    source = tmp_path / "impostor.c"
    source.write_text(IMPOSTOR)
    subprocess.run([c_compiler(), *replay.FLAGS, "-o", lib, source], check=True)
    assert replay.load(compiler).buffers == 32, "the impostor was run"
    assert list(compiler.directory.glob("replay/*/*.so")), "not built into the cache"


def test_without_a_c_compiler_the_runtime_is_refused_with_e0004(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ToolchainError) as e:
        replay.load(Compiler(tmp_path))
    assert e.value.code == "E0004" and "C compiler" in e.value.message


def test_calls_reuse_the_last_calls_inputs_and_addresses_only_while_they_are_the_same():
    """A call given the same arrays again takes them and their addresses as the last call
    did; a new array, or the same one changed in place, is read afresh: the forward's bits
    match a first call's on a backend that saw no other arguments."""
    core = presk.load("tutorial/05_minigpt.psk").elaborate(
        "MiniGPT{64, 16, 2, 2}.loss", dims={"B": 2, "T": 8}
    )
    params = parameters(core.view, 0, None)
    warm = core.lower("f32").compile("mlir", threads=1).backend
    tokens, targets = arguments(core.view, 0, None)

    def fresh(*args):
        return _bits(core.lower("f32").compile("mlir", threads=1).backend.call([params, *args]))

    assert _bits(warm.call([params, tokens, targets])) == fresh(tokens, targets)
    assert _bits(warm.call([params, tokens, targets])) == fresh(tokens, targets)
    other = Tensor(tokens.type, (tokens.data + 1) % 64)
    assert _bits(warm.call([params, other, targets])) == fresh(other, targets)
    other.data[...] = (other.data + 5) % 64  # the same array, changed in place
    assert _bits(warm.call([params, other, targets])) == fresh(other, targets)
    other.data[0, 0] = 64  # past the vocabulary: the check reads the changed array
    with pytest.raises(presk.PreskError, match="E8003|outside"):
        warm.call([params, other, targets])
