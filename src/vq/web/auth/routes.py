"""Sign-in and sign-out of the console, and ``GET /api/v1/whoami``.

* ``GET /login`` — the form (plain HTML, no JavaScript needed); ``?next=`` is kept.
* ``POST /login`` — form fields ``username``, ``password``, ``next``; or ``token``
  holding the admin web token, which opens an admin session (how an operator signs in
  on a console that has no accounts). Success: ``303`` to ``next`` when it is a
  same-site path (starts with ``/``, not ``//``), else ``/``, with the ``vq_session``
  cookie (HttpOnly, SameSite=Strict, Path=/, Max-Age 12 h; Secure over https). Failure:
  the form again with the generic "invalid credentials" and status 401 — the answer is
  the same whether the user exists or not.
* ``POST /logout`` — clears the cookie, ``303`` to ``/login``.
* ``GET /api/v1/whoami`` — who the caller is and what it may do (never a secret).

Handlers are plain ``def``: scrypt and file reads run in the threadpool.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import NotRequired, TypedDict

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from vq.errors import ConfigError
from vq.web.auth.accounts import any_accounts, authenticate
from vq.web.auth.guard import ADMIN_TOKEN_NAME
from vq.web.auth.principal import NEEDS
from vq.web.auth.sessions import (
    COOKIE_NAME,
    MAX_AGE,
    SessionClaims,
    load_key,
    new_session,
    sign,
    token_fingerprint,
)
from vq.web.auth.tokens import read_admin_token
from vq.web.deps import principal_of, web_config
from vq.web.errors import ApiError
from vq.web.pages.render import render

__all__ = ["router", "safe_next"]

log = logging.getLogger("vq.web.auth")

router = APIRouter()

INVALID = "invalid credentials"
_MAX_NEXT = 2048


def safe_next(value: str | None) -> str:
    """``value`` when it is a same-site path, else ``/`` (no open redirects)."""
    if not value or len(value) > _MAX_NEXT or not value.startswith("/"):
        return "/"
    if value.startswith("//") or "\\" in value:
        return "/"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return "/"
    return value


def _signed_in_as(request: Request) -> str:
    try:
        principal = principal_of(request)
    except ApiError:  # a bad bearer header does not stop the sign-in page
        return ""
    return principal.name if principal.kind == "session" else ""


def _page(
    request: Request, *, target: str, error: str = "", username: str = "", status: int = 200
) -> HTMLResponse:
    context = {
        "next": target,
        "error": error,
        "username": username,
        "accounts_exist": any_accounts(web_config(request).config_root),
        "signed_in": _signed_in_as(request),
    }
    return render(request, "login.html", context, status=status)


def _signed_in(request: Request, key: bytes, claims: SessionClaims, target: str) -> Response:
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE_NAME,
        sign(key, claims),
        max_age=MAX_AGE,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/login", include_in_schema=False, response_class=HTMLResponse)
def login_form(request: Request, next: str = "/") -> HTMLResponse:
    return _page(request, target=safe_next(next))


@router.post("/login", include_in_schema=False, response_model=None)
def login(
    request: Request,
    username: str = Form(""),
    password: str = Form(""),
    token: str = Form(""),
    next: str = Form("/"),
) -> Response:
    root = web_config(request).config_root
    target = safe_next(next)
    now = time.time()
    shown = username[:64]
    if token:
        try:
            admin = read_admin_token(root)
        except ConfigError as exc:
            log.warning("token sign-in refused: %s", exc.message)
            return _page(request, target=target, error=exc.message, status=500)
        if admin is not None and hmac.compare_digest(token.encode(), admin.encode()):
            key = load_key(root)
            claims = new_session(
                ADMIN_TOKEN_NAME, "admin", now, token_fingerprint=token_fingerprint(key, admin)
            )
            return _signed_in(request, key, claims, target)
        return _page(request, target=target, error=INVALID, username=shown, status=401)
    if username and password:
        account = authenticate(root, username, password)
        if account is not None:
            claims = new_session(account.username, account.role, now)
            return _signed_in(request, load_key(root), claims, target)
    return _page(request, target=target, error=INVALID, username=shown, status=401)


@router.post("/logout", include_in_schema=False)
def logout() -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")
    return response


class WhoAmI(TypedDict):
    """``GET /api/v1/whoami``: the caller (a scoped token adds its id and limits)."""

    kind: str
    name: str
    role: str | None
    grants: list[str]
    token_id: NotRequired[str | None]
    profiles: NotRequired[list[str]]
    programs: NotRequired[list[str]]


@router.get("/api/v1/whoami", tags=["auth"], response_model=None)
def whoami(request: Request) -> WhoAmI:
    """The caller: kind, name, role, what it may do and (scoped tokens) its limits."""
    principal = principal_of(request)
    body: WhoAmI = {
        "kind": principal.kind,
        "name": principal.name,
        "role": principal.role,
        "grants": [need for need in NEEDS if principal.can(need)],
    }
    if principal.kind == "scoped_token":
        body["token_id"] = principal.token_id
        body["profiles"] = sorted(principal.profiles)
        body["programs"] = sorted(principal.programs)
    return body
