"""/api/v1 error statuses: 404, 422 with details, 401, 413, traversal attempts, no paths."""

from __future__ import annotations

import httpx

from tests.conftest import Vq
from tests.web.conftest import Web


def _assert_error(response: httpx.Response, status: int, vq: Vq) -> dict[str, object]:
    assert response.status_code == status, (response.request.url, response.text)
    body = response.json()
    assert set(body["error"]) >= {"code", "message", "hint"}
    assert str(vq.root) not in response.text and "Traceback" not in response.text
    assert "root:" not in response.text  # never /etc/passwd contents
    error: dict[str, object] = body["error"]
    return error


def test_traversal_attempts_never_read_files(vq: Vq, web: Web) -> None:
    job = vq.submit("--", "true")  # a real id, for the stream attempts (no daemon needed)
    attempts = [
        "/api/v1/jobs/..%2F..%2F..%2Fetc%2Fpasswd/logs",
        "/api/v1/jobs/..%2F..%2F..%2Fetc%2Fpasswd/logs/download",
        "/api/v1/jobs/%2e%2e%2f%2e%2e%2fetc%2fpasswd/samples",
        "/api/v1/jobs/..%252F..%252Fetc%252Fpasswd",
        "/api/v1/jobs/....%2F%2F....%2F%2Fetc%2Fpasswd/logs",
        "/api/v1/jobs/%00/logs",
        f"/api/v1/jobs/{job}/logs?stream=../../../../etc/passwd",
        f"/api/v1/jobs/{job}/logs/download?stream=..%2F..%2Fx",
        f"/api/v1/jobs/{job}/logs?stream=stdout/../../x",
        f"/api/v1/jobs/{job}%2F..%2F..%2F..%2Fetc%2Fpasswd/logs",
    ]
    for url in attempts:
        response = web.http.get(url)
        assert response.status_code in (404, 422), (url, response.status_code, response.text)
        _assert_error(response, response.status_code, vq)
    raw = httpx.get(web.base_url + "/api/v1/jobs/../../../../etc/passwd")  # normalized by httpx
    assert "root:" not in raw.text
