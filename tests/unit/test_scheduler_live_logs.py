"""Live output of a running lane job (:mod:`vq.executors.scheduler.live_logs`): the
offset and prefix logic on its own, then the mirror through the real local runner and
``sh`` against a directory standing in for the cluster's workspace. A follower reading
the local copy by offset sees every byte exactly once, through the mirror's rounds and
the copy-back that replaces the file with the cluster's original."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vq.dialects import JobObservation, SchedulerPhase, StatusReport
from vq.errors import SshUnreachable
from vq.executors.scheduler.jobs import LaneJob
from vq.executors.scheduler.lane import SchedulerLane
from vq.executors.scheduler.live_logs import (
    OVERLAP,
    LiveLog,
    LiveLogs,
    TailChunk,
    TailRead,
    new_bytes,
    parse_tail,
    per_file_cap,
    read_start,
    tail_argv,
)
from vq.executors.scheduler.ports import LaneContext
from vq.hosts.health import read_health
from vq.paths import StatePaths
from vq.transport.local import LocalRunner

from .test_scheduler_observe_writes import NoSpecs, RecordingLifecycle
from .test_scheduler_stage_submit import _lane


# --- the pure part ---------------------------------------------------------------------------
def test_an_empty_local_copy_takes_everything_read() -> None:
    assert read_start(0) == 0
    assert new_bytes(0, b"", TailChunk(5, b"hello")) == b"hello"


def test_only_the_bytes_past_a_matching_overlap_are_new() -> None:
    remote = bytes(range(256)) * 2
    local = remote[:300]
    start = read_start(len(local))
    assert start == 300 - OVERLAP
    chunk = TailChunk(len(remote), remote[start:])
    assert new_bytes(len(local), local[start:], chunk) == remote[300:]
    assert local + remote[300:] == remote


def test_a_local_copy_shorter_than_the_overlap_is_checked_whole() -> None:
    assert new_bytes(3, b"abc", TailChunk(6, b"abcdef")) == b"def"
    assert new_bytes(3, b"abc", TailChunk(6, b"xbcdef")) is None


@pytest.mark.parametrize(
    ("local", "chunk"),
    [
        (b"old attempt\n", TailChunk(4, b"new\n")),  # the cluster's log started afresh
        (b"old attempt\n", TailChunk(20, b"new attempt output\n")),  # same size, other bytes
        (b"something\n", TailChunk(-1, b"")),  # no remote file, local bytes
    ],
)
def test_a_local_copy_that_is_not_a_prefix_gets_nothing(local: bytes, chunk: TailChunk) -> None:
    assert new_bytes(len(local), local[read_start(len(local)) :], chunk) is None


def test_no_remote_file_yet_and_no_local_bytes_is_nothing_new() -> None:
    assert new_bytes(0, b"", TailChunk(-1, b"")) == b""


def test_the_answer_must_be_exactly_the_headers_and_their_bytes() -> None:
    good = b"5 5\nhello-1 0\n3 2\nab"
    assert parse_tail(good, 3, 10) == [
        TailChunk(5, b"hello"),
        TailChunk(-1, b""),
        TailChunk(3, b"ab"),
    ]
    assert parse_tail(good[:-1], 3, 10) is None  # a cut stream
    assert parse_tail(good + b"x", 3, 10) is None  # a file that grew past its header
    assert parse_tail(b"5 11\nhello world", 1, 10) is None  # over the cap
    assert parse_tail(b"five 5\nhello", 1, 10) is None


def test_the_per_file_cap_divides_the_round_within_bounds() -> None:
    assert per_file_cap(1) == 1 << 20
    assert per_file_cap(1000) == 16 << 10
    assert per_file_cap(8) == (4 << 20) // 8


# --- through the real runner and sh -----------------------------------------------------------
def test_the_remote_read_seeks_and_stops_at_the_cap(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_bytes(b"0123456789" * 10)
    reads = [TailRead(str(log), 95), TailRead(str(log), 10), TailRead(str(tmp_path / "none"), 0)]
    result = LocalRunner().run(tail_argv(reads, 20))
    assert result.rc == 0, result.stderr
    assert parse_tail(result.stdout, 3, 20) == [
        TailChunk(100, b"56789"),
        TailChunk(100, b"0123456789" * 2),
        TailChunk(-1, b""),
    ]


class Cluster:
    """A directory standing in for the cluster's job workspace, and the local one."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "state"
        self.remote = tmp_path / "scratch" / "job1"
        self.local = self.root / "jobs" / "job1"
        self.remote.mkdir(parents=True)
        self.local.mkdir(parents=True)
        self.mirror = LiveLogs(LocalRunner(), 10.0, lambda job_id: self.root)
        self.shown = b""
        self.offset = 0

    def logs(self) -> list[LiveLog]:
        return [
            LiveLog("job1", str(self.remote / name), self.local / name)
            for name in ("stdout.log", "stderr.log")
        ]

    def write(self, data: bytes) -> None:
        with (self.remote / "stdout.log").open("ab") as handle:
            handle.write(data)

    def follow(self) -> None:
        """What ``vq logs -f`` does: read the local copy from the offset it reached."""
        try:
            with (self.local / "stdout.log").open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return
        self.shown += data
        self.offset += len(data)

    def copy_back(self) -> None:
        """The workspace copied back over the local one (the cluster's file is authoritative)."""
        (self.local / "stdout.log").write_bytes((self.remote / "stdout.log").read_bytes())


def test_a_follower_sees_the_output_live_and_exactly_once_after_copy_back(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path)
    assert cluster.mirror.mirror(cluster.logs()) == 0  # not started: no files anywhere
    cluster.write(b"first line\n")
    assert cluster.mirror.mirror(cluster.logs()) == len(b"first line\n")
    cluster.follow()
    assert cluster.shown == b"first line\n"  # live, before any copy-back
    cluster.write(b"x" * 100 + b"\n")
    cluster.mirror.mirror(cluster.logs())
    cluster.follow()
    cluster.write(b"last line\n")  # written after the last round: only copy-back has it
    cluster.copy_back()
    cluster.follow()
    assert cluster.shown == (cluster.remote / "stdout.log").read_bytes()
    assert cluster.shown.count(b"first line") == 1
    assert (
        not (cluster.local / "stderr.log").exists()
        or (cluster.local / "stderr.log").read_bytes() == b""
    )


def test_a_big_log_comes_a_cap_at_a_time(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    body = os.urandom(3 << 20)
    cluster.write(body)
    rounds = 0
    while (cluster.local / "stdout.log").exists() is False or (
        cluster.local / "stdout.log"
    ).stat().st_size < len(body):
        appended = cluster.mirror.mirror(cluster.logs())
        assert 0 < appended <= per_file_cap(2)
        rounds += 1
        assert rounds < 10
    assert (cluster.local / "stdout.log").read_bytes() == body


def test_a_retry_whose_cluster_log_started_afresh_is_left_to_copy_back(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    (cluster.local / "stdout.log").write_bytes(b"attempt 1 said this\n")
    cluster.write(b"attempt 2\n")
    assert cluster.mirror.mirror(cluster.logs()) == 0
    cluster.write(b"attempt 2 goes on past the old length\n")
    assert cluster.mirror.mirror(cluster.logs()) == 0
    assert (cluster.local / "stdout.log").read_bytes() == b"attempt 1 said this\n"


def test_a_local_log_that_is_a_symlink_is_never_followed(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    (cluster.local / "stdout.log").symlink_to(victim)
    cluster.write(b"output\n")
    cluster.mirror.mirror(cluster.logs())
    assert victim.read_bytes() == b""


# --- in the status round ----------------------------------------------------------------------
def test_a_log_read_that_loses_the_host_marks_the_host_never_the_job(tmp_path: Path) -> None:
    """The round's status was read (the job is observed running); the log read after it
    lost the connection: the host is marked unreachable and the lane backs off, the job
    keeps RUNNING with its observation, and nothing ends it."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    lifecycle = RecordingLifecycle()
    paths = StatePaths(tmp_path)
    lane = SchedulerLane(
        _lane(tmp_path / "scratch"),
        LaneContext(paths, NoSpecs(), lambda: now),
        lifecycle,  # type: ignore[arg-type]
        LocalRunner(),
        pending=lambda name: [],
        call_soon=lambda call: call(),
        monotonic=lambda: 100.0,
    )
    try:
        job = LaneJob("j1", "queued", "7")
        lane.jobs.track(job)
        running = JobObservation("7", SchedulerPhase.RUNNING, "RUNNING", exec_host="node1")
        lost = SshUnreachable("ssh: connection to vq-local closed", hint="check the link")
        lane.observation.polled(
            {"7": job}, (StatusReport(observed={"7": running}), {}, 5.0, lost), 99.0
        )
        assert [f["scheduler_state"] for _, f in lifecycle.writes] == ["running"]
        assert lane.tracks("j1") and job.phase == "running"
        assert lane.jobs.backoff_until > 100.0
        assert read_health(tmp_path, "cluster").status == "unreachable"
    finally:
        lane.close()
