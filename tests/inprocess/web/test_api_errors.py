"""/api/v1 error statuses: 404, 422 with details, 401, 413, traversal attempts, no paths."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from tests.conftest import Vq
from tests.web.conftest import Web

UNKNOWN = "0123456789ab"
READS = ("", "/logs", "/logs/download", "/samples")
MUTATIONS = ("/kill", "/pause", "/resume", "/resubmit")


def _assert_error(response: httpx.Response, status: int, vq: Vq) -> dict[str, object]:
    assert response.status_code == status, (response.request.url, response.text)
    body = response.json()
    assert set(body["error"]) >= {"code", "message", "hint"}
    assert str(vq.root) not in response.text and "Traceback" not in response.text
    assert "root:" not in response.text  # never /etc/passwd contents
    error: dict[str, object] = body["error"]
    return error


def test_unknown_ids_are_404_on_every_job_route(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    admin = web.admin()
    for suffix in READS:
        error = _assert_error(web.http.get(f"/api/v1/jobs/{UNKNOWN}{suffix}"), 404, vq)
        assert error["code"] == "not-found"
    for suffix in MUTATIONS:
        _assert_error(web.http.post(f"/api/v1/jobs/{UNKNOWN}{suffix}", headers=admin), 404, vq)
    for suffix in MUTATIONS:  # credentials are checked before the id
        _assert_error(web.http.post(f"/api/v1/jobs/{UNKNOWN}{suffix}"), 401, vq)


def test_a_log_symlinked_out_of_the_workspace_is_refused(vq: Vq, web: Web) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sh", "-c", "rm stdout.log; ln -s /etc/passwd stdout.log")
    vq.wait_state(job, "COMPLETED")
    assert (vq.root / "jobs" / job / "stdout.log").is_symlink()
    _assert_error(web.http.get(f"/api/v1/jobs/{job}/logs/download"), 404, vq)
    tail = web.http.get(f"/api/v1/jobs/{job}/logs")
    assert tail.status_code == 200 and "root:" not in tail.text


def test_validation_errors_carry_details(vq: Vq, web: Web) -> None:
    job = vq.submit("--", "true")
    for params, loc in (
        ({"stream": "stdin"}, "query.stream"),
        ({"tail": -1}, "query.tail"),
        ({"tail": 10**6}, "query.tail"),
    ):
        error = _assert_error(web.http.get(f"/api/v1/jobs/{job}/logs", params=params), 422, vq)
        assert error["code"] == "validation-error"
        assert [d["loc"] for d in error["details"]] == [loc]  # type: ignore[attr-defined]
    download = web.http.get(f"/api/v1/jobs/{job}/logs/download", params={"stream": "x"})
    _assert_error(download, 422, vq)
    admin = web.admin()
    body = web.http.post(
        f"/api/v1/jobs/{job}/kill", headers=admin, json={"resubmit": "maybe", "x": 1}
    )
    error = _assert_error(body, 422, vq)
    locs = {d["loc"] for d in error["details"]}  # type: ignore[attr-defined]
    assert locs == {"body.resubmit", "body.x"}
    assert vq.state(job) == "PENDING"  # a refused body changes nothing


def _chunks(total: int) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b"x" * 65536
        sent += 65536


def test_oversized_bodies_are_413(vq: Vq, web: Web) -> None:
    job = vq.submit("--", "true")
    admin = {**web.admin(), "Content-Type": "application/json"}
    big = b'{"reason": "' + b"x" * (1024 * 1024 + 10) + b'"}'
    for url in ("/api/v1/queue/drain", f"/api/v1/jobs/{job}/resubmit", "/api/v1/jobs/cleanup"):
        error = _assert_error(web.http.post(url, headers=admin, content=big), 413, vq)
        assert error["code"] == "too-large"
    chunked = web.http.post("/api/v1/queue/drain", headers=admin, content=_chunks(2 * 1024 * 1024))
    _assert_error(chunked, 413, vq)
    small = web.http.post("/api/v1/queue/drain", headers=admin, json={"reason": "x" * 100})
    assert small.status_code == 200
    assert web.http.get("/api/v1/queue").json()["drain"]["mode"] == "new"
    assert web.http.post("/api/v1/queue/undrain", headers=admin).status_code == 200
