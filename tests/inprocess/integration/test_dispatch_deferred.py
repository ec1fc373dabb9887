"""Jobs deferred with ``--not-before`` wait outside the dispatch order and start once due,
while jobs behind them in the queue run at once (the dispatch pass never walks them)."""

from __future__ import annotations

from datetime import datetime

from tests.conftest import Vq


def test_a_deferred_job_starts_once_due_and_never_blocks_the_queue(vq: Vq) -> None:
    vq.start_daemon("--max-jobs", "2")
    later = [vq.submit("--not-before", "3s", "--", "true") for _ in range(3)]
    far = vq.submit("--not-before", "1h", "--", "true")
    now_jobs = [vq.submit("--", "true") for _ in range(4)]
    for job in now_jobs:
        vq.wait_state(job, "COMPLETED", timeout=30)
    for job in later:
        vq.wait_state(job, "COMPLETED", timeout=30)
        spec = vq.spec(job)
        started = datetime.fromisoformat(spec["started_at"])
        assert started >= datetime.fromisoformat(spec["not_before"]), spec
    assert vq.spec(far)["state"] == "PENDING"
