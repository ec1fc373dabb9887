"""The local queue core end to end: real daemon (on a thread), real CLI, real jobs."""

from __future__ import annotations

import json
import os
import tarfile
import time
from pathlib import Path

import pytest

from tests.conftest import Vq, processes_with_env, wait_until


def test_submit_runs_and_reports_everything(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit(
        "--cpus",
        "2",
        "--mem-mb",
        "500",
        "--wall-time",
        "10m",
        "--job-name",
        "answer",
        "--tag",
        "demo",
        "--",
        "python3",
        "-c",
        "print(6 * 7)",
    )
    assert vq.run("wait", job).returncode == 0
    view = vq.status(job)
    assert view["state"] == "COMPLETED"
    assert view["exit_code"] == 0
    assert view["cpus"] == 2 and view["mem_mb"] == 500 and view["wall_time_seconds"] == 600
    assert view["job_name"] == "answer" and view["tags"] == ["demo"]
    assert view["started_at"] and view["finished_at"] and view["elapsed_seconds"] >= 0
    assert vq.run("logs", job).stdout == "42\n"
    workspace = Path(view["workspace"])
    usage = json.loads((workspace / "_vq" / "resource-usage.json").read_text())
    assert usage["exit_code"] == 0 and usage["status"] == "ok"
    assert (workspace / "_vq" / "exit-code").read_text() == "0\n"
    # Events are appended just after the spec writes they describe: poll briefly.
    expected = ["submitted", "state_transition", "dispatched", "state_transition"]
    wait_until(lambda: [e["kind"] for e in vq.json("events", job)] == expected, timeout=5)
    lines = (workspace / "_vq" / "events.jsonl").read_text().splitlines()
    on_disk = [json.loads(line) for line in lines]
    moves = [(e["from"], e["to"]) for e in on_disk if e["kind"] == "state_transition"]
    assert moves == [("pending", "running"), ("running", "completed")]  # §6.1 spelling
    rows = vq.json("list")["jobs"]
    assert [r["id"] for r in rows] == [job]
    assert vq.json("list", "--state", "failed")["jobs"] == []
    assert [r["id"] for r in vq.json("list", "--tag", "demo", "--name", "ans")["jobs"]] == [job]


def test_job_environment_and_workspace(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit(
        "--cpus",
        "2",
        "--mem-mb",
        "64",
        "--",
        "sh",
        "-c",
        'echo "$VQ_JOB_ID $VQ_CPUS $VQ_MEM_MB"; pwd; test -d "$VQ_WORKDIR" && echo workdir-ok',
    )
    vq.run("wait", job)
    out = vq.run("logs", job).stdout.splitlines()
    assert out[0] == f"{job} 2 64"
    assert out[1] == str(vq.root / "jobs" / job)
    assert out[2] == "workdir-ok"
    assert vq.spec(job)["workdir"] == str(vq.root / "workdirs" / job)


def test_failing_job_records_code_reason_and_tail(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sh", "-c", "echo line1 >&2; echo 'fatal: no basis' >&2; exit 3")
    waited = vq.run("wait", job, check=False)
    assert waited.returncode == 3
    assert "FAILED" in waited.stderr
    view = vq.status(job)
    assert view["state"] == "FAILED"
    assert view["exit_code"] == 3
    assert view["failure_reason"] == "exited with code 3"
    assert view["failure_tail"] == "line1\nfatal: no basis"
    human = vq.run("status", job).stdout
    assert "fatal: no basis" in human


def test_kill_pending_and_running(vq: Vq) -> None:
    vq.start_daemon("--max-jobs", "1")
    running = vq.submit("--", "sleep", "60")
    pending = vq.submit("--", "true")
    vq.wait_state(running, "RUNNING")
    assert vq.state(pending) == "PENDING"
    out = vq.run("kill", pending).stdout
    assert "PENDING → KILLED" in out
    assert vq.state(pending) == "KILLED"
    pgid = wait_until(lambda: vq.spec(running)["pgid"])
    vq.run("kill", running)
    assert vq.state(running) == "KILLED"
    wait_until(lambda: not os.path.exists(f"/proc/{pgid}") or _group_gone(pgid), timeout=15)
    again = vq.run("kill", running)
    assert "already KILLED" in again.stdout
    assert vq.run("wait", running, check=False).returncode != 0


def _group_gone(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return False
    return True


def test_term_ignoring_job_gets_sigkill_after_grace_and_holds_budget(vq: Vq) -> None:
    vq.start_daemon("--max-jobs", "1")
    stubborn = vq.submit("--", "sh", "-c", "trap '' TERM; sleep 300")
    vq.wait_state(stubborn, "RUNNING")
    pgid = wait_until(lambda: vq.spec(stubborn)["pgid"])
    follower = vq.submit("--", "true")
    killed_at = time.monotonic()
    vq.run("kill", stubborn)
    assert vq.state(stubborn) == "KILLED"
    # The group ignores SIGTERM: for the whole grace the job keeps its slot.
    while time.monotonic() - killed_at < 7:
        assert vq.state(follower) == "PENDING"
        assert not _group_gone(pgid)
        time.sleep(0.2)
    vq.wait_state(follower, "COMPLETED", timeout=20)
    started = time.monotonic()
    assert started - killed_at >= 9.5
    assert _group_gone(pgid)
    assert vq.state(stubborn) == "KILLED"


def test_over_capacity_job_stays_pending_while_smaller_ones_run(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "2", "--max-mem-mb", "1000")
    big = vq.run("submit", "--cpus", "4", "--", "true")
    assert "exceeds the configured cap" in big.stderr
    big_id = big.stdout.strip()
    small = vq.submit("--cpus", "1", "--", "true")
    vq.run("wait", small)
    assert vq.state(big_id) == "PENDING"
    view = vq.status(big_id)
    assert view["pending_over_capacity"] is True
    assert view["configured_capacity_overages"] == [
        {"resource": "cpus", "requested": 4, "capacity": 2}
    ]
    assert "over configured capacity" in view["pending_reason"]
    assert view["queue_eta"]["eta_seconds"] is None
    assert view["queue_eta"]["basis"] == "over configured capacity"
    row = next(r for r in vq.json("list")["jobs"] if r["id"] == big_id)
    assert row["pending_over_capacity"] is True
    assert "over cap" in vq.run("list").stdout
    payload = json.loads(vq.run("submit", "--json", "--mem-mb", "5000", "--", "true").stdout)
    assert payload["capacity_warnings"] and payload["state"] == "PENDING"


def test_skip_lets_smaller_later_job_start(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "2")
    first = vq.submit("--cpus", "1", "--wall-time", "60s", "--", "sleep", "30")
    vq.wait_state(first, "RUNNING")
    blocked = vq.submit("--cpus", "2", "--", "true")
    small = vq.submit("--cpus", "1", "--", "true")
    vq.wait_state(small, "COMPLETED")
    assert vq.state(blocked) == "PENDING"
    blocked_view = vq.status(blocked)
    assert "waiting for CPUs" in blocked_view["pending_reason"]
    # It waits for `first` to end, at the latest when its declared wall time is up.
    assert blocked_view["queue_eta"]["basis"] == "declared wall time"
    assert 0 < blocked_view["queue_eta"]["eta_seconds"] <= 60
    assert "queue ETA" in vq.run("status", blocked).stdout
    vq.run("kill", first)
    vq.wait_state(blocked, "COMPLETED")


def test_priority_orders_dispatch(vq: Vq, tmp_path: Path) -> None:
    ledger = tmp_path / "order.txt"
    ids = [
        vq.submit("--priority", str(prio), "--", "sh", "-c", f"echo {name} >> {ledger}")
        for name, prio in (("low", -5), ("mid", 0), ("high", 5), ("mid2", 0))
    ]
    vq.start_daemon("--max-jobs", "1")
    vq.run("wait", *ids)
    assert ledger.read_text().split() == ["high", "mid", "mid2", "low"]


def test_submit_without_daemon_then_start(vq: Vq) -> None:
    job = vq.submit("--", "echo", "queued while stopped")
    assert vq.state(job) == "PENDING"
    assert vq.json("list")["jobs"][0]["state"] == "PENDING"
    vq.start_daemon()
    vq.run("wait", job, "--timeout", "30s")
    assert vq.run("logs", job).stdout == "queued while stopped\n"


def test_stop_keeps_running_job_and_restart_reattaches(vq: Vq, tmp_path: Path) -> None:
    flag = tmp_path / "go"
    vq.start_daemon()
    job = vq.submit("--", "sh", "-c", f"while [ ! -e {flag} ]; do sleep 0.05; done; echo done")
    vq.wait_state(job, "RUNNING")
    vq.stop_daemon()
    assert vq.state(job) == "RUNNING"
    vq.start_daemon()
    assert vq.state(job) == "RUNNING"
    flag.touch()
    vq.wait_state(job, "COMPLETED")
    assert vq.run("logs", job).stdout == "done\n"


def test_logs_follow_until_end_and_tail(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit(
        "--", "sh", "-c", "for i in 1 2 3 4 5; do echo $i; sleep 0.2; done; echo err >&2"
    )
    followed = vq.run("logs", job, "-f", timeout=30)
    assert followed.stdout.split() == ["1", "2", "3", "4", "5"]
    assert vq.state(job) == "COMPLETED"
    assert vq.run("logs", job, "--tail", "2").stdout == "4\n5\n"
    assert vq.run("logs", job, "--stderr").stdout == "err\n"


def test_archive_source_materializes_workspace(vq: Vq, tmp_path: Path) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "run.sh").write_text("cat data.txt\n")
    (inputs / "data.txt").write_text("payload\n")
    archive = tmp_path / "inputs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(inputs / "run.sh", "run.sh")
        tar.add(inputs / "data.txt", "data.txt")
    vq.start_daemon()
    for source in (archive, inputs):
        job = vq.submit(str(source), "--", "sh", "run.sh")
        vq.run("wait", job)
        assert vq.run("logs", job).stdout == "payload\n"
        assert vq.spec(job)["workspace_source"] == str(source)


@pytest.mark.parametrize("daemon_up", [True, False])
def test_hostile_archive_refused_and_nothing_written(
    vq: Vq, tmp_path: Path, daemon_up: bool
) -> None:
    archive = tmp_path / "evil.tar"
    payload = tmp_path / "x"
    payload.write_text("x")
    with tarfile.open(archive, "w") as tar:
        tar.add(payload, "../../escaped")
    if daemon_up:
        vq.start_daemon()
    result = vq.run("submit", str(archive), "--", "true", check=False)
    assert result.returncode == 4
    assert result.stderr.startswith("vq: error:") and "hint:" in result.stderr
    assert "Traceback" not in result.stderr
    assert list((vq.root / "queue").glob("*.json")) == []
    assert [p.name for p in (vq.root / "jobs").iterdir()] == []


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (("status", "0123456789ab"), 3, "no job 0123456789ab"),
        (("status", "nope"), 4, "is not a job id"),
        (("submit", "--wall-time", "2x", "--", "true"), 4, "invalid duration"),
        (("submit", "/does/not/exist", "--", "true"), 3, "does not exist"),
        (("submit",), 2, "no command given"),
        (("submit", "--cpus", "0", "--", "true"), 2, "--cpus"),
        (("submit", "--bogus", "--", "true"), 2, "No such option"),
        (("wait", "0123456789ab"), 3, "no job"),
    ],
)
def test_user_mistakes_get_one_clear_error(
    vq: Vq, args: tuple[str, ...], code: int, text: str
) -> None:
    result = vq.run(*args, check=False)
    assert result.returncode == code, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("vq: error:") and text in lines[0]
    assert lines[1].startswith("hint:")
    assert "Traceback" not in result.stderr
    assert not list((vq.root / "queue").glob("*.json")) if (vq.root / "queue").exists() else True


def test_corrupt_and_newer_specs_are_reported_not_fatal(vq: Vq) -> None:
    good = vq.submit("--", "true")
    queue = vq.root / "queue"
    (queue / "aaaaaaaaaaaa.json").write_bytes(b'{"spec_version": 2, "id": "aaaa')
    newer = json.loads((queue / f"{good}.json").read_text())
    newer.update(id="bbbbbbbbbbbb", spec_version=99)
    (queue / "bbbbbbbbbbbb.json").write_text(json.dumps(newer))
    before = {p.name: p.read_bytes() for p in queue.glob("*.json")}
    vq.start_daemon()
    vq.run("wait", good, "--timeout", "30s")
    listing = vq.json("list")
    assert [j["id"] for j in listing["jobs"]] == [good]
    reasons = {q["name"]: q["reason"] for q in listing["quarantined"]}
    assert "not valid JSON" in reasons["aaaaaaaaaaaa"]
    assert "spec_version 99" in reasons["bbbbbbbbbbbb"]
    assert "unreadable spec" in vq.run("list").stdout
    newer_status = vq.run("status", "bbbbbbbbbbbb", check=False)
    assert newer_status.returncode == 7 and "upgrade vq" in newer_status.stderr
    # Reported, never rewritten or deleted; the daemon is still serving.
    after = {p.name: p.read_bytes() for p in queue.glob("*.json") if p.name != f"{good}.json"}
    assert after == {k: v for k, v in before.items() if k != f"{good}.json"}
    assert vq.json("daemon", "status")["running"] is True


@pytest.mark.parametrize("rounds", [12, pytest.param(60, marks=pytest.mark.slow)])
def test_kill_never_loses_against_completion(vq: Vq, rounds: int) -> None:
    """`vq kill` races the daemon's own completion write; KILLED is never lost."""
    vq.start_daemon()
    outcomes = {"killed": 0, "completed_first": 0}
    for i in range(rounds):
        # Runs of 0 to 0.45 s: the short ones end around the time a `vq kill` (a CLI
        # start, ~0.1 s) lands, so both orders happen. Every fourth job outlives any kill,
        # however loaded the machine (a kill took 0.8 s at load 11), so KILLED is seen too.
        pause = "30" if i % 4 == 3 else f"0.{i % 10 // 2}{5 * (i % 2)}"
        job = vq.submit("--", "sh", "-c", f"sleep {pause}")
        if i % 3:
            vq.wait_state(job, "RUNNING", "COMPLETED")
        result = vq.run("kill", job, "--json", check=False)
        final = vq.wait_state(job, "KILLED", "COMPLETED")
        if result.returncode == 0:
            assert json.loads(result.stdout)[0]["state"] == "KILLED"
            assert final == "KILLED", f"job {job}: kill acknowledged but state is {final}"
            outcomes["killed"] += 1
        else:
            assert result.returncode == 6 and "already ended as COMPLETED" in result.stderr
            assert final == "COMPLETED"
            outcomes["completed_first"] += 1
        # The state stays put after the collector is reaped.
        time.sleep(0.05)
        assert vq.state(job) == final
    assert outcomes["killed"] > 0


def test_kill_without_daemon_escalates_itself(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "120")
    vq.wait_state(job, "RUNNING")
    wait_until(lambda: vq.spec(job)["pgid"])
    vq.stop_daemon()
    result = vq.run("kill", job)
    assert "RUNNING → KILLED" in result.stdout
    assert vq.state(job) == "KILLED"
    wait_until(lambda: not processes_with_env(f"VQ_JOB_ID={job}"), timeout=15)


def test_submit_auto_resume_sets_recover_on_reboot(vq: Vq) -> None:
    marked = vq.submit("--auto-resume", "--not-before", "1h", "--", "true")
    plain = vq.submit("--not-before", "1h", "--", "true")
    assert vq.spec(marked)["recover_on_reboot"] is True
    assert vq.spec(plain)["recover_on_reboot"] is False
    vq.run("kill", marked)
    clone = vq.run("resubmit", marked).stdout.strip()  # the policy is kept
    assert vq.spec(clone)["recover_on_reboot"] is True
    slow = vq.run("submit", "--auto-resume", "--cpus", "1", "--json", "--", "true")
    assert json.loads(slow.stdout)["recover_on_reboot"] is True
