"""The console's audit trail (fleet-audit.jsonl, shown on /audit) and the offline API docs."""

from __future__ import annotations

import json
import re

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web


def audit_lines(vq: Vq) -> list[dict[str, object]]:
    path = vq.root / "fleet-audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_mutation_is_audited_with_its_actor_and_outcome(vq: Vq, web: Web) -> None:
    token = web.init_token()
    job_id = vq.submit("--not-before", "1d", "--", "true")
    refused = web.http.post(f"/api/v1/jobs/{job_id}/kill", json={})
    assert refused.status_code == 401
    killed = web.http.post(
        f"/api/v1/jobs/{job_id}/kill", json={}, headers={"Authorization": f"Bearer {token}"}
    )
    assert killed.status_code == 200, killed.text
    web.http.get(f"/api/v1/jobs/{job_id}")  # reads are not audited

    lines = wait_until(lambda: len(audit_lines(vq)) >= 2 and audit_lines(vq))
    assert [(x["action"], x["job_id"], x["outcome"]) for x in lines] == [
        ("kill", job_id, "refused"),
        ("kill", job_id, "ok"),
    ]
    assert lines[0]["actor"] == "anonymous" and lines[0]["status"] == 401
    assert lines[1]["actor"] == "admin-token" and lines[1]["role"] == "admin"
    raw = (vq.root / "fleet-audit.jsonl").read_text()
    assert token not in raw
    assert str(vq.root) not in raw


def test_api_docs_are_served_from_vendored_files(web: Web) -> None:
    page = web.http.get("/api/v1/docs")
    assert page.status_code == 200
    assert "/static/vendor/swagger-ui-bundle.js" in page.text
    assert not re.search(r"(src|href)=['\"]https?://", page.text), "no third-party asset"
    for asset in ("/static/vendor/swagger-ui-bundle.js", "/static/vendor/swagger-ui.css"):
        assert web.http.get(asset).status_code == 200
    assert web.http.get("/api/v1/openapi.json").json()["info"]["title"] == "vq"
