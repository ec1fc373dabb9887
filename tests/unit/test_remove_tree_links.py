"""Deleting a job's workspace never follows a link planted between its tree and it."""

from __future__ import annotations

from pathlib import Path

import pytest

from vq.cleanup.files import remove_tree as _remove_tree
from vq.errors import UnsafeArchive


def test_a_jobs_directory_swapped_for_a_link_is_refused_and_kept(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    canary = tmp_path / "canary"
    (canary / "J").mkdir(parents=True)
    (canary / "J" / "keep").write_text("root's")
    (tree / "jobs").symlink_to(canary)
    with pytest.raises(UnsafeArchive, match="not reachable safely"):
        _remove_tree(tree, tree / "jobs" / "J", "workspace")
    assert (canary / "J" / "keep").read_text() == "root's"
    assert (tree / "jobs").is_symlink()


def test_a_real_workspace_is_removed_and_a_missing_one_is_false(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "jobs" / "J" / "_vq").mkdir(parents=True)
    assert _remove_tree(tree, tree / "jobs" / "J", "workspace")
    assert not (tree / "jobs" / "J").exists()
    assert not _remove_tree(tree, tree / "jobs" / "J", "workspace")
