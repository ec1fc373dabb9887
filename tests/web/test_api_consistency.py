"""/api/v1 consistency: one "no job X" answer with an API hint.

Real daemon, real `vq` submissions, real `vq web serve`.
"""

from __future__ import annotations

from tests.conftest import Vq
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
