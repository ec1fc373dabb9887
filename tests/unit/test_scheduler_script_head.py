"""The lane reads the ``#!`` line of the staged file a named program's command starts
with safely: a regular file in the job's workspace, at most 256 bytes, never through a
link, never a FIFO (which would block) or anything outside the workspace."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from vq.domain.spec import JobSpec
from vq.executors.scheduler.lane import SchedulerLane
from vq.executors.scheduler.outcome import SHEBANG_LIMIT
from vq.executors.scheduler.ports import LaneContext
from vq.paths import StatePaths
from vq.transport.local import LocalRunner

from .test_scheduler_stage_submit import _lane

NOW = datetime(2026, 1, 1, tzinfo=UTC)
JOB = "a1b2c3d4e5f6"


class NoSpecs:
    def read(self, job_id: str) -> Any:
        raise AssertionError("not read here")

    def list_ids(self) -> list[str]:
        return []


@pytest.fixture
def lane(tmp_path: Path) -> Iterator[tuple[SchedulerLane, Path]]:
    paths = StatePaths(tmp_path / "state")
    built = SchedulerLane(
        _lane(tmp_path / "scratch"),
        LaneContext(paths, NoSpecs(), lambda: NOW),
        object(),  # type: ignore[arg-type]
        LocalRunner(),
        pending=lambda name: [],
        call_soon=lambda call: None,
        monotonic=lambda: 100.0,
    )
    built.close()
    workspace = paths.workspace(JOB)
    workspace.mkdir(parents=True)
    yield built, workspace


def _spec(first: str, program: str | None = "fit") -> JobSpec:
    return JobSpec(
        id=JOB,
        submitted_at=NOW,
        command=[first, "x"],
        cwd="/ws",
        cpus=1,
        program=program,
    )


def test_the_first_bytes_of_a_staged_regular_file(lane: tuple[SchedulerLane, Path]) -> None:
    built, workspace = lane
    (workspace / "tools").mkdir()
    (workspace / "tools" / "fit").write_bytes(b"#!/usr/bin/env python3\n" + b"x" * 4096)
    head = built.submission._script_head(JOB, _spec("./tools/fit"))
    assert head is not None and head.startswith(b"#!/usr/bin/env python3\n")
    assert len(head) == SHEBANG_LIMIT
    assert built.submission._script_head(JOB, _spec("./tools/fit", program=None)) is None


def test_links_fifos_directories_and_outside_paths_are_not_read(
    lane: tuple[SchedulerLane, Path], tmp_path: Path
) -> None:
    built, workspace = lane
    outside = tmp_path / "outside"
    outside.write_bytes(b"#!/usr/bin/python3\n")
    (workspace / "linked").symlink_to(outside)
    os.mkfifo(workspace / "pipe")
    (workspace / "dir").mkdir()
    for first in ("linked", "pipe", "dir", "missing", str(outside), "../outside"):
        assert built.submission._script_head(JOB, _spec(first)) is None, first
