"""The queue ETA behind a long job with a declared wall time (not "about 0.8s")."""

from __future__ import annotations

import re

from tests.conftest import Vq, wait_until


def test_eta_behind_a_long_job_counts_its_wall_time(vq: Vq) -> None:
    vq.start_daemon("--max-jobs", "1")
    vq.run("wait", vq.submit("--", "true"))  # history: one sub-second run
    sleeper = vq.submit("--wall-time", "10m", "--", "sleep", "600")
    vq.wait_state(sleeper, "RUNNING")
    job = vq.submit("--", "true")
    eta = vq.status(job)["queue_eta"]
    assert eta["basis"] == "declared wall time"
    assert 500 < eta["eta_seconds"] <= 600
    assert re.search(r"queue ETA\s+about 9m", vq.run("status", job).stdout)
    unknown = vq.submit("--", "sleep", "600")  # behind both; no wall time of its own
    assert vq.status(unknown)["queue_eta"]["eta_seconds"] > 500
    vq.run("kill", sleeper)
    vq.wait_state(unknown, "RUNNING")
    last = vq.submit("--", "true")
    # Once `unknown` has run longer than every finished run, nothing says when it ends.
    eta = wait_until(
        lambda: (e := vq.status(last)["queue_eta"])["eta_seconds"] is None and e, timeout=30
    )
    assert eta["basis"] == (
        f"unknown: running job {unknown} declares no wall time and has run longer than "
        "any of the last 3 finished jobs"
    )
    assert re.search(r"queue ETA\s+unknown \(running job", vq.run("status", last).stdout)
    vq.run("kill", unknown, last)
