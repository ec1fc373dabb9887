"""Path safety of fetch/cleanup tree reading, and the terminal diagnosis (real files, no mocks)."""

from __future__ import annotations

import os
import posixpath
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vq.domain.diagnosis import diagnose, terminal_diagnosis
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import InvalidInput, NotFound, UnsafeArchive
from vq.fetch.local import default_dest_name
from vq.store.tree import link_stays_inside, open_file_below, open_root, relative_parts, walk_tree

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def spec(**fields: object) -> JobSpec:
    base: dict[str, object] = {
        "id": "0123456789ab",
        "submitted_at": T0,
        "command": ["x"],
        "cpus": 1,
    }
    base.update(fields)
    return JobSpec.model_validate(base)


# --- --name paths -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("out.log", ["out.log"]),
        ("a/b/c.txt", ["a", "b", "c.txt"]),
        ("./a//b.txt", ["a", "b.txt"]),
        ("_vq/exit-code", ["_vq", "exit-code"]),  # reading vq's own metadata is fine
    ],
)
def test_relative_names_are_accepted(name: str, parts: list[str]) -> None:
    assert relative_parts(name) == parts


@pytest.mark.parametrize(
    "name", ["", "..", "../x", "a/../b", "a/..", "/etc/passwd", "//x", "C:/x", "a\0b", ".", "d/"]
)
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(UnsafeArchive) as caught:
        relative_parts(name)
    assert caught.value.exit_code == 4 and caught.value.hint


# --- symlinks -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("rel", "target", "inside"),
    [
        ("link", "file", True),
        ("a/b/link", "../../file", True),
        ("a/link", "../../file", False),
        ("link", "/etc/passwd", False),
        ("link", "..", False),
        ("a/link", "x/../../y", False),  # '..' after a name is never trusted
        ("_vq/link", "exit-code", True),
        ("_vq/link", "../../x", False),
        ("link", "", False),
    ],
)
def test_link_stays_inside(rel: str, target: str, inside: bool) -> None:
    assert link_stays_inside(rel, target) is inside


@given(
    st.lists(st.sampled_from(["a", "b", "_vq"]), min_size=0, max_size=3),
    st.lists(st.sampled_from(["..", ".", "a", "b", ""]), min_size=1, max_size=5),
)
def test_an_accepted_link_never_resolves_above_the_root(dirs: list[str], target: list[str]) -> None:
    rel = "/".join([*dirs, "link"])
    text = "/".join(target)
    if link_stays_inside(rel, text):
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), text))
        assert resolved != ".." and not resolved.startswith("../")


def build(root: Path, outside: Path) -> None:
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "f.txt").write_text("f")
    (root / "top.txt").write_text("t")
    outside.mkdir()
    (outside / "secret").write_text("s")
    (root / "to-outside").symlink_to(outside)
    (root / "d" / "to-secret").symlink_to(outside / "secret")
    os.mkfifo(root / "fifo")


def test_walk_never_enters_a_symlink(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    build(root, tmp_path / "outside")
    fd = open_root(root, "workspace")
    try:
        skipped: list[dict[str, str]] = []
        names = [entry.rel for entry in walk_tree(fd, skipped)]
    finally:
        os.close(fd)
    assert names == ["d", "d/e", "d/e/f.txt", "d/to-secret", "fifo", "to-outside", "top.txt"]
    assert skipped == []


def test_roots_and_files_are_opened_without_following(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    build(root, tmp_path / "outside")
    (tmp_path / "link-root").symlink_to(root)
    with pytest.raises(UnsafeArchive):
        open_root(tmp_path / "link-root", "workspace")
    with pytest.raises(NotFound):
        open_root(tmp_path / "missing", "workspace")
    fd = open_root(root, "workspace")
    try:
        file_fd = open_file_below(fd, ["d", "e", "f.txt"], "the workspace")
        assert os.read(file_fd, 10) == b"f"
        os.close(file_fd)
        with pytest.raises(UnsafeArchive):
            open_file_below(fd, ["to-outside", "secret"], "the workspace")
        with pytest.raises(UnsafeArchive):
            open_file_below(fd, ["d", "to-secret"], "the workspace")
        with pytest.raises(InvalidInput):
            open_file_below(fd, ["fifo"], "the workspace")
        with pytest.raises(InvalidInput):
            open_file_below(fd, ["d"], "the workspace")
        with pytest.raises(NotFound):
            open_file_below(fd, ["top.txt", "x"], "the workspace")
    finally:
        os.close(fd)


# --- naming and diagnosis -----------------------------------------------------------------
def test_default_destination_and_archive_stem() -> None:
    assert default_dest_name(spec()) == "0123456789ab"
    assert default_dest_name(spec(job_name="h2o opt")) == "h2o opt-0123456789ab"


@pytest.mark.parametrize(
    ("fields", "category", "signal"),
    [
        ({"state": "COMPLETED", "exit_code": 0}, "completed", None),
        ({"state": "FAILED", "exit_code": 3}, "nonzero_exit", None),
        ({"state": "FAILED", "exit_code": 137}, "signal", "SIGKILL"),
        ({"state": "FAILED", "exit_code": 170}, "nonzero_exit", None),
        ({"state": "FAILED"}, "unknown", None),
        ({"state": "OOM_KILLED", "exit_code": 137}, "oom", "SIGKILL"),
        ({"state": "TIME_EXCEEDED"}, "time_limit", None),
        ({"state": "STARVED"}, "starved", None),
        ({"state": "KILLED", "failure_reason": "killed by operator"}, "killed", None),
        ({"state": "ABORTED_BY_QUEUE"}, "aborted", None),
        ({"state": "INTERRUPTED"}, "aborted", None),
        ({"state": "RUNNING", "started_at": T0}, "running", None),
        ({"state": "SUSPENDED", "paused_at": T0}, "running", None),
        ({"state": "PENDING"}, "pending", None),
    ],
)
def test_diagnosis_categories(fields: dict[str, object], category: str, signal: str) -> None:
    result = diagnose(spec(**fields))
    assert result["category"] == category and result["signal"] == signal
    assert result["summary"].startswith(f"{fields['state']}: ") and "\n" not in result["summary"]


def test_terminal_diagnosis_document() -> None:
    document = terminal_diagnosis(
        spec(
            state=JobState.FAILED,
            exit_code=139,
            failure_reason="killed by SIGSEGV (exit code 139)",
            failure_tail="step 1\nsegfault in dgemm\n\n",
            scheduler_state="artifacts_unavailable",
            finished_at=T0,
        )
    )
    assert document["schema"] == "vq.terminal-diagnosis.v1"
    assert document["state"] == "FAILED" and document["exit_code"] == 139
    assert document["scheduler_state"] == "artifacts_unavailable"
    assert document["finished_at"] == T0.isoformat() and document["started_at"] is None
    assert document["diagnosis"] == {
        "category": "signal",
        "summary": "FAILED: killed by SIGSEGV (exit code 139)",
        "signal": "SIGSEGV",
        "hint": "segfault in dgemm",
    }
