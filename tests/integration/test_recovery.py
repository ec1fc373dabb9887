"""Restart recovery (§4.7) from checked-in crashed state trees and from real kill -9s."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import Vq, processes_with_env, wait_until
from vq._proc_stat import is_alive
from vq.domain.summary import JobSummary
from vq.paths import StatePaths
from vq.store.specs import SpecStore
from vq.store.summaries import save_summaries

TERMINAL = (
    "COMPLETED",
    "FAILED",
    "KILLED",
    "OOM_KILLED",
    "STARVED",
    "TIME_EXCEEDED",
    "ABORTED_BY_QUEUE",
)
FIXTURE = Path(__file__).parent.parent / "fixtures" / "crashed"


def _install_fixture(vq: Vq, recover_on_reboot: tuple[str, ...] = ()) -> None:
    """The crashed tree; the specs named in ``recover_on_reboot`` carry that flag."""
    vq.root.mkdir(parents=True)
    shutil.copytree(FIXTURE / "queue", vq.root / "queue")
    shutil.copytree(FIXTURE / "jobs", vq.root / "jobs")
    # git keeps no empty directories: give every job its workspace as a crash leaves it.
    for spec in (vq.root / "queue").glob("*.json"):
        (vq.root / "jobs" / spec.stem / "_vq").mkdir(parents=True, exist_ok=True)
    for job_id in recover_on_reboot:
        path = vq.root / "queue" / f"{job_id}.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "recover_on_reboot": True}))


#: Marked for auto-resume: a lost RUNNING job (3), a lost SUSPENDED one (4) and one that
#: entered already terminal (6). The lost RUNNING job 7 is not marked.
MARKED = ("a00000000003", "a00000000004", "a00000000006")


@pytest.mark.parametrize("mode", ["none", "daemon-flag", "per-job"])
def test_recovery_of_a_crashed_state_tree(vq: Vq, mode: str) -> None:
    _install_fixture(vq, MARKED if mode == "per-job" else ())
    corrupt_before = (vq.root / "queue" / "a00000000009.json").read_bytes()
    # The daemon flag is only the default of later submits: it resumes nothing here.
    vq.start_daemon(*(["--auto-resume"] if mode == "daemon-flag" else []))
    assert vq.state("a00000000001") == "COMPLETED"
    failed = vq.spec("a00000000002")
    assert failed["state"] == "FAILED" and failed["exit_code"] == 3
    assert failed["failure_tail"] == "step 1 ok\nsegfault in scf loop"
    for lost in ("a00000000003", "a00000000004", "a00000000007"):
        spec = vq.spec(lost)
        assert spec["state"] == "ABORTED_BY_QUEUE", lost
        assert "outcome is unknown" in spec["failure_reason"]
    vq.wait_state("a00000000005", "COMPLETED")
    assert vq.state("a00000000006") == "COMPLETED"
    retried = vq.spec("a00000000008")
    assert retried["state"] == "PENDING" and retried["retry_count"] == 1
    assert retried["not_before"] is not None
    assert (vq.root / "queue" / "a00000000009.json").read_bytes() == corrupt_before
    listing = vq.json("list")
    assert [q["name"] for q in listing["quarantined"]] == ["a00000000009"]
    siblings = {j["id"]: j for j in listing["jobs"] if not j["id"].startswith("a0000000000")}
    if mode != "per-job":
        assert siblings == {}
        return
    parents = {vq.spec(job_id)["parent_jobid"]: job_id for job_id in siblings}
    assert set(parents) == {"a00000000003"}  # marked and entered RUNNING: only it
    assert vq.spec(parents["a00000000003"])["recover_on_reboot"] is True
    for parent, child in parents.items():
        final = vq.wait_state(child, *TERMINAL, timeout=60)
        assert final == "COMPLETED", (vq.spec(child), (vq.root / "daemon.log").read_text()[-3000:])
        assert vq.spec(child)["cwd"] == str(vq.root / "jobs" / parent)
        assert vq.run("logs", child).stdout == "restarted-run\n"


def _kill_daemon(vq: Vq) -> None:
    pid = vq.daemon_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not is_alive(pid), timeout=15)


def test_kill_9_daemon_reattaches_finishes_and_aborts(vq: Vq, tmp_path: Path) -> None:
    hold_survivor, hold_finisher = tmp_path / "survivor-go", tmp_path / "finisher-go"
    vq.start_daemon("--auto-resume", "--max-cpus", "8")  # the default of these submits
    survivor = vq.submit(
        "--", "sh", "-c", f"while [ ! -e {hold_survivor} ]; do sleep 0.05; done; echo ok"
    )
    finisher = vq.submit(
        "--", "sh", "-c", f"while [ ! -e {hold_finisher} ]; do sleep 0.05; done; exit 4"
    )
    doomed = vq.submit("--", "sleep", "300")
    for job in (survivor, finisher, doomed):
        wait_until(lambda job=job: vq.spec(job)["pgid"])
    survivor_pgid = vq.spec(survivor)["pgid"]
    _kill_daemon(vq)
    # While no daemon runs: the finisher ends and its collector records exit 4; the
    # doomed job's whole group (collector included) is killed, so no marker can exist.
    os.killpg(vq.spec(doomed)["pgid"], signal.SIGKILL)
    hold_finisher.touch()
    wait_until(lambda: (vq.root / "jobs" / finisher / "_vq" / "exit-code").exists(), timeout=10)
    assert vq.state(survivor) == vq.state(finisher) == vq.state(doomed) == "RUNNING"
    vq.start_daemon("--auto-resume", "--max-cpus", "8")
    assert vq.state(finisher) == "FAILED" and vq.spec(finisher)["exit_code"] == 4
    assert vq.state(doomed) == "ABORTED_BY_QUEUE"
    others = [j["id"] for j in vq.json("list")["jobs"]]
    siblings = [j for j in others if j not in (survivor, finisher, doomed)]
    assert len(siblings) == 1 and vq.spec(siblings[0])["parent_jobid"] == doomed
    assert vq.spec(doomed)["recover_on_reboot"] is True  # the daemon's default
    vq.run("kill", siblings[0])
    # The survivor was reattached: still RUNNING, still its own group, and killable.
    assert vq.state(survivor) == "RUNNING"
    assert vq.spec(survivor)["pgid"] == survivor_pgid
    assert processes_with_env(f"VQ_JOB_ID={survivor}")
    vq.run("kill", survivor)
    wait_until(lambda: not processes_with_env(f"VQ_JOB_ID={survivor}"), timeout=20)
    assert vq.state(survivor) == "KILLED"


def test_reattached_job_completes_and_can_be_waited_on(vq: Vq, tmp_path: Path) -> None:
    go = tmp_path / "go"
    vq.start_daemon()
    job = vq.submit(
        "--wall-time", "1h", "--", "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"
    )
    wait_until(lambda: vq.spec(job)["pgid"])
    _kill_daemon(vq)
    vq.start_daemon()
    vq.run("pause", job)
    assert vq.state(job) == "SUSPENDED"
    vq.run("resume", job)
    go.touch()
    started = time.monotonic()
    assert vq.run("wait", job, "--timeout", "30s").returncode == 0
    assert time.monotonic() - started < 30
    assert vq.state(job) == "COMPLETED"


def test_restart_reaps_a_killed_job_whose_pid_was_never_recorded(vq: Vq) -> None:
    """Killed between its claim and its pid record, then the daemon crashed: the command
    still runs, the spec is KILLED without a pgid; recovery finds it by VQ_JOB_ID."""
    vq.start_daemon()
    job = vq.submit("--", "sleep", "300")
    # The pgid is recorded when the collector leads its group, a moment before it spawns
    # the command: wait for the command itself.
    wait_until(lambda: vq.spec(job)["pgid"] and processes_with_env(f"VQ_JOB_ID={job}"))
    _kill_daemon(vq)
    spec_path = vq.root / "queue" / f"{job}.json"
    data = json.loads(spec_path.read_text())
    data.update(state="KILLED", pid=None, pgid=None, pid_start_time=None)
    spec_path.write_text(json.dumps(data))
    assert processes_with_env(f"VQ_JOB_ID={job}")
    vq.start_daemon()
    wait_until(lambda: not processes_with_env(f"VQ_JOB_ID={job}"), timeout=15)
    assert vq.state(job) == "KILLED"
    assert ", 1 leaked groups reaped" in (vq.root / "daemon.log").read_text()


def test_restart_reattaches_a_job_whose_pid_was_not_recorded_yet(vq: Vq, tmp_path: Path) -> None:
    """Crash between the claim and the pid record: the collector's own collector.pid
    lets recovery reattach the running job instead of aborting it."""
    go = tmp_path / "go"
    vq.start_daemon()
    job = vq.submit("--", "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; echo ok")
    wait_until(lambda: vq.spec(job)["pgid"])
    _kill_daemon(vq)
    spec_path = vq.root / "queue" / f"{job}.json"
    data = json.loads(spec_path.read_text())
    data.update(pid=None, pgid=None, pid_start_time=None)
    spec_path.write_text(json.dumps(data))
    vq.start_daemon()
    assert vq.state(job) == "RUNNING"
    assert vq.spec(job)["pgid"] is not None
    go.touch()
    vq.wait_state(job, "COMPLETED")
    assert vq.run("logs", job).stdout == "ok\n"


def test_pause_before_a_restart_does_not_stretch_wall_time(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--wall-time", "2s", "--", "sleep", "60")
    wait_until(lambda: vq.spec(job)["pgid"])
    vq.run("pause", job)
    time.sleep(3.0)  # a long pause, then a crash while paused
    _kill_daemon(vq)
    vq.start_daemon()
    assert vq.state(job) == "SUSPENDED"
    resumed = time.monotonic()
    vq.run("resume", job)
    vq.wait_state(job, "TIME_EXCEEDED", timeout=20)
    # At most the 2 s limit (plus the loop tick) after the resume — not 2 s + the pause.
    assert time.monotonic() - resumed < 4.0


def test_a_restart_takes_finished_jobs_from_the_terminal_index_unless_their_spec_changed(
    vq: Vq,
) -> None:
    vq.start_daemon()
    kept, rewritten = vq.submit("--", "true"), vq.submit("--", "true")
    vq.wait_state(kept, "COMPLETED")
    vq.wait_state(rewritten, "COMPLETED")
    vq.stop_daemon()
    header, *entries = (vq.root / "terminal-index.jsonl").read_text().splitlines()
    at = json.loads(header)["fields"].index("id") + 3  # after the file signature
    assert sorted(json.loads(entry)[at] for entry in entries) == sorted([kept, rewritten])
    # Another writer changes one finished spec while no daemon runs: the spec wins.
    path = vq.root / "queue" / f"{rewritten}.json"
    spec = json.loads(path.read_text())
    path.write_text(json.dumps({**spec, "state": "FAILED", "exit_code": 9}))
    vq.start_daemon()
    rows = {row["id"]: row for row in vq.json("list")["jobs"]}
    assert rows[kept]["state"] == "COMPLETED"
    assert (rows[rewritten]["state"], rows[rewritten]["exit_code"]) == ("FAILED", 9)
    assert vq.status(kept)["cwd"] == vq.spec(kept)["cwd"]  # the whole spec, read on demand
    log = (vq.root / "daemon.log").read_text()
    assert "index loaded: 1 finished jobs from the terminal index, 1 specs parsed" in log


def test_a_finished_job_whose_group_survives_is_reaped_even_from_the_terminal_index(
    vq: Vq,
) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "300")
    wait_until(lambda: vq.spec(job)["pgid"] and processes_with_env(f"VQ_JOB_ID={job}"))
    spec = vq.spec(job)
    _kill_daemon(vq)
    # A crash left the spec terminal while its group lives on, and the terminal index
    # holds that very file's summary (so the start does not parse it for its state).
    path = vq.root / "queue" / f"{job}.json"
    path.write_text(json.dumps({**spec, "state": "KILLED", "finished_at": spec["started_at"]}))
    store = SpecStore(StatePaths(vq.root))
    signature = store.signature(job)
    assert signature is not None
    save_summaries(store.paths.terminal_index, [(signature, JobSummary.of(store.read(job)))])
    assert processes_with_env(f"VQ_JOB_ID={job}")
    vq.start_daemon()
    wait_until(lambda: not processes_with_env(f"VQ_JOB_ID={job}"), timeout=20)
    assert vq.state(job) == "KILLED"
    assert ", 1 leaked groups reaped" in (vq.root / "daemon.log").read_text()
