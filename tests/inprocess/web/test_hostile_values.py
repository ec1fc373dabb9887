"""Values a user can type never make the API answer 500: they are 4xx with a JSON error."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import Web


def _submit(web: Web, headers: dict[str, str], key: str, **fields: Any) -> Any:
    body = {"command": ["true"], "idempotency_key": key, **fields}
    return web.http.post("/api/v1/jobs", json=body, headers=headers)


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"not_before": "0001-01-01T00:00:00"}, 422),
        ({"not_before": "9999-12-31T23:59:59"}, 422),
        ({"wall_time_seconds": 10**30}, 422),
        ({"job_name": "x" * 300}, 422),
        ({"inputs": {"files": {"a" * 300: ""}}}, 422),
        ({"inputs": {"files": {"/".join(["d"] * 200) + "/f": ""}}}, 422),
    ],
)
def test_hostile_submit_values_are_refused_not_500(
    web: Web, fields: dict[str, Any], status: int
) -> None:
    web.vq.start_daemon()
    answer = _submit(web, web.admin(), "hostile", **fields)
    assert answer.status_code in (400, 413, 422), answer.text
    assert answer.json()["error"]["message"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/jobs?since=99999999999999d",
        "/api/v1/jobs?since=0001-01-01",
        "/api/v1/queue/usage?since=99999999999999d",
        "/api/v1/queue/usage?since=0001-01-01",
    ],
)
def test_hostile_query_values_are_refused_not_500(web: Web, path: str) -> None:
    answer = web.http.get(path, headers=web.admin())
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]["message"]


def test_hostile_cleanup_age_is_refused_not_500(web: Web) -> None:
    answer = web.http.post(
        "/api/v1/jobs/cleanup",
        json={"older_than": "99999999999999999d", "dry_run": False},
        headers=web.admin(),
    )
    assert 400 <= answer.status_code < 500, answer.text


def test_an_upload_with_a_long_member_name_is_refused_at_upload(web: Web) -> None:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("y" * 300)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"y"))
    headers = {**web.admin(), "Content-Type": "application/gzip"}
    answer = web.http.post("/api/v1/uploads", content=buffer.getvalue(), headers=headers)
    assert answer.status_code in (400, 422), answer.text
    assert "255" in answer.json()["error"]["message"]


def test_a_lone_surrogate_in_a_body_is_refused_not_500(web: Web) -> None:
    web.vq.start_daemon()
    raw = b'{"command": ["true", "\\udcff"], "idempotency_key": "\\udcff"}'
    headers = {**web.admin(), "Content-Type": "application/json"}
    answer = web.http.post("/api/v1/jobs", content=raw, headers=headers)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["message"]


def test_an_api_resubmit_validates_the_job_name(web: Web) -> None:
    web.vq.start_daemon()
    job = web.vq.submit("--", "true")
    web.vq.wait_state(job, "COMPLETED")
    for name in ("evil\x1b]0;x\x07", "../../x", "\u202egnp.exe"):
        answer = web.http.post(
            f"/api/v1/jobs/{job}/resubmit", json={"job_name": name}, headers=web.admin()
        )
        assert answer.status_code in (400, 422), answer.text
    assert [row["id"] for row in web.vq.json("list")["jobs"]] == [job]


def test_a_broken_config_is_a_clear_page_naming_the_problem(web: Web) -> None:
    web.config_dir.mkdir(parents=True, exist_ok=True)
    (web.config_dir / "config.toml").write_bytes(b"[daemon]\n# \xff\n")
    page = web.http.get("/", headers=web.admin())
    assert page.status_code >= 500
    assert "UTF-8" in page.text and "config.toml" in page.text
    assert str(web.config_dir) not in page.text  # <config-root>, not the server path
