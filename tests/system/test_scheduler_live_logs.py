"""Live output of a Slurm lane job: ``vq logs -f`` prints what the job wrote on the
cluster while Slurm still runs it, then the rest after copy-back, every byte exactly once;
``vq logs`` (no ``-f``) mid-run prints what the cluster has written so far. With
``node_scratch_dir`` the job runs in node-local scratch and its stdout/stderr (the
wrapper's redirections into the shared workspace) are what is live.

Real daemon, real CLI subprocesses, real sshd and the testbed's Slurm 22.05 (run under
the testbed's flock)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VQ_BIN, Vq, wait_until
from tests.system.slurm_lane import (
    scratch,  # noqa: F401 - the fixture
    slurm_lane_keys,
    slurm_testbed,  # noqa: F401 - the fixture
    toml_table,
    write_config,
)
from tests.system.slurm_lane import ssh_local as _ssh
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(240)

PAYLOAD = "echo first-line; echo first-err >&2; sleep 12; echo second-line"


class Follower:
    """``vq logs -f ID`` in a subprocess, its stdout gathered by a thread."""

    def __init__(self, vq: Vq, *args: str) -> None:
        self.proc = subprocess.Popen(
            [VQ_BIN, "logs", "-f", *args], env=vq.env, stdout=subprocess.PIPE
        )
        self.out = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read1(4096):
            self.out += chunk

    def finish(self, timeout: float) -> bytes:
        assert self.proc.wait(timeout=timeout) == 0
        self._reader.join(timeout=10)
        return self.out

    def stop(self) -> None:
        """Kill it if it still runs; close its pipe."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _slurm_state(testbed: SshTestbed, scheduler_id: str) -> str:
    return _ssh(testbed, "squeue", "--noheader", "-j", scheduler_id, "-o", "%T").strip()


# node-local scratch changes only where the job's other files live: `make soak` runs it
@pytest.mark.parametrize(
    "node_scratch",
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["shared", "node-scratch"],
)
def test_logs_follow_a_running_lane_job_live_and_exactly_once(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
    node_scratch: bool,
) -> None:
    extra: dict[str, Any] = {}
    if node_scratch:
        nodes = f"{scratch}/nodes"
        _ssh(slurm_testbed, "mkdir", "-p", nodes)
        extra["node_scratch_dir"] = nodes
    write_config(vq, toml_table("hosts.cluster", slurm_lane_keys(slurm_testbed, scratch, **extra)))
    vq.start_daemon()
    job = vq.submit("cluster", "--", "sh", "-c", PAYLOAD)
    follower = Follower(vq, job)
    errors = Follower(vq, job, "--stderr")
    try:
        wait_until(lambda: b"first-line" in follower.out, 90, interval=0.2)
        # Seen while the job still runs on the cluster, before any copy-back.
        spec = vq.spec(job)
        assert spec["state"] == "RUNNING" and spec["scheduler_state"] == "running", spec
        assert _slurm_state(slurm_testbed, spec["scheduler_job_id"]) == "RUNNING"
        assert b"second-line" not in follower.out
        wait_until(lambda: b"first-err" in errors.out, 30, interval=0.2)

        # Without -f: what the cluster has written so far, while it still runs.
        shown = vq.run("logs", job).stdout
        assert shown == "first-line\n", shown
        assert vq.state(job) == "RUNNING"
        assert _slurm_state(slurm_testbed, spec["scheduler_job_id"]) == "RUNNING"

        # After copy-back: the rest, and nothing twice.
        assert follower.finish(timeout=120) == b"first-line\nsecond-line\n"
        assert errors.finish(timeout=30) == b"first-err\n"
    finally:
        follower.stop()
        errors.stop()
    assert vq.state(job) == "COMPLETED"
    workspace = Path(vq.root) / "jobs" / job
    assert (workspace / "stdout.log").read_bytes() == b"first-line\nsecond-line\n"
