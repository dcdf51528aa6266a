"""Replacing a `.psk.d`: every state a killed writer can leave on disk, simulated, has a
complete container a reader finds, and the next writer recovers and cleans it up."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from presk.errors import FileFormatError, UsageError
from presk.runtime import pskd


def _container(generation: int) -> pskd.Container:
    return pskd.Container(
        "checkpoint", {"generation": generation}, {"params/w": np.full((3, 2), generation * 1.0)}
    )


def _generation(path) -> int:
    return pskd.read(str(path)).meta["generation"]


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "checkpoint.psk.d"
    pskd.write(str(path), _container(1))
    return path


def _new(ckpt, generation: int, name: str = "new-k1ll3d0"):
    """A complete new container where a writer builds it, as a killed writer leaves it."""
    new = ckpt.parent / f"{ckpt.name}.{name}"
    pskd.write(str(new), _container(generation))
    return new


def _after_next_write(ckpt) -> list[str]:
    pskd.write(str(ckpt), _container(3))
    assert _generation(ckpt) == 3
    return sorted(p.name for p in ckpt.parent.iterdir())


def test_killed_while_writing_the_new_container(ckpt):
    new = _new(ckpt, 2)
    (new / "header.json").write_text('{"format": "presk.p')  # the header half written
    assert _generation(ckpt) == 1
    assert _after_next_write(ckpt) == ["checkpoint.psk.d"]


def test_killed_between_the_two_renames(ckpt):
    _new(ckpt, 2)
    os.rename(ckpt, f"{ckpt}.old")
    assert not ckpt.exists()
    assert _generation(ckpt) == 1  # the reader finds the old container in place
    assert _after_next_write(ckpt) == ["checkpoint.psk.d"]


def test_the_next_writer_restores_the_old_container_before_anything(ckpt, monkeypatch):
    os.rename(ckpt, f"{ckpt}.old")

    def killed(*_):
        raise KeyboardInterrupt  # this writer is killed too, before its renames

    monkeypatch.setattr(pskd, "_replace_dir", killed)
    with pytest.raises(KeyboardInterrupt):
        pskd.write(str(ckpt), _container(3))
    assert _generation(ckpt) == 1
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["checkpoint.psk.d"]


def test_killed_while_removing_the_old_container(ckpt):
    shutil.copytree(ckpt, f"{ckpt}.old")
    os.unlink(f"{ckpt}.old/header.json")  # rmtree got this far
    pskd.write(str(ckpt), _container(2))  # (a complete new one in place)
    assert _generation(ckpt) == 2
    assert _after_next_write(ckpt) == ["checkpoint.psk.d"]


def test_a_first_write_killed_before_its_rename_leaves_no_container(tmp_path):
    path = tmp_path / "checkpoint.psk.d"
    _new(path, 2)
    with pytest.raises(FileFormatError) as e:
        pskd.read(str(path))
    assert e.value.code == "E9001"
    assert _after_next_write(path) == ["checkpoint.psk.d"]


def test_at_every_instant_of_a_replacement_a_reader_finds_a_whole_container(ckpt, monkeypatch):
    seen = []

    def then_read(step):
        def wrapped(*args, **kwargs):
            step(*args, **kwargs)
            seen.append(_generation(ckpt))

        return wrapped

    monkeypatch.setattr(pskd.os, "rename", then_read(os.rename))
    monkeypatch.setattr(pskd.shutil, "rmtree", then_read(shutil.rmtree))
    pskd.write(str(ckpt), _container(2))
    assert seen == [1, 2, 2], seen  # path → .old, new → path, .old removed


# A file stands for every non-directory: no device is tried, since a bug would rename it
@pytest.mark.parametrize("what", ["file", "directory"])
def test_what_is_not_a_container_is_never_replaced(tmp_path, what):
    path = tmp_path / "target"
    if what == "file":
        path.write_text("mine")
    else:
        path.mkdir()
        (path / "notes.txt").write_text("mine")
    with pytest.raises(UsageError) as e:
        pskd.write(str(path), _container(1))
    assert e.value.code == "E0003"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]
    assert (path if what == "file" else path / "notes.txt").read_text() == "mine"


def test_a_link_to_a_container_replaces_the_container(ckpt):
    link = ckpt.parent / "latest.psk.d"
    link.symlink_to(ckpt)
    pskd.write(str(link), _container(2))
    assert link.is_symlink() and _generation(ckpt) == 2
