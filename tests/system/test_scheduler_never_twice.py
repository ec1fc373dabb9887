"""Never twice on a cluster: a slow ``sbatch`` outlives the daemon that started it or the SSH
link it ran over, and a short slurmctld outage, on the testbed's real Slurm over real sshd;
a slow ``qsub`` on the testbed's Torque server likewise.

The login host's ``sbatch`` is the testbed's slow-submit wrapper
(``scripts/testbed/slow_submit.sh``): a test's scratch directory holds the delay, and every
call that reached it is logged beside it. Afterwards ``sacct`` must hold exactly one Slurm
job per vq job, the one vq adopted, and the wrapper must have been called exactly once: the
first ``sbatch`` lands after the daemon died or the link was cut, and it is the only one.
"""

from __future__ import annotations

import os
import secrets
import signal
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import (
    configure_slow_lane,
    cut_ssh,
    kill_and_restart,
    sacct_ids,
    scratch,  # noqa: F401 - the fixture
    set_submit_delay,
    slurm_testbed,  # noqa: F401 - the fixture
    ssh_on,
    submit_calls,
    submit_packed,
)
from tests.system.test_scheduler_torque import (
    FAKE_BIN,
    torque_host,  # noqa: F401 - the fixture
)
from tests.system.test_scheduler_torque import _configure as configure_torque
from tests.testbed import SshTestbed, run_up
from vq._proc_stat import is_alive

#: How long the login host's sbatch stalls before it submits: well past the daemon's
#: absence rechecks (2 s apart), as a controller at MaxJobCount stalls for minutes.
SLOW_SBATCH_S = 12


def _finished(vq: Vq, job: str, timeout: float) -> dict[str, object]:
    wait_until(lambda: vq.state(job) in {"COMPLETED", "FAILED", "ABORTED_BY_QUEUE"}, timeout)
    return vq.spec(job)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", ["plain", "packed"])
@pytest.mark.parametrize("fault", ["daemon_killed", "ssh_cut"])
def test_a_slow_sbatch_outliving_its_caller_lands_once_and_is_adopted(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
    fault: str,
    kind: str,
) -> None:
    configure_slow_lane(vq, slurm_testbed, scratch)
    # A private SSH control directory: this daemon's own ControlMaster carries the link
    # (not one another test's daemon left behind), so killing its ssh processes cuts it.
    runtime = Path(tempfile.mkdtemp(prefix="vqx-", dir="/tmp"))
    vq = Vq(vq.root, {**vq.env, "XDG_RUNTIME_DIR": str(runtime)})
    set_submit_delay(slurm_testbed, scratch, SLOW_SBATCH_S)
    vq.start_daemon()
    if kind == "plain":
        jobs = [vq.submit("cluster", "--", "sh", "-c", "echo landed-once")]
    else:
        jobs = submit_packed(vq, "0-1", "--", "sh", "-c", "echo landed-once")
    wait_until(lambda: submit_calls(slurm_testbed, scratch), 60)
    if fault == "daemon_killed":
        kill_and_restart(vq)
    else:
        assert cut_ssh(vq, runtime) >= 2  # a client and the master
    # While the first sbatch still stalls, nothing is resubmitted and nothing failed.
    started = time.monotonic()
    while time.monotonic() - started < SLOW_SBATCH_S - 3:
        assert len(submit_calls(slurm_testbed, scratch)) == 1
        assert {vq.state(job) for job in jobs} == {"RUNNING"}
        time.sleep(0.5)
    for job in jobs:
        done_spec = _finished(vq, job, 150)
        assert done_spec["state"] == "COMPLETED", done_spec
        assert (vq.root / "jobs" / job / "stdout.log").read_text() == "landed-once\n"
    receipts = {vq.spec(job)["scheduler_job_id"] for job in jobs}
    assert len(receipts) == 1
    name = f"vq-{jobs[0]}" if kind == "plain" else f"vqp-{vq.spec(jobs[0])['scheduler_pack_id']}"
    named = wait_until(lambda: sacct_ids(slurm_testbed, name), 60)
    assert named == sorted(receipts)
    assert len(submit_calls(slurm_testbed, scratch)) == 1


def _slurmctld_pid() -> int | None:
    try:
        pid = int(Path("/run/slurmctld.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if is_alive(pid) else None


@pytest.mark.timeout(240)
def test_a_submit_during_a_slurmctld_outage_waits_and_lands_once(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
) -> None:
    configure_slow_lane(vq, slurm_testbed, scratch)
    vq.start_daemon()
    pid = _slurmctld_pid()
    assert pid is not None, "the testbed's slurmctld is not running"
    os.kill(pid, signal.SIGTERM)
    try:
        wait_until(lambda: not is_alive(pid), 30)
        job = vq.submit("cluster", "--", "sh", "-c", "echo after-the-outage")
        wait_until(lambda: vq.spec(job).get("scheduler_state") == "submit_retry", 60)
        spec = vq.spec(job)
        assert spec["state"] == "RUNNING" and spec["scheduler_job_id"] is None
        assert "could not be reached" in str(spec.get("scheduler_queued_reason"))
        status = vq.json("status", job)
        assert status["state"] == "RUNNING"
        # Still waiting a few retries later: a connect failure is never a refusal.
        wait_until(lambda: len(_sbatch_calls_or_log(vq)) >= 2, 60)
        assert vq.state(job) == "RUNNING"
    finally:
        up = run_up(VQ_TESTBED_SLURM="1")
        assert up.returncode == 0, up.stderr[-2000:]
    done = _finished(vq, job, 150)
    assert done["state"] == "COMPLETED", done
    assert (vq.root / "jobs" / job / "stdout.log").read_text() == "after-the-outage\n"
    named = wait_until(lambda: sacct_ids(slurm_testbed, f"vq-{job}"), 60)
    assert named == [done["scheduler_job_id"]]


def _sbatch_calls_or_log(vq: Vq) -> list[str]:
    """The daemon log's lines about a controller it could not reach."""
    try:
        text = (vq.root / "daemon.log").read_text()
    except OSError:
        return []
    return [line for line in text.splitlines() if "submitting again in" in line]


@pytest.mark.timeout(240)
def test_a_slow_qsub_outliving_a_killed_daemon_lands_once_on_torque(
    vq: Vq,
    testbed: SshTestbed,
    torque_host: str,  # noqa: F811
) -> None:
    """The same guard on a Torque lane (the testbed's Torque server, whose qsub honours the
    slow-submit files): one Torque job, adopted after the restart."""
    root = f"/tmp/vq-torque-{secrets.token_hex(4)}"
    assert ssh_on(testbed, torque_host, "mkdir", "-p", root).returncode == 0
    try:
        configure_torque(vq, testbed, torque_host, root)
        set_submit_delay(testbed, root, SLOW_SBATCH_S)
        vq.start_daemon()
        job = vq.submit("torque", "--", "sh", "-c", "echo landed-once")
        wait_until(lambda: submit_calls(testbed, root), 60)
        kill_and_restart(vq)
        done = _finished(vq, job, 150)
        assert done["state"] == "COMPLETED", done
        assert (vq.root / "jobs" / job / "stdout.log").read_text() == "landed-once\n"
        listing = ssh_on(testbed, torque_host, f"{FAKE_BIN}/qstat", "-f").stdout
        assert listing.count(f"Job_Name = vq-{job}\n") == 1, listing
        assert len(submit_calls(testbed, root)) == 1
    finally:
        ssh_on(testbed, torque_host, "rm", "-rf", root)
