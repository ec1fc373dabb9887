"""/proc parsing, the zombie rule and process-group helpers, on real processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from vq.executors import procs

T = TypeVar("T")


def wait_until(pred: Callable[[], T | None], timeout: float = 10.0, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = pred()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or pred}")
        time.sleep(0.01)


def missing_pid() -> int:
    # pids are always < pid_max, so pid_max itself never exists
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def test_read_stat_of_self() -> None:
    stat = procs.read_stat(os.getpid())
    assert stat is not None
    assert stat.pid == os.getpid()
    assert stat.state == "R"  # we are running while we read it
    assert stat.ppid == os.getppid()
    assert stat.pgid == os.getpgrp()
    assert stat.start_ticks > 0
    assert procs.is_alive(os.getpid())
    assert procs.start_ticks(os.getpid()) == stat.start_ticks
    assert procs.matches_identity(os.getpid(), stat.start_ticks)
    assert procs.matches_identity(os.getpid(), None)
    assert not procs.matches_identity(os.getpid(), stat.start_ticks + 1)


def test_missing_process() -> None:
    pid = missing_pid()
    assert procs.read_stat(pid) is None
    assert not procs.is_alive(pid)
    assert procs.start_ticks(pid) is None
    assert not procs.matches_identity(pid, None)
    assert procs.live_group_members(pid) == []
    assert not procs.group_alive(pid)
    assert procs.signal_group(pid, 0) is False
    assert procs.read_stat(0) is None
    assert procs.read_stat(-1) is None


def test_comm_with_spaces_and_parentheses(tmp_path: Path) -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    weird = tmp_path / "a) b (c"
    shutil.copy(sleep, weird)
    weird.chmod(0o755)
    proc = subprocess.Popen([str(weird), "30"])
    try:
        wait_until(
            lambda: Path(f"/proc/{proc.pid}/comm").read_text().strip() == "a) b (c",
            10.0,
            "the exec of the oddly named binary",
        )
        stat = procs.read_stat(proc.pid)
        assert stat is not None
        assert stat.pid == proc.pid
        assert stat.state in ("S", "R")
        assert stat.ppid == os.getpid()
        assert stat.pgid == os.getpgrp()
        assert stat.start_ticks >= procs.read_stat(os.getpid()).start_ticks  # type: ignore[union-attr]
        assert procs.is_alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert procs.read_stat(proc.pid) is None


def test_unreaped_child_is_a_zombie_and_not_alive() -> None:
    proc = subprocess.Popen(["true"])  # exits at once; we do not reap it yet
    try:
        wait_until(
            lambda: (stat := procs.read_stat(proc.pid)) is not None and stat.state == "Z",
            10.0,
            "the child to become a zombie",
        )
        os.kill(proc.pid, 0)  # kill(pid, 0) still "succeeds" on a zombie…
        assert not procs.is_alive(proc.pid)  # …which is why liveness reads the state
        assert not procs.matches_identity(proc.pid, None)
        assert procs.start_ticks(proc.pid) is not None
    finally:
        assert proc.wait() == 0
    assert procs.read_stat(proc.pid) is None


def test_group_helpers_on_a_new_session() -> None:
    proc = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30; wait"], start_new_session=True)
    pgid = proc.pid
    try:

        def three_members() -> list[int] | None:
            members = procs.live_group_members(pgid)
            return members if len(members) == 3 else None

        members = wait_until(three_members, 10.0, "sh and its two sleeps")
        assert pgid in members
        assert procs.group_alive(pgid)
        assert os.getpid() not in members
        assert procs.signal_group(pgid, signal.SIGKILL) is True
        # the sleeps are orphans reaped by PID 1 only every ~2 s: zombies count as gone
        wait_until(lambda: not procs.group_alive(pgid), 5.0, "the group to die")
        assert procs.live_group_members(pgid) == []
    finally:
        proc.wait()


def test_group_alive_after_leader_exits() -> None:
    # the leader exits at once; its backgrounded child keeps the group alive
    proc = subprocess.Popen(["sh", "-c", "sleep 30 &"], start_new_session=True)
    pgid = proc.pid
    try:
        assert proc.wait() == 0
        assert procs.read_stat(pgid) is None
        assert wait_until(lambda: procs.group_alive(pgid), 5.0, "the orphaned sleep")
    finally:
        procs.signal_group(pgid, signal.SIGKILL)
    wait_until(lambda: not procs.group_alive(pgid), 5.0, "the group to die")


@pytest.mark.parametrize("pgid", [-1, 0, 1])
def test_signal_group_refuses_dangerous_groups(pgid: int) -> None:
    with pytest.raises(ValueError, match="refusing"):
        procs.signal_group(pgid, 0)


def test_signal_group_propagates_permission_errors() -> None:
    if os.geteuid() == 0:
        pytest.skip("root may signal every process group")
    init = procs.read_stat(1)
    assert init is not None
    if init.pgid <= 1:
        pytest.skip("PID 1 has no signalable process group")
    with pytest.raises(PermissionError):
        procs.signal_group(init.pgid, 0)


def test_the_last_sampling_rungs_read_a_group_then_a_single_process() -> None:
    """The process-group walk and the single-process fallback (§4.4), on real processes."""
    from vq.executors.sampling import sample_groups, sample_process

    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        groups = sample_groups([child.pid])
        assert groups[child.pid].pids == [child.pid]
        assert groups[child.pid].cgroup_lookup == "process-group"
        alone = sample_process(os.getpid())
        assert alone is not None and alone.pids == [os.getpid()]
        assert (alone.cgroup_lookup, alone.cpu_time_source) == ("process", "proc-stat-process")
        assert alone.rss_bytes > 0
    finally:
        child.kill()
        child.wait()
    assert sample_process(child.pid) is None  # reaped: gone
    assert child.pid not in sample_groups([child.pid])
