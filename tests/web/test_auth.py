"""Authentication end to end: the real `vq web` CLI and a real `vq web serve` process.

The protected probe is ``POST /api/v1/jobs/<unknown id>/kill``: 401/403 when the caller
may not control jobs, 404 once it may (so no daemon is needed; one PENDING job makes the
queue directory exist). Reads use ``GET /api/v1/jobs``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web
from vq.web.auth import sessions

KILL = "/api/v1/jobs/0123456789ab/kill"
READ = "/api/v1/jobs"
PASSWORD = "correct-horse-9"


@pytest.fixture(autouse=True)
def queue_exists(vq: Vq) -> None:
    vq.submit("--", "true")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def add_user(vq: Vq, name: str, role: str) -> None:
    vq.run("web", "user", "add", name, "--role", role, input=PASSWORD + "\n")


@contextmanager
def signed_in(web: Web, **fields: str) -> Iterator[httpx.Client]:
    """A fresh browser-like client signed in through POST /login."""
    with httpx.Client(base_url=web.base_url, timeout=30.0) as client:
        answer = client.post("/login", data={"next": "/api/v1/whoami", **fields})
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/api/v1/whoami"
        assert "httponly" in answer.headers["set-cookie"].lower()
        assert "samesite=strict" in answer.headers["set-cookie"].lower()
        yield client


def csrf_from_page(client: httpx.Client) -> str:
    """The CSRF token embedded in the page's sign-out form."""
    page = client.get("/login").text
    found = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page)
    assert found, page
    return found.group(1)


def test_init_token_is_private_printed_once_and_kept_without_force(vq: Vq, web: Web) -> None:
    token = vq.run("web", "init-token").stdout.strip()
    path = web.config_dir / "web-token"
    assert path.read_text().strip() == token and len(token) >= 43
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(web.config_dir).st_mode) == 0o700

    again = vq.run("web", "init-token", check=False)
    assert again.returncode == 6
    assert "--force" in again.stderr and token not in again.stdout + again.stderr
    assert path.read_text().strip() == token

    assert web.http.post(KILL, headers=bearer(token)).status_code == 404
    rotated = json.loads(vq.run("web", "init-token", "--force", "--json").stdout)["token"]
    assert rotated != token
    assert web.http.post(KILL, headers=bearer(token)).status_code == 401
    assert web.http.post(KILL, headers=bearer(rotated)).status_code == 404


def test_a_token_file_readable_by_others_is_refused(vq: Vq, web: Web) -> None:
    token = web.init_token()
    os.chmod(web.config_dir / "web-token", 0o644)
    answer = web.http.post(KILL, headers=bearer(token))
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert error["code"] == "unsafe-permissions" and "chmod 600" in error["hint"]
    assert token not in answer.text and str(web.config_dir) not in answer.text
    assert token not in web.log_text()
    assert web.http.post(KILL).status_code == 401
    assert web.http.get(READ).status_code == 200  # reads stay open (no accounts)
    os.chmod(web.config_dir / "web-token", 0o600)
    assert web.http.post(KILL, headers=bearer(token)).status_code == 404


def test_wrong_or_missing_bearer_token_is_401(vq: Vq, web: Web) -> None:
    assert web.http.post(KILL, headers=bearer("no-token-yet")).status_code == 401
    token = web.init_token()
    for presented in (token[:-1], token + "x", "vqt_0123456789ab_" + "A" * 43):
        answer = web.http.post(KILL, headers=bearer(presented))
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "unauthorized"
        assert token not in answer.text


def test_reads_are_open_until_the_first_account_exists(vq: Vq, web: Web) -> None:
    assert web.http.get(READ).status_code == 200
    assert web.http.get("/api/v1/whoami").json()["grants"] == ["read"]
    add_user(vq, "vera", "viewer")
    assert web.http.get(READ).status_code == 401
    assert web.http.get("/api/v1/whoami").json()["grants"] == []
    page = web.http.get("/")
    assert page.status_code == 303 and page.headers["location"].startswith("/login?next=")
    assert web.http.get("/login").status_code == 200  # the way in stays open


def test_each_role_signs_in_and_gets_its_powers(vq: Vq, web: Web) -> None:
    for name, role in (("vera", "viewer"), ("otto", "operator"), ("ada", "admin")):
        add_user(vq, name, role)
    listed = json.loads(vq.run("web", "user", "list", "--json").stdout)
    assert {(u["username"], u["role"]) for u in listed} == {
        ("vera", "viewer"),
        ("otto", "operator"),
        ("ada", "admin"),
    }
    users_file = web.config_dir / "web-users.json"
    assert stat.S_IMODE(os.stat(users_file).st_mode) == 0o600
    assert PASSWORD not in users_file.read_text()

    expected = {"vera": 403, "otto": 404, "ada": 404}
    for name, status in expected.items():
        with signed_in(web, username=name, password=PASSWORD) as client:
            who = client.get("/api/v1/whoami").json()
            assert who["kind"] == "session" and who["name"] == name
            assert client.get(READ).status_code == 200
            answer = client.post(KILL, headers={"X-CSRF-Token": csrf_from_page(client)})
            assert answer.status_code == status, (name, answer.text)
            if status == 403:
                assert answer.json()["error"]["message"] == "viewer accounts cannot control jobs"


def test_wrong_password_is_a_generic_401(vq: Vq, web: Web) -> None:
    add_user(vq, "vera", "viewer")
    for username in ("vera", "nobody"):
        answer = web.http.post("/login", data={"username": username, "password": "wrong-pass"})
        assert answer.status_code == 401 and "invalid credentials" in answer.text
        assert "vq_session" not in answer.headers.get("set-cookie", "")


def test_admin_token_opens_a_browser_session(vq: Vq, web: Web) -> None:
    token = web.init_token()
    with signed_in(web, token=token) as client:
        assert client.get("/api/v1/whoami").json()["role"] == "admin"
        assert token not in client.cookies["vq_session"]
        answer = client.post(KILL, headers={"X-CSRF-Token": csrf_from_page(client)})
        assert answer.status_code == 404


def test_cookie_form_post_without_csrf_token_is_refused(vq: Vq, web: Web) -> None:
    add_user(vq, "otto", "operator")
    with signed_in(web, username="otto", password=PASSWORD) as client:
        refused = client.post(KILL, data={"reason": "x"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf"
        wrong = client.post(KILL, data={"csrf_token": "0" * 64})
        assert wrong.status_code == 403
        accepted = client.post(KILL, data={"csrf_token": csrf_from_page(client)})
        assert accepted.status_code != 403, accepted.text


def _craft(web: Web, user: str, role: str, exp: int) -> str:
    key = (web.config_dir / "web-session-key").read_bytes()
    return sessions.sign(key, sessions.SessionClaims(user, role, exp, "crafted"))  # type: ignore[arg-type]


def test_tampered_and_expired_cookies_are_not_signed_in(vq: Vq, web: Web) -> None:
    add_user(vq, "vera", "viewer")
    with signed_in(web, username="vera", password=PASSWORD) as client:
        cookie = client.cookies["vq_session"]
    payload, signature = cookie.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**body, "r": "admin"}).encode()).rstrip(b"=")
    now = int(time.time())
    cases = {
        cookie: 200,
        f"{forged.decode()}.{signature}": 401,
        _craft(web, "vera", "viewer", now - 5): 401,
        _craft(web, "vera", "viewer", now + 600): 200,
        _craft(web, "ghost", "admin", now + 600): 401,
    }
    for value, status in cases.items():
        answer = web.http.get(READ, headers={"Cookie": f"vq_session={value}"})
        assert answer.status_code == status, value


def test_removing_or_demoting_an_account_applies_at_once(vq: Vq, web: Web) -> None:
    add_user(vq, "otto", "operator")
    add_user(vq, "ada", "admin")
    with signed_in(web, username="otto", password=PASSWORD) as client:
        csrf = {"X-CSRF-Token": csrf_from_page(client)}
        assert client.post(KILL, headers=csrf).status_code == 404
        vq.run("web", "user", "add", "otto", "--role", "viewer", "--force", input="other-pass-1\n")
        assert client.post(KILL, headers=csrf).status_code == 403
        vq.run("web", "user", "remove", "otto")
        assert client.get(READ).status_code == 401
    assert vq.run("web", "user", "remove", "otto", check=False).returncode == 3
    exists = vq.run("web", "user", "add", "ada", "--role", "viewer", check=False, input="x" * 9)
    assert exists.returncode == 6


def test_scoped_token_create_list_revoke(vq: Vq, web: Web) -> None:
    created = json.loads(
        vq.run("web", "token", "create", "dev", "--scope", "read", "--json").stdout
    )
    token = created["token"]
    assert re.fullmatch(rf"vqt_{created['id']}_[A-Za-z0-9_-]{{43}}", token)
    tokens_file = web.config_dir / "web-tokens.json"
    assert stat.S_IMODE(os.stat(tokens_file).st_mode) == 0o600
    secret = token.split("_", 2)[2]
    listing = vq.run("web", "token", "list", "--json").stdout
    assert secret not in listing and secret not in tokens_file.read_text()
    assert json.loads(listing)[0]["state"] == "active"

    assert web.http.get(READ, headers=bearer(token)).status_code == 200
    refused = web.http.post(KILL, headers=bearer(token))
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "token 'dev' lacks scope control"

    vq.run("web", "token", "revoke", "dev")
    assert web.http.get(READ, headers=bearer(token)).status_code == 401
    assert json.loads(vq.run("web", "token", "list", "--json").stdout)[0]["state"] == "revoked"
    assert vq.run("web", "token", "revoke", "nothing", check=False).returncode == 3


def test_scoped_token_expires(vq: Vq, web: Web) -> None:
    token = vq.run("web", "token", "create", "brief", "--scope", "read", "--expires", "2s").stdout
    headers = bearer(token.strip())
    assert web.http.get(READ, headers=headers).status_code == 200
    wait_until(lambda: web.http.get(READ, headers=headers).status_code == 401, timeout=15)
    answer = web.http.get(READ, headers=headers)
    assert "expired" in answer.json()["error"]["message"]


def test_submit_quota_answers_429_with_retry_after(vq: Vq, web: Web) -> None:
    token = vq.run(
        "web", "token", "create", "agent", "--scope", "submit,read", "--max-jobs-per-day", "1"
    ).stdout.strip()
    job = {"command": ["true"], "idempotency_key": "first"}
    first = web.http.post("/api/v1/jobs", headers=bearer(token), json=job)
    assert first.status_code == 201, first.text
    second = web.http.post(
        "/api/v1/jobs", headers=bearer(token), json={**job, "idempotency_key": "second"}
    )
    assert second.status_code == 429 and second.json()["error"]["code"] == "rate-limited"
    assert 1 <= int(second.headers["Retry-After"]) <= 86400
    listed = json.loads(vq.run("web", "token", "list", "--json").stdout)
    assert listed[0]["used_today"] == 1
