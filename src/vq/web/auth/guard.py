"""Resolve a request to a :class:`Principal` and enforce what a route needs.

Rules (§7.2, §7.3, §10.4):

* ``Authorization: Bearer <admin token>`` → admin-equivalent.
* no credentials and no console account exists → anonymous reader (reads open);
  mutations then need the bearer token (401).
* a principal without the need → 403 with the reason; no credentials → 401.

TODO(auth helper): sessions, accounts, scoped tokens, CSRF.
"""

from __future__ import annotations

import hmac

from fastapi import Request

from vq.web.auth.principal import Need, Principal
from vq.web.context import WebConfig
from vq.web.errors import ApiError

__all__ = ["enforce", "resolve"]


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def _admin_token(config: WebConfig) -> str | None:
    path = config.config_root / "web-token"
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def resolve(request: Request, config: WebConfig) -> Principal:
    presented = _bearer(request)
    if presented is not None:
        expected = _admin_token(config)
        if expected is not None and hmac.compare_digest(presented.encode(), expected.encode()):
            return Principal("admin_token", "admin-token", role="admin")
        raise ApiError(401, "unauthorized", "the bearer token is not valid")
    return Principal("anonymous", "anonymous", role="viewer")


def enforce(principal: Principal, need: Need) -> None:
    if principal.can(need):
        return
    if principal.kind == "anonymous":
        raise ApiError(
            401,
            "unauthorized",
            f"this action needs credentials ({need})",
            hint="send Authorization: Bearer <token> (see `vq web init-token`) or sign in",
        )
    raise ApiError(403, "forbidden", f"{principal.name} may not {need}")
