"""Lanes and scheduler accounting, with a real daemon, the real CLI and the testbed's Slurm:
without accounting ``vq status`` warns once the scheduler has been silent about a running
job for longer than MinJobAge; with it, sacct's CPU and MaxRSS reach ``samples.jsonl``
when the job's GNU time receipt is unusable."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_scheduler_slurm import (
    _configure,
    _ssh,
    _terminal,
    lane,  # noqa: F401 - the fixture
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


def test_sacct_sample_when_the_receipt_is_unusable(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
) -> None:
    # The epilogue runs after GNU time wrote the receipt: it spoils it.
    epilogue = ["printf spoiled > _vq/resource-usage.json"]
    _configure(vq, slurm_testbed, scratch, epilogue=epilogue)
    vq.start_daemon()
    # Burns until its own CPU time (not the wall clock) reaches 2.5 s: however loaded the
    # machine, the job has used that much CPU, so accounting must report more than 2 s.
    burn = (
        "import time; b = bytearray(80 * 2**20)\n"
        "b[:: 4096] = b'x' * len(b[:: 4096])\n"
        "while time.process_time() < 2.5: pass"
    )
    spoiled = vq.submit("cluster", "--", "python3", "-c", burn)
    done = _terminal(vq, spoiled)
    assert (done["state"], done["exit_code"]) == ("COMPLETED", 0)  # never delayed or changed
    workspace = vq.root / "jobs" / spoiled / "_vq"
    assert (workspace / "resource-usage.json").read_bytes() == b"spoiled"
    samples = workspace / "samples.jsonl"
    wait_until(samples.exists, 60)
    lines = samples.read_text().splitlines()
    assert len(lines) == 1
    sample = json.loads(lines[0])
    assert sample["cpu_time_source"] == "sacct" and sample["status"] == "ok", sample
    assert sample["scheduler_job_id"] == done["scheduler_job_id"]
    assert sample["rss_mb"] > 60 and sample["cpu_time_seconds"] > 2


def test_no_sacct_sample_when_the_receipt_is_good(lane: Vq) -> None:  # noqa: F811
    job = lane.submit("cluster", "--", "true")
    done = _terminal(lane, job)
    assert done["state"] == "COMPLETED"
    receipt = json.loads((lane.root / "jobs" / job / "_vq" / "resource-usage.json").read_text())
    assert receipt["status"] == "ok"
    assert not (lane.root / "jobs" / job / "_vq" / "samples.jsonl").exists()
