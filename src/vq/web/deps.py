"""FastAPI dependencies shared by every route: the config and the caller's principal.

Use ``Depends(need("control"))`` on a route; it resolves the caller once per request,
enforces the need (401/403 with the standard error body) and returns the
:class:`~vq.web.auth.principal.Principal`.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request

from vq.web.auth.guard import enforce, resolve
from vq.web.auth.principal import Need, Principal
from vq.web.context import WebConfig

__all__ = ["need", "principal_of", "web_config"]


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


def need(what: Need) -> Callable[[Request], Principal]:
    def dependency(request: Request) -> Principal:
        principal = principal_of(request)
        enforce(principal, what)
        return principal

    dependency.__name__ = f"need_{what}"
    return dependency
