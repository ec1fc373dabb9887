"""Torque lanes end to end: a real daemon drives a Torque server over real sshd.

No Torque server is packaged for Debian, so the testbed installs a small one
(``scripts/testbed/torque_fake.py``: ``qsub``/``qstat``/``qdel``/``qhold``/``qrls``
sharing JSON state under ``flock``, printing Torque's ``qstat -f`` shapes and running
each job script as real processes) first on the PATH of one namespace host
(``VQ_TESTBED_TORQUE_HOST``, vq-h1). The lane reaches that host as user ``vqtest``
through the testbed's ssh config, with the real :class:`~vq.transport.ssh.SshRunner` and
the real daemon; every verb is the real ``vq`` CLI. The last test is a smoke run on
Slurm's own ``slurm-wlm-torque`` wrappers (``/usr/bin/qsub`` on vq-local).
"""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import (
    LANE_TIMING,
    slurm_testbed,  # noqa: F401 - the fixture
    toml_table,
    write_config,
)
from tests.system.slurm_lane import ssh_on as _ssh
from tests.testbed import TB, SshTestbed, _read_env, run_up

pytestmark = pytest.mark.timeout(240)

FAKE_BIN = "/opt/vq-testbed/torque-fake/bin"
TERMINAL = {"COMPLETED", "FAILED", "KILLED", "OOM_KILLED", "TIME_EXCEEDED", "ABORTED_BY_QUEUE"}


@pytest.fixture
def torque_host(testbed: SshTestbed) -> str:
    host = _read_env(TB / "env.sh").get("VQ_TESTBED_TORQUE_HOST")
    if not host:
        pytest.fail("the testbed's env.sh names no VQ_TESTBED_TORQUE_HOST (re-run up.sh)")
    # An up.sh of an older checkout rewrites the host's sshd config without the fake on
    # its PATH; this checkout's up.sh (idempotent) puts it back. A connection keeps the
    # PATH it logged in with, so the daemon's master connection is not affected later.
    for _attempt in range(3):
        where = _ssh(testbed, host, "command", "-v", "qsub").stdout.strip()
        if where == f"{FAKE_BIN}/qsub":
            return host
        run_up()
    pytest.fail(f"qsub on {host} is {where!r}, not the testbed's Torque server")


@pytest.fixture
def scratch(testbed: SshTestbed, torque_host: str) -> Iterator[str]:
    root = f"/tmp/vq-torque-{secrets.token_hex(4)}"
    assert _ssh(testbed, torque_host, "mkdir", "-p", root).returncode == 0
    yield root
    _qdel_all(testbed, torque_host)  # a failed test must not leave the node busy
    _ssh(testbed, torque_host, "rm", "-rf", root)


def _qdel_all(testbed: SshTestbed, host: str) -> None:
    listing = _ssh(testbed, host, f"{FAKE_BIN}/qstat", "-f").stdout
    job_id = None
    for line in listing.splitlines():
        if line.startswith("Job Id:"):
            job_id = line.split(":", 1)[1].strip()
        elif line.strip().startswith("job_state = ") and not line.rstrip().endswith("C"):
            _ssh(testbed, host, f"{FAKE_BIN}/qdel", str(job_id))


def _configure(vq: Vq, testbed: SshTestbed, host: str, scratch: str, **extra: Any) -> None:
    keys: dict[str, Any] = {
        "ssh": host,
        "ssh_options": ["-F", str(testbed.ssh_config)],
        "scheduler_dialect": "torque",
        "scheduler_accounting": "none",
        "scratch_root": scratch,
        **LANE_TIMING,
        **extra,
    }
    write_config(vq, toml_table("hosts.torque", keys))


@pytest.fixture
def lane(vq: Vq, testbed: SshTestbed, torque_host: str, scratch: str) -> Vq:
    _configure(vq, testbed, torque_host, scratch)
    vq.start_daemon()
    return vq


def _terminal(vq: Vq, job_id: str, timeout: float = 90.0) -> dict[str, Any]:
    wait_until(lambda: vq.state(job_id) in TERMINAL, timeout)
    return vq.spec(job_id)


def _qstat_state(testbed: SshTestbed, host: str, torque_id: str) -> str:
    done = _ssh(testbed, host, f"{FAKE_BIN}/qstat", "-f", torque_id)
    for line in done.stdout.splitlines():
        if line.strip().startswith("job_state = "):
            return line.split("=", 1)[1].strip()
    return ""


def test_true_and_exit_3(lane: Vq) -> None:
    ok = lane.submit("torque", "--", "sh", "-c", "echo out-line; echo err-line >&2; true")
    bad = lane.submit("torque", "--", "sh", "-c", "exit 3")
    done = _terminal(lane, ok)
    assert (done["state"], done["exit_code"]) == ("COMPLETED", 0)
    assert done["scheduler_target"] == "torque"
    assert done["scheduler_job_id"].endswith(".vq-torque")
    assert done["scheduler_state"] == "ended"
    workspace = lane.root / "jobs" / ok
    assert (workspace / "stdout.log").read_text() == "out-line\n"
    assert (workspace / "stderr.log").read_text() == "err-line\n"
    receipt = json.loads((workspace / "_vq" / "resource-usage.json").read_text())
    assert receipt["exit_code"] == 0 and receipt["source"] == "gnu-time"
    # The script wrote the Torque id it ran under ($PBS_JOBID) first.
    marker = (workspace / "_vq" / "scheduler-job-id").read_text().strip()
    assert marker == done["scheduler_job_id"]
    failed = _terminal(lane, bad)
    assert (failed["state"], failed["exit_code"]) == ("FAILED", 3)


def test_kill_writes_killed_then_qdel(lane: Vq, testbed: SshTestbed, torque_host: str) -> None:
    job = lane.submit("torque", "--", "sleep", "300")
    wait_until(lambda: lane.spec(job).get("scheduler_state") == "running", 60)
    torque_id = lane.spec(job)["scheduler_job_id"]
    assert _qstat_state(testbed, torque_host, torque_id) == "R"
    lane.run("kill", job)
    assert lane.state(job) == "KILLED"
    wait_until(lambda: _qstat_state(testbed, torque_host, torque_id) == "C", 60)
    wait_until(lambda: lane.spec(job).get("scheduler_state") == "ended", 60)
    assert lane.state(job) == "KILLED"


def test_hold_and_release_a_queued_job(lane: Vq, testbed: SshTestbed, torque_host: str) -> None:
    blocker = lane.submit("torque", "--cpus", "2", "--", "sleep", "8")
    wait_until(lambda: lane.spec(blocker).get("scheduler_state") == "running", 60)
    refused = lane.run("pause", blocker, check=False)
    assert refused.returncode != 0 and "hint:" in refused.stderr
    assert lane.state(blocker) == "RUNNING"
    waiting = lane.submit("torque", "--cpus", "2", "--", "true")
    reason = wait_until(lambda: lane.spec(waiting).get("scheduler_queued_reason"), 60)
    assert reason.startswith("Not Running") and lane.spec(waiting)["scheduler_state"] == "queued"
    lane.run("pause", waiting)
    assert lane.state(waiting) == "SUSPENDED"
    torque_id = lane.spec(waiting)["scheduler_job_id"]
    assert _qstat_state(testbed, torque_host, torque_id) == "H"
    # Held: the blocker ends and frees the cores; the held job still does not start.
    assert _terminal(lane, blocker)["state"] == "COMPLETED"
    assert _qstat_state(testbed, torque_host, torque_id) == "H"
    assert lane.state(waiting) == "SUSPENDED"
    lane.run("resume", waiting)
    assert lane.state(waiting) == "RUNNING"
    done = _terminal(lane, waiting)
    assert (done["state"], done["scheduler_job_id"]) == ("COMPLETED", torque_id)


def test_restart_mid_run_reattaches(lane: Vq) -> None:
    job = lane.submit("torque", "--", "sh", "-c", "sleep 5; echo finished")
    wait_until(lambda: lane.spec(job).get("scheduler_state") == "running", 60)
    torque_id = lane.spec(job)["scheduler_job_id"]
    lane.stop_daemon()
    assert lane.state(job) == "RUNNING"
    lane.start_daemon()
    done = _terminal(lane, job)
    assert (done["state"], done["scheduler_job_id"]) == ("COMPLETED", torque_id)
    assert (lane.root / "jobs" / job / "stdout.log").read_text() == "finished\n"


def test_smoke_on_slurms_torque_wrappers(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
) -> None:
    where = _ssh(slurm_testbed, "vq-local", "command", "-v", "qsub")
    if where.stdout.strip() != "/usr/bin/qsub" or shutil.which("qsub") is None:
        pytest.fail(f"slurm-wlm-torque is not on the testbed: qsub is {where.stdout!r} (up.sh)")
    scratch = f"/tmp/vq-torque-{secrets.token_hex(4)}"
    assert _ssh(slurm_testbed, "vq-local", "mkdir", "-p", scratch).returncode == 0
    try:
        _configure(vq, slurm_testbed, "vq-local", scratch)
        vq.start_daemon()
        job = vq.submit("torque", "--", "sh", "-c", "echo via-wrappers; exit 4")
        done = _terminal(vq, job)
        assert (done["state"], done["exit_code"]) == ("FAILED", 4)
        assert done["scheduler_job_id"].isdigit()  # the wrappers print Slurm's own id
        assert (vq.root / "jobs" / job / "stdout.log").read_text() == "via-wrappers\n"
    finally:
        _ssh(slurm_testbed, "vq-local", "rm", "-rf", scratch)
