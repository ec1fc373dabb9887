"""FastAPI dependencies shared by every route: the config, the caller, CSRF.

* ``Depends(need("control"))`` resolves the caller once per request, enforces the need
  (401/403 with the standard error body) and returns the
  :class:`~vq.web.auth.principal.Principal`. For a cookie-authenticated request with an
  unsafe method (POST, PUT, PATCH, DELETE) it also checks the CSRF token, taken from the
  ``X-CSRF-Token`` header or else the ``csrf_token`` form field; bearer-authenticated
  requests are exempt (a browser never adds that header on its own).
* Pages embed :func:`csrf_token` in every form as ``csrf_token``; form handlers that do
  not use ``need`` call :func:`check_csrf` with the submitted value (403 ``csrf``).
* HTML pages call :func:`login_redirect_needed` and redirect to :func:`login_location`
  when it is true (console accounts exist and the caller is not signed in).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import quote

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from vq.web.auth import guard
from vq.web.auth.guard import enforce, resolve
from vq.web.auth.principal import Need, Principal
from vq.web.auth.sessions import csrf_for, csrf_matches, load_key
from vq.web.context import WebConfig
from vq.web.errors import ApiError

__all__ = [
    "CSRF_FIELD",
    "CSRF_HEADER",
    "check_csrf",
    "csrf_token",
    "login_location",
    "login_redirect_needed",
    "need",
    "principal_of",
    "web_config",
]

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def web_config(request: Request) -> WebConfig:
    config: WebConfig = request.app.state.vq
    return config


def principal_of(request: Request) -> Principal:
    """The caller (cached on the request so several dependencies resolve it once)."""
    cached: Principal | None = getattr(request.state, "principal", None)
    if cached is None:
        cached = resolve(request, web_config(request))
        request.state.principal = cached
    return cached


def csrf_token(request: Request) -> str:
    """The CSRF token to embed in forms for this caller ("" when not cookie-signed-in)."""
    principal = principal_of(request)
    if principal.kind != "session" or principal.session_id is None:
        return ""
    return csrf_for(load_key(web_config(request).config_root), principal.session_id)


def check_csrf(request: Request, submitted: str | None) -> None:
    """Refuse a cookie-authenticated request whose CSRF token is missing or wrong.

    ``submitted`` is the form's ``csrf_token`` value; when None the ``X-CSRF-Token``
    header is used. Bearer and anonymous callers are exempt. Raises ``ApiError(403,
    "csrf")``.
    """
    principal = principal_of(request)
    if principal.kind != "session" or principal.session_id is None:
        return
    if submitted is None:
        submitted = request.headers.get(CSRF_HEADER)
    key = load_key(web_config(request).config_root)
    if not csrf_matches(key, principal.session_id, submitted):
        raise ApiError(
            403,
            "csrf",
            "this form is missing its CSRF token, or the token belongs to another session",
            hint="reload the page and submit the form again",
        )


async def _submitted_csrf(request: Request) -> str | None:
    header = request.headers.get(CSRF_HEADER)
    if header is not None:
        return header
    if request.headers.get("content-type", "").startswith(_FORM_TYPES):
        value = (await request.form()).get(CSRF_FIELD)
        return value if isinstance(value, str) else None
    return None


def need(what: Need) -> Callable[[Request], Awaitable[Principal]]:
    async def dependency(request: Request) -> Principal:
        principal = await run_in_threadpool(principal_of, request)
        if request.method not in _SAFE_METHODS and principal.kind == "session":
            submitted = await _submitted_csrf(request)
            await run_in_threadpool(check_csrf, request, submitted)
        enforce(principal, what)
        return principal

    dependency.__name__ = f"need_{what}"
    return dependency


def login_redirect_needed(request: Request) -> bool:
    """Whether an HTML page should redirect this caller to the sign-in page."""
    return guard.login_redirect_needed(principal_of(request))


def login_location(request: Request) -> str:
    """``/login?next=<this page>`` (the sign-in page returns here afterwards)."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return "/login?next=" + quote(target, safe="/")
