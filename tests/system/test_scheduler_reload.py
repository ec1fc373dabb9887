"""Scheduler lanes follow ``vq daemon reload``: added, changed and removed without a restart.

Real daemon, real CLI, the testbed's Slurm 22.05 over real sshd (see
``test_scheduler_slurm.py`` for the lane's settings). A removed lane's jobs stay as they
are (RUNNING with their Slurm ids, PENDING ones waiting) and are adopted again when a
reload brings the lane back.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_scheduler_slurm import (
    _configure,
    _slurm_jobs_named,
    _ssh,
    _terminal,
    scratch,  # noqa: F401 - the fixture
)
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(300)


def _reload(vq: Vq) -> dict[str, Any]:
    done = vq.run("daemon", "reload", "--json")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def _no_lanes(vq: Vq) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[daemon]\nmax_jobs = 2\n")


def _slurm_state(testbed: SshTestbed, slurm_id: str) -> str:
    out = _ssh(testbed, "sacct", "-X", "-n", "-P", "-j", slurm_id, "-o", "State")
    return out.strip().splitlines()[0] if out.strip() else ""


def test_lane_added_by_reload_dispatches(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
) -> None:
    _no_lanes(vq)
    vq.start_daemon()
    _configure(vq, slurm_testbed, scratch)
    answer = _reload(vq)
    assert answer["lanes"]["added"] == ["cluster"]
    job = vq.submit("cluster", "--", "sh", "-c", "echo added")
    done = _terminal(vq, job)
    assert (done["state"], done["scheduler_target"]) == ("COMPLETED", "cluster")
    assert (vq.root / "jobs" / job / "stdout.log").read_text() == "added\n"
    # A reload that changes nothing of the lane keeps it.
    assert _reload(vq)["lanes"] == {"added": [], "changed": [], "removed": [], "kept": ["cluster"]}


def test_changed_lane_is_rebuilt_and_adopts_its_running_job(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
) -> None:
    _configure(vq, slurm_testbed, scratch)
    vq.start_daemon()
    job = vq.submit("cluster", "--", "sh", "-c", "sleep 6; echo changed")
    wait_until(lambda: vq.spec(job).get("scheduler_state") == "running", 60)
    slurm_id = vq.spec(job)["scheduler_job_id"]
    _configure(vq, slurm_testbed, scratch, poll_interval=2, max_scheduler_jobs=3)
    answer = _reload(vq)
    assert answer["lanes"]["changed"] == ["cluster"]
    assert "hosts.cluster" in answer["applied"]
    done = _terminal(vq, job)
    assert (done["state"], done["scheduler_job_id"]) == ("COMPLETED", slurm_id)
    assert (vq.root / "jobs" / job / "stdout.log").read_text() == "changed\n"
    assert wait_until(lambda: _slurm_jobs_named(slurm_testbed, job), 30) == [slurm_id]


def test_removed_lane_keeps_its_jobs_until_it_comes_back(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
) -> None:
    _configure(vq, slurm_testbed, scratch, max_scheduler_jobs=1)
    vq.start_daemon()
    running = vq.submit("cluster", "--", "sh", "-c", "sleep 3; echo kept")
    waiting = vq.submit("cluster", "--", "true")
    wait_until(lambda: vq.spec(running).get("scheduler_state") == "running", 60)
    slurm_id = vq.spec(running)["scheduler_job_id"]
    _no_lanes(vq)
    assert _reload(vq)["lanes"]["removed"] == ["cluster"]
    # The Slurm job ends while no lane watches it: the vq job is neither finished nor
    # failed, and the queued one is not failed for want of an executor.
    wait_until(lambda: _slurm_state(slurm_testbed, slurm_id) == "COMPLETED", 60)
    deadline = time.monotonic() + 4  # four of the removed lane's would-be poll rounds
    while time.monotonic() < deadline:
        spec = vq.spec(running)
        assert (spec["state"], spec["scheduler_state"]) == ("RUNNING", "running")
        assert vq.state(waiting) == "PENDING"
    _configure(vq, slurm_testbed, scratch, max_scheduler_jobs=1)
    assert _reload(vq)["lanes"]["added"] == ["cluster"]
    done = _terminal(vq, running)
    assert (done["state"], done["scheduler_job_id"]) == ("COMPLETED", slurm_id)
    assert (vq.root / "jobs" / running / "stdout.log").read_text() == "kept\n"
    assert _terminal(vq, waiting)["state"] == "COMPLETED"
    for job in (running, waiting):
        assert wait_until(lambda job=job: _slurm_jobs_named(slurm_testbed, job), 30) == [
            vq.spec(job)["scheduler_job_id"]
        ]
