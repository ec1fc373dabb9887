"""The guard's rules on the real app in-process: every principal against every need.

The app is ``create_app`` plus probe routes (one per need, a page-style form handler that
calls ``check_csrf`` itself, and one reporting the page helpers), served by a real uvicorn
server on a loopback port in a thread, over a private config root. Credentials are made
with the same functions the CLI calls.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import Depends, Form, Request

from tests.conftest import wait_until
from tests.web.conftest import free_port
from vq.paths import StatePaths
from vq.web.app import create_app
from vq.web.auth import accounts, scoped, sessions, tokens
from vq.web.auth.principal import Principal
from vq.web.context import WebConfig
from vq.web.deps import check_csrf, csrf_token, login_redirect_needed, need

PASSWORD = "correct-horse-9"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "config"


@pytest.fixture
def client(tmp_path: Path, root: Path) -> Iterator[httpx.Client]:
    app = create_app(WebConfig(StatePaths(tmp_path / "state"), root))

    @app.get("/probe/read")
    def probe_read(p: Principal = Depends(need("read"))) -> dict[str, str]:  # noqa: B008
        return {"name": p.name, "kind": p.kind}

    @app.post("/probe/control")
    def probe_control(p: Principal = Depends(need("control"))) -> dict[str, str]:  # noqa: B008
        return {"name": p.name}

    @app.post("/probe/submit")
    def probe_submit(p: Principal = Depends(need("submit"))) -> dict[str, str]:  # noqa: B008
        return {"name": p.name}

    @app.get("/probe/admin")
    def probe_admin(p: Principal = Depends(need("admin"))) -> dict[str, str]:  # noqa: B008
        return {"name": p.name}

    @app.post("/probe/form")
    def probe_form(request: Request, csrf_token: str | None = Form(None)) -> dict[str, str]:
        check_csrf(request, csrf_token)
        return {"ok": "yes"}

    @app.get("/probe/page")
    def probe_page(request: Request) -> dict[str, object]:
        return {"redirect": login_redirect_needed(request), "csrf": csrf_token(request)}

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=30)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.config.port}") as http:
            yield http
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def sign_in(client: httpx.Client, **fields: str) -> None:
    answer = client.post("/login", data={"next": "/probe/read", **fields}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/probe/read"
    cookie = answer.headers["set-cookie"]
    for attribute in ("HttpOnly", "SameSite=strict", "Path=/", "Max-Age=43200"):
        assert attribute.lower() in cookie.lower(), cookie


def user(root: Path, name: str, role: str) -> None:
    accounts.add_account(root, name, role, PASSWORD, force=True)


def csrf_of(client: httpx.Client) -> str:
    value = client.get("/probe/page").json()["csrf"]
    assert re.fullmatch(r"[0-9a-f]{64}", value)
    return str(value)


def test_without_accounts_reads_are_open_and_mutations_need_credentials(
    client: httpx.Client,
) -> None:
    assert client.get("/probe/read").json() == {"name": "anonymous", "kind": "anonymous"}
    assert client.get("/probe/page").json() == {"redirect": False, "csrf": ""}
    for method, path in (("post", "/probe/control"), ("post", "/probe/submit")):
        answer = client.request(method, path)
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] == "unauthorized"
    assert client.get("/probe/admin").status_code == 401


def test_admin_token_is_admin_equivalent_and_a_wrong_one_is_401(
    client: httpx.Client, root: Path
) -> None:
    token = tokens.init_token(root)
    good = {"Authorization": f"Bearer {token}"}
    for method, path in (
        ("get", "/probe/read"),
        ("post", "/probe/control"),
        ("get", "/probe/admin"),
    ):
        assert client.request(method, path, headers=good).status_code == 200, path
    for header in (f"Bearer {token}x", "Bearer", f"Basic {token}", "Bearer vqt_nothing"):
        answer = client.post("/probe/control", headers={"Authorization": header})
        assert answer.status_code == 401, header
        assert token not in answer.text


def test_once_an_account_exists_anonymous_reads_are_refused(
    client: httpx.Client, root: Path
) -> None:
    user(root, "vera", "viewer")
    answer = client.get("/probe/read")
    assert answer.status_code == 401
    assert client.get("/probe/page").json()["redirect"] is True


@pytest.mark.parametrize(
    ("role", "control", "admin"),
    [("viewer", 403, 403), ("operator", 200, 403), ("admin", 200, 200)],
)
def test_roles_grant_their_needs(
    client: httpx.Client, root: Path, role: str, control: int, admin: int
) -> None:
    user(root, "someone", role)
    sign_in(client, username="someone", password=PASSWORD)
    assert client.get("/probe/read").json()["kind"] == "session"
    headers = {"X-CSRF-Token": csrf_of(client)}
    answer = client.post("/probe/control", headers=headers)
    assert answer.status_code == control
    if control == 403:
        assert answer.json()["error"]["message"] == "viewer accounts cannot control jobs"
    assert client.get("/probe/admin").status_code == admin


def test_failed_sign_in_is_generic_and_does_not_enumerate(client: httpx.Client, root: Path) -> None:
    user(root, "alice", "operator")
    wrong_password = client.post("/login", data={"username": "alice", "password": "nope-nope"})
    no_such_user = client.post("/login", data={"username": "bob", "password": "nope-nope"})
    bad_token = client.post("/login", data={"token": "not-the-token"})
    for answer in (wrong_password, no_such_user, bad_token):
        assert answer.status_code == 401
        assert "invalid credentials" in answer.text
        assert "set-cookie" not in answer.headers
    assert wrong_password.text.replace("alice", "bob") == no_such_user.text


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("/jobs/abc?x=1", "/jobs/abc?x=1"),
        ("//evil.example/x", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("", "/"),
    ],
)
def test_next_is_only_a_same_site_path(
    client: httpx.Client, root: Path, given: str, expected: str
) -> None:
    user(root, "alice", "viewer")
    answer = client.post(
        "/login",
        data={"username": "alice", "password": PASSWORD, "next": given},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == expected


def test_cookie_requests_need_the_csrf_token_and_bearer_requests_do_not(
    client: httpx.Client, root: Path
) -> None:
    user(root, "olga", "operator")
    sign_in(client, username="olga", password=PASSWORD)
    token = csrf_of(client)
    refused = client.post("/probe/control")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf"
    assert client.post("/probe/control", data={"csrf_token": "0" * 64}).status_code == 403
    assert client.post("/probe/control", data={"csrf_token": token}).status_code == 200
    assert client.post("/probe/form", data={}).json()["error"]["code"] == "csrf"
    assert client.post("/probe/form", data={"csrf_token": token}).status_code == 200
    admin = tokens.init_token(root)
    client.cookies.clear()
    bearer = {"Authorization": f"Bearer {admin}"}
    assert client.post("/probe/form", data={}, headers=bearer).status_code == 200
    assert client.post("/probe/control", headers=bearer).status_code == 200


def test_role_changes_and_removal_apply_to_live_sessions(client: httpx.Client, root: Path) -> None:
    user(root, "alice", "operator")
    user(root, "keeper", "admin")  # keeps accounts existing after alice goes
    sign_in(client, username="alice", password=PASSWORD)
    headers = {"X-CSRF-Token": csrf_of(client)}
    assert client.post("/probe/control", headers=headers).status_code == 200
    user(root, "alice", "viewer")
    assert client.post("/probe/control", headers=headers).status_code == 403
    accounts.remove_account(root, "alice")
    assert client.get("/probe/read").status_code == 401


def jar(cookie: str) -> dict[str, str]:
    return {"Cookie": f"vq_session={cookie}"}


def _cookie_body(cookie: str) -> dict[str, object]:
    payload = cookie.split(".", maxsplit=1)[0]
    body: dict[str, object] = json.loads(base64.urlsafe_b64decode(payload + "=" * 4))
    return body


def test_tampered_and_expired_cookies_count_as_signed_out(client: httpx.Client, root: Path) -> None:
    user(root, "vera", "viewer")
    sign_in(client, username="vera", password=PASSWORD)
    cookie = client.cookies["vq_session"]
    assert client.get("/probe/read").status_code == 200
    body = _cookie_body(cookie)
    forged = base64.urlsafe_b64encode(json.dumps({**body, "r": "admin"}).encode()).rstrip(b"=")
    client.cookies.clear()
    assert client.get("/probe/read", headers=jar(cookie)).status_code == 200
    assert (
        client.get(
            "/probe/read", headers=jar(forged.decode() + "." + cookie.split(".")[1])
        ).status_code
        == 401
    )
    key = sessions.load_key(root)
    stale = sessions.SessionClaims("vera", "viewer", int(time.time()) - 1, "sid")
    assert client.get("/probe/read", headers=jar(sessions.sign(key, stale))).status_code == 401
    fresh = sessions.SessionClaims("vera", "viewer", int(time.time()) + 60, "sid")
    assert client.get("/probe/read", headers=jar(sessions.sign(key, fresh))).status_code == 200
    other = sessions.SessionClaims("vera", "viewer", int(time.time()) + 60, "sid")
    assert (
        client.get("/probe/read", headers=jar(sessions.sign(b"x" * 32, other))).status_code == 401
    )


def test_token_sign_in_opens_an_admin_session_until_the_token_rotates(
    client: httpx.Client, root: Path
) -> None:
    admin = tokens.init_token(root)
    sign_in(client, token=admin)
    assert client.get("/api/v1/whoami").json()["grants"] == ["read", "control", "submit", "admin"]
    assert admin not in client.cookies["vq_session"]
    assert client.get("/probe/admin").status_code == 200
    tokens.init_token(root, force=True)
    assert client.get("/api/v1/whoami").json()["kind"] == "anonymous"
    assert client.get("/probe/admin").status_code == 401


def test_logout_clears_the_cookie(client: httpx.Client, root: Path) -> None:
    user(root, "vera", "viewer")
    sign_in(client, username="vera", password=PASSWORD)
    answer = client.post("/logout", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/login"
    assert "vq_session" not in client.cookies
    assert client.get("/probe/read").status_code == 401


def test_scoped_tokens_get_exactly_their_scopes(client: httpx.Client, root: Path) -> None:
    now = datetime.now(UTC)
    token, _ = scoped.create_token(root, "dev", ["read", "submit"], now=now)
    bearer = {"Authorization": f"Bearer {token}"}
    assert client.get("/probe/read", headers=bearer).json()["kind"] == "scoped_token"
    assert client.post("/probe/submit", headers=bearer).status_code == 200
    refused = client.post("/probe/control", headers=bearer)
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "token 'dev' lacks scope control"
    assert client.get("/probe/admin", headers=bearer).status_code == 403
    who = client.get("/api/v1/whoami", headers=bearer).json()
    assert who["kind"] == "scoped_token" and who["grants"] == ["read", "submit"]
    scoped.revoke_token(root, "dev", now=now)
    revoked = client.get("/probe/read", headers=bearer)
    assert revoked.status_code == 401 and token not in revoked.text


def test_expired_scoped_token_is_401(client: httpx.Client, root: Path) -> None:
    past = datetime.now(UTC) - timedelta(hours=2)
    token, _ = scoped.create_token(root, "old", ["read"], now=past, expires_in=timedelta(hours=1))
    answer = client.get("/probe/read", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
    assert "expired" in answer.json()["error"]["message"]


def test_login_page_renders_without_javascript(client: httpx.Client) -> None:
    page = client.get("/login?next=/jobs/x")
    assert page.status_code == 200
    assert '<form method="post" action="/login"' in page.text
    assert 'name="next" value="/jobs/x"' in page.text
    assert "<script>" not in page.text
    hostile = client.get("/login", params={"next": '/"><script>alert(1)</script>'})
    assert "<script>alert" not in hostile.text
