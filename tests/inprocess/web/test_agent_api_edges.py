"""Malformed, hostile or unlucky requests to the agent API: never a 500, never a path."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import wait_until
from tests.web.conftest import Web


@pytest.fixture
def admin(web: Web) -> dict[str, str]:
    return web.admin()


def no_leak(web: Web, answer: httpx.Response) -> dict[str, Any]:
    """The error object of a JSON error answer that names no server path."""
    assert answer.status_code < 500, (answer.status_code, answer.text)
    text = answer.text
    for secret in (str(web.vq.root), str(web.config_dir), str(web.vq.root.parent)):
        assert secret not in text, text
    error: dict[str, Any] = answer.json()["error"]
    return error


def post_raw(web: Web, content: bytes, headers: dict[str, str]) -> httpx.Response:
    return web.http.post("/api/v1/jobs", content=content, headers=headers)


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"{not json", "application/json"),
        (b'{"command": ["true"], "idempotency_key": "\xff\xfe"}', "application/json"),
        (b"\xff\xfe\x00garbage", "application/json"),
        (b"[1, 2, 3]", "application/json"),
        (b"null", "application/json"),
        (b"", "application/json"),
        (b"command=true&idempotency_key=k", "application/x-www-form-urlencoded"),
        (b'{"command": ["true"], "idempotency_key": "k"}', "text/plain"),
        (
            b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--x--",
            "multipart/form-data; boundary=x",
        ),
    ],
    ids=[
        "broken",
        "non-utf8-string",
        "non-utf8",
        "array",
        "null",
        "empty",
        "form",
        "text",
        "multipart",
    ],
)
def test_bad_bodies_are_4xx(
    web: Web, admin: dict[str, str], content: bytes, content_type: str
) -> None:
    answer = post_raw(web, content, {**admin, "Content-Type": content_type})
    error = no_leak(web, answer)
    assert answer.status_code in (400, 415, 422), answer.text
    assert error["code"]
    assert not list((web.vq.root / "queue").glob("*.json"))


@pytest.mark.parametrize(
    "headers",
    [{"Content-Type": "application/json; charset=utf-8"}, {}],
    ids=["charset", "no-content-type"],
)
def test_json_bodies_with_or_without_a_json_type_are_accepted(
    web: Web, admin: dict[str, str], headers: dict[str, str]
) -> None:
    body = json.dumps({"command": ["true"], "idempotency_key": "typed"}).encode()
    answer = post_raw(web, body, {**admin, **headers})
    assert answer.status_code == 201, answer.text


@pytest.mark.parametrize(
    "key",
    ["", "k" * 257, "k" * 60_000, 12, None, ["k"]],
    ids=["empty", "257", "huge", "number", "null", "list"],
)
def test_bad_idempotency_keys_are_422(web: Web, admin: dict[str, str], key: Any) -> None:
    answer = web.http.post(
        "/api/v1/jobs", json={"command": ["true"], "idempotency_key": key}, headers=admin
    )
    assert answer.status_code in (413, 422), answer.text
    no_leak(web, answer)


@pytest.mark.parametrize("timeout", ["-1", "301", "nan", "inf", "-inf", "1e309", "abc", ""])
def test_absurd_wait_timeouts_are_422(web: Web, admin: dict[str, str], timeout: str) -> None:
    answer = web.http.get(
        "/api/v1/jobs/0123456789ab/wait", params={"timeout": timeout}, headers=admin
    )
    assert answer.status_code == 422, answer.text
    no_leak(web, answer)


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_unknown_jobs_are_404_in_wait_and_outputs(
    web: Web, admin: dict[str, str], daemon: bool
) -> None:
    if daemon:
        web.vq.start_daemon()
    for job_id in ("0123456789ab", "..%2F..%2Fetc", "x" * 300, "%00"):
        for tail in ("wait?timeout=0.1", "outputs.tar.gz"):
            answer = web.http.get(f"/api/v1/jobs/{job_id}/{tail}", headers=admin)
            assert answer.status_code == 404, (job_id, tail, answer.text)
            no_leak(web, answer)
    for job_id in ("0123456789ab", "0123456789ab%ff"):
        since = web.http.get(
            f"/api/v1/jobs/{job_id}/wait?timeout=0&since_state=%ff%fe" + "X" * 5000,
            headers=admin,
        )
        assert since.status_code in (404, 422), since.text
        no_leak(web, since)


def archived_job(web: Web, admin: dict[str, str]) -> str:
    web.vq.start_daemon()
    made = web.http.post(
        "/api/v1/jobs",
        json={"command": ["bash", "-c", "echo hi > out.txt"], "idempotency_key": "arch"},
        headers=admin,
    )
    job_id: str = made.json()["id"]
    web.vq.wait_state(job_id, "COMPLETED")

    def archived() -> Any:  # "older than 1s" holds a second after the job ended
        web.vq.run("cleanup", "--archive", "--older-than", "1s", "--execute")
        return web.vq.spec(job_id).get("archived_at")

    wait_until(archived, timeout=30, interval=0.5)
    return job_id


def test_outputs_of_an_archived_job_is_404_without_paths(web: Web, admin: dict[str, str]) -> None:
    job_id = archived_job(web, admin)
    answer = web.http.get(f"/api/v1/jobs/{job_id}/outputs.tar.gz", headers=admin)
    assert answer.status_code in (404, 410), answer.text
    error = no_leak(web, answer)
    assert "archived" in error["message"]
    done = web.http.get(f"/api/v1/jobs/{job_id}/wait", params={"timeout": 0}, headers=admin)
    assert done.status_code == 200 and done.json()["state"] == "COMPLETED"


def test_broken_config_is_not_a_path_leak(web: Web, admin: dict[str, str]) -> None:
    web.config_dir.mkdir(parents=True, exist_ok=True)
    (web.config_dir / "config.toml").write_text("[web]\nupload_max_bytes = 'lots'\n")
    for answer in (
        web.http.post(
            "/api/v1/jobs", json={"command": ["true"], "idempotency_key": "cfg"}, headers=admin
        ),
        web.http.post(
            "/api/v1/uploads",
            content=b"x",
            headers={**admin, "Content-Type": "application/gzip"},
        ),
    ):
        text = answer.text
        assert str(web.config_dir) not in text and str(web.vq.root.parent) not in text, text
        assert answer.json()["error"]["code"]


def test_inline_names_that_collide_are_400_and_leave_nothing(
    web: Web, admin: dict[str, str]
) -> None:
    for files in (
        {"a/b": "eA==", "a": "eA=="},
        {"a": "eA==", "a/b": "eA=="},
        {"a": "eA==", "./a": "eA=="},
        {"d/x": "eA==", "d//x": "eA=="},
        {"d/": "eA=="},
    ):
        answer = web.http.post(
            "/api/v1/jobs",
            json={"command": ["true"], "idempotency_key": "names", "inputs": {"files": files}},
            headers=admin,
        )
        assert answer.status_code == 400, (files, answer.text)
        no_leak(web, answer)
    uploads = web.vq.root / "uploads"
    assert not uploads.exists() or list(uploads.iterdir()) == []
    assert not list((web.vq.root / "queue").glob("*.json"))
