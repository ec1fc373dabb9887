"""No API body carries an absolute server path; every answer carries security headers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.web.conftest import Web

ABSOLUTE = re.compile(r'"(/(?:tmp|home|root|srv|var|usr|etc)[^"]*)"')


def _no_server_path(web: Web, body: Any) -> None:
    text = json.dumps(body)
    assert str(web.vq.root) not in text
    assert not ABSOLUTE.findall(text), ABSOLUTE.findall(text)


def test_job_bodies_carry_placeholders_not_server_paths(web: Web, tmp_path: Path) -> None:
    web.vq.start_daemon()
    admin = web.admin()
    made = web.http.post(
        "/api/v1/jobs",
        json={"command": ["true"], "idempotency_key": "p", "inputs": {"files": {"a.txt": ""}}},
        headers=admin,
    )
    assert made.status_code == 201, made.text
    _no_server_path(web, made.json())
    job = made.json()["id"]
    assert made.json()["cwd"] == f"<state-root>/jobs/{job}"
    local = web.vq.submit("--cwd", str(tmp_path), "--", "true")
    web.vq.wait_state(job, "COMPLETED")
    web.vq.wait_state(local, "COMPLETED")
    for path in (f"/api/v1/jobs/{job}", f"/api/v1/jobs/{local}", "/api/v1/jobs"):
        answer = web.http.get(path, headers=admin)
        assert answer.status_code == 200
        _no_server_path(web, answer.json())
    detail = web.http.get(f"/api/v1/jobs/{local}", headers=admin).json()
    assert detail["cwd"] == "<server-path>"
    assert detail["workspace"] == f"<state-root>/jobs/{local}"


def test_api_answers_and_docs_carry_security_headers(web: Web) -> None:
    admin = web.admin()
    for path in ("/api/v1/jobs", "/api/v1/docs", "/api/v1/openapi.json", "/api/v1/jobs/nope"):
        answer = web.http.get(path, headers=admin)
        assert answer.headers["x-frame-options"] == "DENY", path
        assert answer.headers["cache-control"] == "no-store", path
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"], path
        assert answer.headers["x-content-type-options"] == "nosniff", path
    docs = web.http.get("/api/v1/docs")
    assert "'sha256-" in docs.headers["content-security-policy"]
    assert "unsafe-inline" not in docs.headers["content-security-policy"].split("style-src")[0]
