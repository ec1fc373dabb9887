"""Slurm lanes end to end: a real daemon drives the testbed's Slurm 22.05 over real sshd.

The lane is ``[hosts.cluster]`` with ``scheduler_dialect = "slurm"``, reached as user
``vqtest`` through the testbed's ssh config, driven by this queue's own daemon
(``scheduler_driver = "localhost"``). Every verb is the real ``vq`` CLI in a subprocess;
Slurm's own view is read with ``squeue``/``sacct`` on the same host. Needs root (the
testbed); skipped on a developer machine without it and FAILS under ``CI=true``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import (
    sacct_ids,
    scratch,  # noqa: F401 - the fixture
    slurm_lane_keys,
    slurm_testbed,  # noqa: F401 - the fixture
    toml_table,
    write_config,
)
from tests.system.slurm_lane import ssh_local as _ssh
from tests.testbed import SshTestbed
from vq._proc_stat import is_alive
from vq.config.hosts import HostSettings
from vq.remote.fleet import Fleet
from vq.web.fleet.source import FleetSource

pytestmark = pytest.mark.timeout(240)


def _configure(vq: Vq, testbed: SshTestbed, root: str, **extra: Any) -> None:
    write_config(vq, toml_table("hosts.cluster", slurm_lane_keys(testbed, root, **extra)))


@pytest.fixture
def lane(vq: Vq, slurm_testbed: SshTestbed, scratch: str) -> Vq:  # noqa: F811
    _configure(vq, slurm_testbed, scratch)
    vq.start_daemon()
    return vq


def _terminal(vq: Vq, job_id: str, timeout: float = 90.0) -> dict[str, Any]:
    terminal = {"COMPLETED", "FAILED", "KILLED", "OOM_KILLED", "TIME_EXCEEDED"}
    terminal |= {"ABORTED_BY_QUEUE"}
    wait_until(lambda: vq.state(job_id) in terminal, timeout)
    return vq.spec(job_id)


def _slurm_jobs_named(testbed: SshTestbed, job_id: str) -> list[str]:
    return sacct_ids(testbed, f"vq-{job_id}")


def test_true_with_receipt_and_exit_3(lane: Vq) -> None:
    ok = lane.submit("cluster", "--", "sh", "-c", "echo out-line; echo err-line >&2; true")
    bad = lane.submit("cluster", "--", "sh", "-c", "exit 3")
    done = _terminal(lane, ok)
    assert done["state"] == "COMPLETED" and done["exit_code"] == 0
    assert done["scheduler_target"] == "cluster" and done["scheduler_job_id"].isdigit()
    assert done["scheduler_state"] == "ended"
    workspace = lane.root / "jobs" / ok
    assert (workspace / "stdout.log").read_text() == "out-line\n"
    assert (workspace / "stderr.log").read_text() == "err-line\n"
    receipt = json.loads((workspace / "_vq" / "resource-usage.json").read_text())
    assert receipt["schema"] == "vq.resource-usage.v1" and receipt["exit_code"] == 0
    assert receipt["source"] == "gnu-time" and receipt["max_rss_kb"] > 0
    failed = _terminal(lane, bad)
    assert (failed["state"], failed["exit_code"]) == ("FAILED", 3)
    status = lane.status(bad)
    assert status["scheduler_job_id"] == failed["scheduler_job_id"]


def test_oom_in_cgroup_mode(lane: Vq) -> None:
    job = lane.submit(
        "cluster",
        "--mem-mb",
        "64",
        "--",
        "python3",
        "-c",
        "import time; b = bytearray(400 * 2**20); time.sleep(2)",
    )
    done = _terminal(lane, job)
    assert done["state"] == "OOM_KILLED", done
    assert "OUT_OF_MEMORY" in (done["failure_reason"] or "")


def test_kill_writes_killed_then_cancels(lane: Vq, slurm_testbed: SshTestbed) -> None:  # noqa: F811
    job = lane.submit("cluster", "--", "sleep", "300")
    wait_until(lambda: lane.spec(job).get("scheduler_state") == "running", 60)
    scheduler_id = lane.spec(job)["scheduler_job_id"]
    lane.run("kill", job)
    assert lane.state(job) == "KILLED"

    def gone() -> bool:
        out = _ssh(slurm_testbed, "squeue", "--noheader", "-j", scheduler_id, "-o", "%T")
        return out.strip() in ("", "CANCELLED")

    wait_until(gone, 60)
    wait_until(lambda: lane.spec(job).get("scheduler_state") == "ended", 60)
    assert lane.state(job) == "KILLED"


def test_queued_reason_set_then_cleared(lane: Vq) -> None:
    blocker = lane.submit("cluster", "--cpus", "2", "--", "sleep", "6")
    wait_until(lambda: lane.spec(blocker).get("scheduler_state") == "running", 60)
    waiting = lane.submit("cluster", "--cpus", "2", "--", "true")
    wait_until(lambda: lane.spec(waiting).get("scheduler_queued_reason"), 60)
    assert lane.spec(waiting)["scheduler_state"] == "queued"
    assert lane.spec(waiting)["scheduler_queued_reason"] in ("Resources", "Priority")
    done = _terminal(lane, waiting)
    assert done["state"] == "COMPLETED" and done["scheduler_queued_reason"] is None


def test_max_scheduler_jobs_holds_the_second_job(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811 - the fixture
) -> None:
    _configure(vq, slurm_testbed, scratch, max_scheduler_jobs=1)
    vq.start_daemon()
    first = vq.submit("cluster", "--", "sleep", "4")
    second = vq.submit("cluster", "--", "true")
    wait_until(lambda: vq.spec(first).get("scheduler_job_id"), 60)
    # While the first holds the lane's only slot, the second is never claimed.
    while vq.state(first) == "RUNNING":
        assert vq.state(second) == "PENDING"
    assert _terminal(vq, first)["state"] == "COMPLETED"
    assert _terminal(vq, second)["state"] == "COMPLETED"


def test_node_scratch_dir_runs_on_node_local_disk_and_copies_back(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    nodes = f"{scratch}/nodes"  # the node's local disk (the testbed's one node is this VM)
    _ssh(slurm_testbed, "mkdir", "-p", nodes)
    _configure(vq, slurm_testbed, scratch, node_scratch_dir=nodes)
    vq.start_daemon()
    source = tmp_path / "inputs"
    source.mkdir()
    (source / "in.txt").write_text("input\n")
    payload = "pwd; cat in.txt; echo result > out.txt"
    job = vq.submit("cluster", str(source), "--", "sh", "-c", payload)
    done = _terminal(vq, job)
    assert (done["state"], done["exit_code"]) == ("COMPLETED", 0)
    workspace = vq.root / "jobs" / job
    lines = (workspace / "stdout.log").read_text().splitlines()
    assert lines[0].startswith(f"{nodes}/vq-{job}."), lines  # it ran in the node's scratch
    assert lines[1:] == ["input"]  # seeded from the staged workspace
    assert (workspace / "out.txt").read_text() == "result\n"  # copied back, then home
    assert _ssh(slurm_testbed, "ls", "-A", nodes).strip() == ""  # and removed


def test_restart_mid_run_reattaches(lane: Vq) -> None:
    job = lane.submit("cluster", "--", "sh", "-c", "sleep 5; echo finished")
    wait_until(lambda: lane.spec(job).get("scheduler_state") == "running", 60)
    scheduler_id = lane.spec(job)["scheduler_job_id"]
    lane.stop_daemon()
    assert lane.state(job) == "RUNNING"
    lane.start_daemon()
    done = _terminal(lane, job)
    assert (done["state"], done["scheduler_job_id"]) == ("COMPLETED", scheduler_id)
    assert (lane.root / "jobs" / job / "stdout.log").read_text() == "finished\n"


@pytest.mark.parametrize("fault", ["after_intent", "after_sbatch"])
def test_crash_around_sbatch_submits_exactly_once(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811 - the fixture
    fault: str,
) -> None:
    _configure(vq, slurm_testbed, scratch)
    faulty = Vq(vq.root, {**vq.env, "VQ_TEST_FAULT": fault})
    faulty.start_daemon()
    pid = faulty.daemon_pid()
    assert pid is not None
    job = vq.submit("cluster", "--", "sh", "-c", "echo once")
    wait_until(lambda: not is_alive(pid), 60)  # the daemon SIGKILLed itself at the point
    spec = vq.spec(job)
    assert spec["state"] == "RUNNING" and spec["scheduler_state"] == "submitting"
    assert spec["scheduler_job_id"] is None
    vq.start_daemon()
    done = _terminal(vq, job, timeout=120)
    assert done["state"] == "COMPLETED"
    # Accounting lags a little behind squeue: wait for the record, then count.
    named = wait_until(lambda: _slurm_jobs_named(slurm_testbed, job), 30)
    assert named == [done["scheduler_job_id"]]


def test_lane_name_is_refused_for_other_verbs(lane: Vq) -> None:
    done = lane.run("status", "cluster", "abc", check=False)
    assert done.returncode == 2
    assert "scheduler lane" in done.stderr and "hint:" in done.stderr


def test_pause_holds_a_queued_job_and_refuses_a_running_one(lane: Vq) -> None:
    blocker = lane.submit("cluster", "--cpus", "2", "--", "sleep", "8")
    wait_until(lambda: lane.spec(blocker).get("scheduler_state") == "running", 60)
    refused = lane.run("pause", blocker, check=False)
    assert refused.returncode != 0 and "only a job still queued" in refused.stderr
    assert "hint:" in refused.stderr and lane.state(blocker) == "RUNNING"
    waiting = lane.submit("cluster", "--cpus", "2", "--", "true")
    wait_until(lambda: lane.spec(waiting).get("scheduler_state") == "queued", 60)
    lane.run("pause", waiting)
    assert lane.state(waiting) == "SUSPENDED"
    assert lane.spec(waiting)["scheduler_state"] == "held"
    # Held: the blocker ends, the held job still does not start.
    assert _terminal(lane, blocker)["state"] == "COMPLETED"
    wait_until(lambda: lane.spec(waiting).get("scheduler_queued_reason"), 30)
    assert lane.state(waiting) == "SUSPENDED"
    lane.run("resume", waiting)
    assert lane.state(waiting) == "RUNNING"
    assert _terminal(lane, waiting)["state"] == "COMPLETED"


def test_resolve_not_submitted_after_a_crash_before_sbatch(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811 - the fixture
) -> None:
    # A long recheck: after the first lookup finds nothing, the job waits for a decision.
    _configure(vq, slurm_testbed, scratch, scheduler_absent_recheck_seconds=600)
    usage = vq.run("scheduler", "resolve", "abcdef012345", check=False)
    assert usage.returncode == 2 and "exactly one of" in usage.stderr
    faulty = Vq(vq.root, {**vq.env, "VQ_TEST_FAULT": "after_intent"})
    faulty.start_daemon()
    pid = faulty.daemon_pid()
    assert pid is not None
    job = vq.submit("cluster", "--", "true")
    wait_until(lambda: not is_alive(pid), 60)
    # Nothing reached the login host, which the submit guard would prove by itself: plant
    # the record of a call that started sbatch and died before its answer (in doubt), so
    # only the tag, then an operator, can decide.
    intent = json.loads((vq.root / "jobs" / job / "_vq" / "scheduler-intent.json").read_text())
    records = intent["submit_records"]
    _ssh(slurm_testbed, f"mkdir -p {records} && echo {'d' * 16} > {records}/started")
    vq.start_daemon()

    def resolved() -> bool:
        return vq.run("scheduler", "resolve", job, "--not-submitted", check=False).returncode == 0

    wait_until(resolved, 60)
    done = _terminal(vq, job)
    assert done["state"] == "COMPLETED"
    again = vq.run("scheduler", "resolve", job, "--job-id", "1", check=False)
    assert again.returncode != 0 and "not waiting for a decision" in again.stderr
    named = wait_until(lambda: _slurm_jobs_named(slurm_testbed, job), 30)
    assert named == [done["scheduler_job_id"]]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_timeout_is_time_exceeded(lane: Vq) -> None:
    job = lane.submit("cluster", "--wall-time", "1m", "--", "sleep", "300")
    done = _terminal(lane, job, timeout=300)
    assert done["state"] == "TIME_EXCEEDED", done
    assert "TIMEOUT" in (done["failure_reason"] or "")


def test_dependencies_gate_lane_jobs(lane: Vq) -> None:
    first = lane.submit("cluster", "--", "true")
    second = lane.submit("cluster", "--after", first, "--", "true")
    broken = lane.submit("--", "false")  # a local job
    doomed = lane.submit("cluster", "--after", broken, "--", "true")
    assert _terminal(lane, doomed)["state"] == "FAILED"
    assert "dependency" in (lane.spec(doomed)["failure_reason"] or "")
    assert lane.spec(doomed)["scheduler_job_id"] is None  # never submitted
    done = _terminal(lane, second)
    assert done["state"] == "COMPLETED"
    assert done["started_at"] >= lane.spec(first)["finished_at"]


def test_unreachable_login_host_keeps_the_job_and_marks_the_host(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811 - the fixture
) -> None:
    options = ["-F", str(slurm_testbed.ssh_config), "-o", "Port=1"]  # nothing listens
    _configure(vq, slurm_testbed, scratch, ssh_options=options)
    vq.start_daemon()
    job = vq.submit("cluster", "--", "true")
    wait_until(lambda: vq.spec(job).get("scheduler_state") == "stage_retry", 60)
    health = vq.root / "hosts" / "cluster.json"
    wait_until(health.exists, 10)
    assert json.loads(health.read_text())["status"] == "unreachable"
    spec = vq.spec(job)
    assert spec["state"] == "RUNNING" and spec["scheduler_job_id"] is None
    assert spec["failure_reason"] is None
    lanes = json.loads(vq.run("web", "fleet-snapshot", "--json").stdout)["lanes"]
    assert [(lane["name"], lane["status"], lane["tracked"]) for lane in lanes] == [
        ("cluster", "unreachable", 1)
    ]
    assert lanes[0]["last_error"] and lanes[0]["last_ok_at"] is None


def test_the_lane_shows_under_its_driver_in_the_fleet_snapshot(lane: Vq) -> None:
    """`vq web fleet-snapshot --json` (what the fleet console reads from a host in its one
    SSH call) lists the lane this queue drives, and the console's host view carries it."""
    job = lane.submit("cluster", "--", "sleep", "60")

    def snapshot() -> dict[str, Any]:
        return dict(json.loads(lane.run("web", "fleet-snapshot", "--json").stdout))

    wait_until(lambda: snapshot()["lanes"][0]["running"] == 1, 60)
    seen = snapshot()
    (cluster,) = seen["lanes"]
    assert (cluster["name"], cluster["kind"], cluster["tracked"]) == ("cluster", "slurm", 1)
    assert cluster["queued"] == 0 and cluster["status"] == "ok" and cluster["last_ok_at"]
    assert cluster["warnings"] == []  # the lane has sacct accounting
    rows = {row["id"]: row for row in seen["running"]}
    assert rows[job]["scheduler_target"] == "cluster"
    view = FleetSource(lambda: _LocalFleet(lane)).host("here")
    assert [entry["name"] for entry in view.as_dict()["lanes"]] == ["cluster"]
    assert {row["id"]: row["lane"] for row in view.running}[job] == "cluster"
    lane.run("kill", job)
    wait_until(lambda: snapshot()["lanes"][0]["tracked"] == 0, 60)


class _LocalHost:
    """This queue read as a fleet host: the same verb, run here instead of over SSH."""

    def __init__(self, vq: Vq) -> None:
        self.vq = vq

    def run_json(self, words: list[str], answer: Any = None) -> Any:
        return json.loads(self.vq.run(*words).stdout)


class _LocalFleet(Fleet):
    def __init__(self, vq: Vq) -> None:
        super().__init__({"here": HostSettings(ssh="localhost")}, None, vq.root)
        self.local = _LocalHost(vq)

    def host(self, name: str) -> Any:
        super().host(name)
        return self.local
