"""The job page's estimated start names what it rests on, or why it is unknown."""

from __future__ import annotations

from tests.conftest import Vq
from tests.web.conftest import Web


def test_estimated_start_behind_a_long_job(vq: Vq, web: Web) -> None:
    vq.start_daemon("--max-jobs", "1")
    sleeper = vq.submit("--wall-time", "10m", "--", "sleep", "600")
    vq.wait_state(sleeper, "RUNNING")
    job = vq.submit("--", "true")
    html = web.http.get(f"/jobs/{job}").text
    assert "Estimated start" in html and "(0 ahead, from declared wall time)" in html
    api = web.http.get(f"/api/v1/jobs/{job}", headers=web.admin()).json()
    assert api["queue_eta"]["basis"] == "declared wall time"
    assert api["queue_eta"]["eta_seconds"] > 500
    vq.run("pause", sleeper)
    html = web.http.get(f"/jobs/{job}").text
    assert f"unknown: running job {sleeper} is paused" in html
    assert "unknown: unknown" not in html
    vq.run("kill", sleeper, job)
