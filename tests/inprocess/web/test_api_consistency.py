"""/api/v1 consistency: one "no job X" answer with an API hint; cleanup of any age.

Real daemon (on a thread), real `vq` submissions, the app in-process.
"""

from __future__ import annotations

import re

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web

GHOST = "0123456789ab"
API_HINT = "GET /api/v1/jobs lists the jobs"


def test_every_not_found_says_no_job_with_an_api_hint(vq: Vq, web: Web) -> None:
    job = vq.submit("--", "true")
    admin = web.admin()
    for method, path in (
        ("GET", f"/api/v1/jobs/{GHOST}"),
        ("GET", f"/api/v1/jobs/{GHOST}/logs"),
        ("GET", f"/api/v1/jobs/{GHOST}/samples"),
        ("GET", f"/api/v1/jobs/{GHOST}/logs/download"),
        ("POST", f"/api/v1/jobs/{GHOST}/kill"),
        ("POST", f"/api/v1/jobs/{GHOST}/pause"),
        ("POST", f"/api/v1/jobs/{GHOST}/resume"),
        ("POST", f"/api/v1/jobs/{GHOST}/resubmit"),
    ):
        response = web.http.request(method, path, headers=admin)
        assert response.status_code == 404, (path, response.text)
        error = response.json()["error"]
        assert error["message"] == f"no job {GHOST}", (path, error)
        assert error["hint"] == API_HINT, (path, error)
        assert "state-root" not in response.text and "vq list" not in response.text

    # malformed ids: routed or not, a 404 with a hint, never a bare "Not Found"
    for path in (
        "/api/v1/jobs/zzz",
        "/api/v1/jobs/..%2F..%2Fetc",
        "/api/v1/jobs/..%2F..%2Fetc/logs",
        f"/api/v1/jobs/{job}/no-such-resource",
    ):
        response = web.http.get(path, headers=admin)
        assert response.status_code == 404, path
        error = response.json()["error"]
        assert error["hint"] == API_HINT, (path, error)
    posted = web.http.post("/api/v1/jobs/..%2F..%2Fetc/kill", headers=admin)
    assert posted.status_code == 404 and posted.json()["error"]["hint"] == API_HINT
    wrong_method = web.http.get(f"/api/v1/jobs/{job}/kill", headers=admin)
    assert wrong_method.status_code == 405

    missing_log = web.http.get(f"/api/v1/jobs/{job}/logs/download", headers=admin)
    assert missing_log.status_code == 404 and missing_log.json()["error"]["hint"]


def test_cleanup_of_any_age_never_touches_live_jobs(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    admin = web.admin()
    failed = vq.submit("--", "sh", "-c", "exit 3")
    vq.wait_state(failed, "FAILED")
    running = vq.submit("--", "sleep", "60")
    paused = vq.submit("--", "sleep", "60")
    pending = vq.submit("--not-before", "2099-01-01T00:00:00+00:00", "--", "true")
    vq.wait_state(running, "RUNNING")
    vq.wait_state(paused, "RUNNING")
    assert web.http.post(f"/api/v1/jobs/{paused}/pause", headers=admin).status_code == 200
    vq.wait_state(paused, "SUSPENDED")

    for age in ("0", "0s", None):  # all mean "any age": the just-failed job is a candidate
        dry = web.http.post("/api/v1/jobs/cleanup", headers=admin, json={"older_than": age})
        assert dry.status_code == 200, dry.text
        assert [item["id"] for item in dry.json()["jobs"]] == [failed], age
    default = web.http.post("/api/v1/jobs/cleanup", headers=admin, json={}).json()
    assert default["jobs"] == []  # 14 days by default
    refused = web.http.post("/api/v1/jobs/cleanup", headers=admin, json={"older_than": "-1s"})
    assert refused.status_code == 422

    form = web.http.get("/", headers=admin).text
    ages = re.findall(
        r'<option value="([^"]*)"', form.split('name="older_than"')[1].split("</select>")[0]
    )
    assert ages == ["0", "1h", "1d", "7d", "14d", "30d"]
    done = web.http.post(
        "/actions/queue/cleanup",
        headers=admin,
        data={"older_than": "0", "confirm": "yes"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and "Archived 1 failed job" in done.cookies["vq_flash"]
    wait_until(lambda: not (vq.root / "jobs" / failed).exists(), timeout=10)
    assert vq.spec(failed)["archive_path"]
    for job, state in ((running, "RUNNING"), (paused, "SUSPENDED"), (pending, "PENDING")):
        assert vq.state(job) == state
        assert (vq.root / "jobs" / job).is_dir()
        assert not vq.spec(job).get("archive_path")
    for job in (running, paused):
        web.http.post(f"/api/v1/jobs/{job}/kill", headers=admin)
