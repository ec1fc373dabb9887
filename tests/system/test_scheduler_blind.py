"""A lane without accounting: ``vq status`` warns once the scheduler has been silent about
a running job for longer than MinJobAge (real daemon, real CLI, the testbed's Slurm)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Vq, wait_until
from tests.system.test_pack_slurm import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_scheduler_slurm import (
    _configure,
    _ssh,
    scratch,  # noqa: F401 - the fixture
)
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(240)


def _warning(vq: Vq, job: str) -> object:
    return json.loads(vq.run("status", job, "--json").stdout).get("scheduler_warning")


def test_status_warns_when_a_lane_without_accounting_goes_blind(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
) -> None:
    _configure(vq, slurm_testbed, scratch, scheduler_accounting="none", scheduler_min_job_age=4)
    vq.start_daemon()
    job = vq.submit("cluster", "--", "sleep", "120")
    wait_until(lambda: vq.spec(job).get("scheduler_state") == "running", 60)
    slurm_id = vq.spec(job)["scheduler_job_id"]
    try:
        # Polled every second: the scheduler reports the job, no warning.
        wait_until(lambda: vq.spec(job).get("last_heartbeat_at"), 30)
        assert _warning(vq, job) is None
        # Nobody polls any more: after MinJobAge of silence the lane is blind to it.
        vq.stop_daemon()
        warning = wait_until(lambda: _warning(vq, job), 30)
        assert isinstance(warning, dict) and warning["code"] == "lane_blind"
        assert "MinJobAge (4 s)" in warning["message"]
        human = vq.run("status", job)
        assert "warning: lane cluster has no accounting" in " ".join(human.stdout.split())
        assert "hint:" in human.stdout
    finally:
        _ssh(slurm_testbed, "scancel", slurm_id)
