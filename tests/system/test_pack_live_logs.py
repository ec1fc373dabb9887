"""Live output of a packed array element: ``vq logs`` and ``vq logs -f`` show what the
element's slot has written on the cluster (``<log_root>/<alloc>-<job>-<slot>.out`` and
``.err``) while Slurm still runs its allocation, and after copy-back the whole output,
every byte exactly once, also for a follower started mid-run.

Real daemon, real CLI subprocesses, real sshd and the testbed's Slurm 22.05 (run under
the testbed's flock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import (
    pack_profile_tables,
    slurm_lane_keys,
    slurm_testbed,  # noqa: F401 - the fixture
    submit_packed,
    toml_table,
    write_config,
)
from tests.system.test_scheduler_live_logs import Follower, _slurm_state
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(300)

PAYLOAD = "echo first-line; echo first-err >&2; sleep 12; echo second-line"


def test_logs_follow_a_running_packed_element_live_and_exactly_once(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,
) -> None:
    lane = toml_table("hosts.cluster", slurm_lane_keys(slurm_testbed, f"{remote_root}/scratch"))
    write_config(vq, lane, pack_profile_tables(remote_root))
    vq.start_daemon()
    [job] = submit_packed(vq, "0", "--", "sh", "-c", PAYLOAD)
    follower = Follower(vq, job)
    errors = Follower(vq, job, "--stderr")
    late: Follower | None = None
    try:
        wait_until(lambda: b"first-line" in follower.out, 150, interval=0.2)
        # Seen while the element's slot still runs on the cluster, before any copy-back.
        spec = vq.spec(job)
        assert spec["state"] == "RUNNING" and spec["scheduler_state"] == "running", spec
        assert _slurm_state(slurm_testbed, spec["scheduler_job_id"]) == "RUNNING"
        assert b"second-line" not in follower.out
        wait_until(lambda: b"first-err" in errors.out, 30, interval=0.2)

        # Without -f: what the slot has written so far, while it still runs.
        shown = vq.run("logs", job).stdout
        assert shown == "first-line\n", shown
        late = Follower(vq, job)  # a follower started mid-run
        assert vq.state(job) == "RUNNING"
        assert _slurm_state(slurm_testbed, spec["scheduler_job_id"]) == "RUNNING"

        # After copy-back: the rest, and nothing twice.
        assert follower.finish(timeout=120) == b"first-line\nsecond-line\n"
        assert late.finish(timeout=30) == b"first-line\nsecond-line\n"
        assert errors.finish(timeout=30) == b"first-err\n"
    finally:
        for one in (follower, errors, late):
            if one is not None:
                one.stop()
    assert vq.state(job) == "COMPLETED"
    workspace = Path(vq.root) / "jobs" / job
    assert (workspace / "stdout.log").read_bytes() == b"first-line\nsecond-line\n"
    assert (workspace / "stderr.log").read_bytes() == b"first-err\n"
