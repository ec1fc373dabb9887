"""The one open of files in a tree another user controls: no symlink below the trusted
root is followed, a hard link or a FIFO is refused, and a refusal changes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vq._safe_open import (
    UnsafePath,
    append_line_beneath,
    atomic_write_beneath,
    open_beneath,
    read_regular_beneath,
)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A trusted root with ``jobs/J/_vq/`` and a canary outside it."""
    root = tmp_path / "tree"
    (root / "jobs" / "J" / "_vq").mkdir(parents=True)
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "events.jsonl").write_text("secret\n")
    return root, canary


def test_a_plain_file_is_created_appended_and_read(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    path = root / "jobs" / "J" / "_vq" / "events.jsonl"
    assert append_line_beneath(root, path, "one")
    assert append_line_beneath(root, path, "two")
    assert read_regular_beneath(root, path, 1024) == b"one\ntwo\n"


def test_a_symlinked_directory_on_the_way_is_refused(tree: tuple[Path, Path]) -> None:
    root, canary = tree
    meta = root / "jobs" / "J" / "_vq"
    meta.rmdir()
    meta.symlink_to(canary)
    path = meta / "events.jsonl"
    assert not append_line_beneath(root, path, "planted")
    with pytest.raises(UnsafePath, match="'_vq' is a symlink"):
        read_regular_beneath(root, path, 1024)
    assert (canary / "events.jsonl").read_text() == "secret\n"
    assert sorted(p.name for p in canary.iterdir()) == ["events.jsonl"]
    assert meta.is_symlink()  # refused, never deleted


def test_a_symlinked_final_file_is_refused(tree: tuple[Path, Path]) -> None:
    root, canary = tree
    path = root / "jobs" / "J" / "_vq" / "events.jsonl"
    path.symlink_to(canary / "events.jsonl")
    assert not append_line_beneath(root, path, "planted")
    with pytest.raises(UnsafePath, match="symlink"):
        read_regular_beneath(root, path, 1024)
    assert (canary / "events.jsonl").read_text() == "secret\n"


def test_a_hard_link_and_a_fifo_are_refused(tree: tuple[Path, Path]) -> None:
    root, canary = tree
    meta = root / "jobs" / "J" / "_vq"
    os.link(canary / "events.jsonl", meta / "events.jsonl")
    assert not append_line_beneath(root, meta / "events.jsonl", "planted")
    assert (canary / "events.jsonl").read_text() == "secret\n"
    os.mkfifo(meta / "exit-code")
    with pytest.raises(UnsafePath, match="not a regular file"):
        open_beneath(root, meta / "exit-code", os.O_RDONLY)  # never blocks on the FIFO


def test_a_path_outside_the_root_is_refused(tree: tuple[Path, Path]) -> None:
    root, canary = tree
    with pytest.raises(UnsafePath, match="not below"):
        open_beneath(root, canary / "events.jsonl", os.O_RDONLY)
    with pytest.raises(UnsafePath):
        open_beneath(root, root / "jobs" / ".." / ".." / "canary" / "events.jsonl", os.O_RDONLY)


def test_a_missing_file_is_file_not_found(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    with pytest.raises(FileNotFoundError):
        read_regular_beneath(root, root / "jobs" / "J" / "_vq" / "exit-code", 64)


def test_an_atomic_write_makes_its_parents_and_replaces_a_planted_link(
    tree: tuple[Path, Path],
) -> None:
    root, canary = tree
    intent = root / "jobs" / "K" / "_vq" / "intent.json"
    atomic_write_beneath(root, intent, b"first", mode=0o600, parents=True)
    assert intent.read_bytes() == b"first" and (intent.stat().st_mode & 0o777) == 0o600
    # A link planted at the name is replaced, never written through.
    intent.unlink()
    intent.symlink_to(canary / "events.jsonl")
    atomic_write_beneath(root, intent, b"second")
    assert not intent.is_symlink() and intent.read_bytes() == b"second"
    assert (canary / "events.jsonl").read_text() == "secret\n"
    assert sorted(p.name for p in intent.parent.iterdir()) == ["intent.json"]  # no temp left


def test_an_atomic_write_through_a_symlinked_directory_is_refused(tree: tuple[Path, Path]) -> None:
    root, canary = tree
    meta = root / "jobs" / "J" / "_vq"
    meta.rmdir()
    meta.symlink_to(canary)
    with pytest.raises(UnsafePath, match="'_vq' is a symlink"):
        atomic_write_beneath(root, meta / "intent.json", b"planted", parents=True)
    assert sorted(p.name for p in canary.iterdir()) == ["events.jsonl"]
    assert meta.is_symlink()  # refused, never deleted
