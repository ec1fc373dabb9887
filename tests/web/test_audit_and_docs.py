"""The console's audit trail (fleet-audit.jsonl, shown on /audit) and the offline API docs."""

from __future__ import annotations

import re

import httpx

from tests.conftest import Vq
from tests.web.conftest import Web


def test_admins_read_the_audit_trail_on_the_audit_page(vq: Vq, web: Web) -> None:
    token = web.init_token()
    web.http.post("/api/v1/queue/drain", json={}, headers={"Authorization": f"Bearer {token}"})
    with httpx.Client(base_url=web.base_url, timeout=30) as browser:
        signed_in = browser.post("/login", data={"token": token, "next": "/audit"})
        assert signed_in.status_code == 303, signed_in.text
        page = browser.get("/audit")
        assert page.status_code == 200
        assert re.search(r"drain", page.text)
        assert "admin-token" in page.text
