"""The never-started proof (docs/architecture.md): a daemon killed between the claim and
the launch leaves a RUNNING spec whose command never ran; the next start returns it to
PENDING (it runs exactly once), never ABORTED_BY_QUEUE. Real daemon, real kill -9s at the
``VQ_TEST_FAULT`` points."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.conftest import Vq, wait_until
from vq.executors import _collector
from vq.executors.launch import COLLECTOR_NOT_STARTED


def _events(vq: Vq, job_id: str) -> list[dict[str, object]]:
    path = vq.root / "jobs" / job_id / "_vq" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        return True


def _start_with_fault(vq: Vq, fault: str) -> int:
    vq.run("daemon", "start")  # started clean, then restarted with the fault armed
    vq.stop_daemon()
    armed = Vq(vq.root, {**vq.env, "VQ_TEST_FAULT": fault})
    armed.start_daemon()
    pid = vq.daemon_pid()
    assert pid is not None
    return pid


def _submit_counting(vq: Vq, tmp_path: Path) -> tuple[str, Path]:
    count = tmp_path / "ran.txt"
    job = vq.submit("--", "sh", "-c", f"echo ran >> {count}")
    return job, count


def test_a_daemon_killed_after_the_claim_requeues_the_job_and_it_runs_once(
    vq: Vq, tmp_path: Path
) -> None:
    pid = _start_with_fault(vq, "dispatch_after_claim")
    job, count = _submit_counting(vq, tmp_path)
    wait_until(lambda: _dead(pid))
    spec = vq.spec(job)
    assert spec["state"] == "RUNNING" and spec["pid"] is None and spec["launch_attempt"]
    meta = vq.root / "jobs" / job / "_vq"
    assert not (meta / f"started.{spec['launch_attempt']}").exists()
    vq.start_daemon()
    vq.wait_state(job, "COMPLETED")
    assert count.read_text() == "ran\n"  # exactly once
    moves = [(e.get("from"), e.get("to"), e.get("reason")) for e in _events(vq, job)]
    requeued = [m for m in moves if m[:2] == ("running", "pending")]
    assert len(requeued) == 1 and "never started" in str(requeued[0][2])
    assert ("running", "aborted_by_queue") not in [m[:2] for m in moves]
    assert (meta / f"started.{spec['launch_attempt']}").read_bytes() == b"fenced\n"


def test_a_daemon_killed_after_sending_the_launch_never_loses_or_doubles_the_job(
    vq: Vq, tmp_path: Path
) -> None:
    pid = _start_with_fault(vq, "dispatch_after_send")
    job, count = _submit_counting(vq, tmp_path)
    wait_until(lambda: _dead(pid))
    vq.start_daemon()
    # Either the collector started it (reattached or finished from its marker) or it
    # never started (requeued): both end COMPLETED with one run.
    vq.wait_state(job, "COMPLETED")
    assert count.read_text() == "ran\n"


def test_a_collector_killed_before_its_start_record_requeues_under_a_running_daemon(
    vq: Vq, tmp_path: Path
) -> None:
    pid = _start_with_fault(vq, "collector_before_start_record")
    job, count = _submit_counting(vq, tmp_path)

    def requeued() -> bool:
        return any(
            e.get("from") == "running" and e.get("to") == "pending" for e in _events(vq, job)
        )

    wait_until(requeued)
    spec = vq.spec(job)
    assert spec["state"] in ("PENDING", "RUNNING") and not count.exists()
    assert "collector was killed before the command started" in json.dumps(_events(vq, job))
    os.kill(pid, signal.SIGKILL)  # the armed daemon would kill every launch
    wait_until(lambda: _dead(pid))
    vq.start_daemon()
    vq.wait_state(job, "COMPLETED", timeout=60)
    assert count.read_text() == "ran\n"


def test_the_collector_and_the_executor_agree_on_the_not_started_status() -> None:
    assert _collector.NOT_STARTED == COLLECTOR_NOT_STARTED
