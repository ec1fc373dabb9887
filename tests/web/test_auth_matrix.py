"""Who may call which mutating route: every credential kind × every mutating route.

One real server over one state root (no daemon: the routes then run the services on the
disk, which is what a plain single-host console without a daemon does). Each cell only
asserts the authorization decision — 401 (no or bad credentials), 403 (known caller
without the power) or "let through" (any other status; the route's own answer, e.g. 409
for a job that already ended, proves the request got past the guard).
"""

from __future__ import annotations

import base64
import io
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import Vq
from tests.web.conftest import Web

PASSWORD = "correct-horse-9"
DENIED = {401, 403}


def _tar_gz() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"hello\n"
        info = tarfile.TarInfo("input.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    path: str
    #: The need the route declares: "control" or "submit".
    need: str
    json: object | None = None
    content: bytes | None = None
    content_type: str | None = None


def routes(job_id: str) -> list[Route]:
    return [
        Route("kill", "POST", f"/api/v1/jobs/{job_id}/kill", "control", json={}),
        Route("pause", "POST", f"/api/v1/jobs/{job_id}/pause", "control"),
        Route("resume", "POST", f"/api/v1/jobs/{job_id}/resume", "control"),
        Route("resubmit", "POST", f"/api/v1/jobs/{job_id}/resubmit", "control", json={}),
        Route("drain", "POST", "/api/v1/queue/drain", "control", json={}),
        Route("undrain", "POST", "/api/v1/queue/undrain", "control"),
        Route("cleanup", "POST", "/api/v1/jobs/cleanup", "control", json={}),
        Route(
            "submit",
            "POST",
            "/api/v1/jobs",
            "submit",
            json={
                "command": ["true"],
                "idempotency_key": "matrix",
                "inputs": {"files": {"a.txt": base64.b64encode(b"a").decode()}},
            },
        ),
        Route(
            "upload",
            "POST",
            "/api/v1/uploads",
            "submit",
            content=_tar_gz(),
            content_type="application/gzip",
        ),
    ]


#: credential kind → the needs it grants (None: no credentials or bad ones → 401).
GRANTS: dict[str, set[str] | None] = {
    "none": None,
    "wrong-token": None,
    "viewer": set(),
    "operator": {"control", "submit"},
    "admin": {"control", "submit"},
    "admin-token": {"control", "submit"},
    "token-read": set(),
    "token-submit": {"submit"},
    "token-control": {"control"},
}


@dataclass
class Caller:
    headers: dict[str, str]
    client: httpx.Client


def _sign_in(web: Web, user: str) -> httpx.Client:
    client = httpx.Client(base_url=web.base_url, timeout=30.0)
    answer = client.post("/login", data={"username": user, "password": PASSWORD, "next": "/"})
    assert answer.status_code == 303, answer.text
    return client


def _csrf(client: httpx.Client) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', client.get("/").text)
    assert found, "the signed-in page carries a CSRF token"
    return found.group(1)


def _scoped(vq: Vq, name: str, scope: str) -> str:
    out = vq.run("web", "token", "create", name, "--scope", scope).stdout
    found = re.search(r"vqt_[A-Za-z0-9_-]+", out)
    assert found, out
    return found.group(0)


@pytest.fixture
def callers(vq: Vq, web: Web) -> Iterator[dict[str, Caller]]:
    token = web.init_token()
    for user, role in (("ann", "viewer"), ("olga", "operator"), ("adam", "admin")):
        vq.run("web", "user", "add", user, "--role", role, input=PASSWORD + "\n")
    made: dict[str, Caller] = {}
    plain = httpx.Client(base_url=web.base_url, timeout=30.0)
    made["none"] = Caller({}, plain)
    made["wrong-token"] = Caller({"Authorization": "Bearer not-the-token"}, plain)
    made["admin-token"] = Caller({"Authorization": f"Bearer {token}"}, plain)
    for kind, scope in (
        ("token-read", "read"),
        ("token-submit", "submit,read"),
        ("token-control", "control,read"),
    ):
        made[kind] = Caller({"Authorization": f"Bearer {_scoped(vq, kind, scope)}"}, plain)
    for kind, user in (("viewer", "ann"), ("operator", "olga"), ("admin", "adam")):
        client = _sign_in(web, user)
        made[kind] = Caller({"X-CSRF-Token": _csrf(client)}, client)
    yield made
    for caller in made.values():
        caller.client.close()


def test_every_mutating_route_admits_exactly_the_callers_with_its_power(
    vq: Vq, web: Web, callers: dict[str, Caller]
) -> None:
    job_id = vq.submit("--not-before", "1d", "--", "true")  # stays PENDING (no daemon anyway)
    failures = []
    for route in routes(job_id):
        for kind, grants in GRANTS.items():
            caller = callers[kind]
            headers = dict(caller.headers)
            if route.content_type:
                headers["Content-Type"] = route.content_type
            answer = caller.client.request(
                route.method, route.path, headers=headers, json=route.json, content=route.content
            )
            if grants is None:
                expected = "401"
                ok = answer.status_code == 401
            elif route.need in grants:
                expected = "let through"
                ok = answer.status_code not in DENIED and answer.status_code < 500
            else:
                expected = "403"
                ok = answer.status_code == 403
            if not ok:
                failures.append(f"{route.name} as {kind}: {answer.status_code}, want {expected}")
            if answer.status_code in DENIED:
                body = answer.json()
                assert set(body["error"]) >= {"code", "message", "hint"}, body
    assert not failures, "\n".join(failures)
