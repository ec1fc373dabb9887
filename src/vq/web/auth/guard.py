"""Resolve a request to a :class:`Principal` and enforce what a route needs.

Rules (§7.2, §7.3, §10.4), first match wins:

1. ``Authorization: Bearer vqt_<id>_<secret>`` → that scoped token (exactly its
   scopes); unknown, wrong, expired or revoked → 401.
2. ``Authorization: Bearer <admin token>`` → ``admin_token`` (admin-equivalent); any
   other bearer value → 401. An admin token file with group/other permission bits is a
   ConfigError (500, naming the ``chmod 600`` fix, never the token).
3. A valid, unexpired ``vq_session`` cookie → ``session`` with the account's *current*
   role from ``web-users.json`` (a removed account is signed out at once; a changed role
   applies at once). A session opened with the admin token stays admin only while that
   token is unchanged. A bad cookie counts as no cookie.
4. Otherwise ``anonymous``: role ``viewer`` (reads open) while no console account exists;
   no grants at all once one does (reads then answer 401, pages redirect to /login).

:func:`enforce` answers 401 when an anonymous caller lacks the need and 403 with the
reason otherwise (``viewer accounts cannot control jobs``, ``token 'x' lacks scope
submit``). Only the admin role and the admin token have ``admin``.

Reads small files per request (no caching: changes apply at once); call it from a
threadpool, never on the event loop.
"""

from __future__ import annotations

import hmac
import logging
import time
from datetime import UTC, datetime

from fastapi import Request

from vq.web.auth.accounts import any_accounts, current_role
from vq.web.auth.principal import Need, Principal
from vq.web.auth.scoped import PREFIX, TokenRejected, authenticate_token
from vq.web.auth.sessions import COOKIE_NAME, load_key, token_fingerprint, verify
from vq.web.auth.tokens import matches_admin_token, read_admin_token
from vq.web.context import WebConfig
from vq.web.errors import ApiError

__all__ = ["ADMIN_TOKEN_NAME", "enforce", "login_redirect_needed", "resolve"]

log = logging.getLogger("vq.web.auth")

#: Display name of the admin token, and of browser sessions opened with it.
ADMIN_TOKEN_NAME = "admin-token"  # noqa: S105 - a display name, not a secret

_ACTIONS: dict[str, str] = {
    "read": "read job data",
    "control": "control jobs",
    "submit": "submit jobs",
    "admin": "use admin functions",
}
_SIGN_IN_HINT = (
    "sign in at /login, or send Authorization: Bearer <token> "
    "(see `vq web init-token` and `vq web token create`)"
)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise ApiError(
            401,
            "unauthorized",
            "the Authorization header must be 'Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return value.strip()


def _unauthorized(message: str) -> ApiError:
    return ApiError(
        401, "unauthorized", message, hint=_SIGN_IN_HINT, headers={"WWW-Authenticate": "Bearer"}
    )


def _bearer_principal(config: WebConfig, presented: str, now: float) -> Principal:
    if presented.startswith(PREFIX + "_"):
        try:
            moment = datetime.fromtimestamp(now, UTC)
            token = authenticate_token(config.config_root, presented, moment)
        except TokenRejected as exc:
            raise _unauthorized(str(exc)) from None
        return token.principal()
    if matches_admin_token(config.config_root, presented):
        return Principal("admin_token", ADMIN_TOKEN_NAME, role="admin")
    raise _unauthorized("the bearer token is not valid")


def _session_principal(config: WebConfig, cookie: str, now: float) -> Principal | None:
    key = load_key(config.config_root)
    claims = verify(key, cookie, now)
    if claims is None:
        return None
    if claims.token_fingerprint is not None:
        admin = read_admin_token(config.config_root)
        if admin is None or not hmac.compare_digest(
            token_fingerprint(key, admin), claims.token_fingerprint
        ):
            return None
        return Principal("session", ADMIN_TOKEN_NAME, role="admin", session_id=claims.sid)
    role = current_role(config.config_root, claims.user)
    if role is None:
        return None
    return Principal("session", claims.user, role=role, session_id=claims.sid)


def resolve(request: Request, config: WebConfig) -> Principal:
    """Who is asking (raises 401 for a bad bearer token; see the module rules)."""
    now = time.time()
    presented = _bearer(request)
    if presented is not None:
        return _bearer_principal(config, presented, now)
    cookie = request.cookies.get(COOKIE_NAME)
    if cookie:
        principal = _session_principal(config, cookie, now)
        if principal is not None:
            return principal
    if any_accounts(config.config_root):
        return Principal("anonymous", "anonymous", role=None)
    return Principal("anonymous", "anonymous", role="viewer")


def enforce(principal: Principal, need: Need) -> None:
    """Return if ``principal`` may ``need``; else raise 401 (anonymous) or 403 (reason)."""
    if principal.can(need):
        return
    action = _ACTIONS.get(need, need)
    if principal.kind == "anonymous":
        raise _unauthorized(f"sign in or send a bearer token to {action}")
    if principal.kind == "scoped_token":
        message = f"token {principal.name!r} lacks scope {need}"
        hint = "create a token with that scope: `vq web token create NAME --scope ...`"
    else:
        message = f"{principal.role} accounts cannot {action}"
        hint = "ask an admin for a role with that right (`vq web user add USER --role ...`)"
    raise ApiError(403, "forbidden", message, hint=hint)


def login_redirect_needed(principal: Principal) -> bool:
    """Whether an HTML page should send this caller to /login (anonymous, reads closed)."""
    return principal.kind == "anonymous" and not principal.can("read")
