"""The ``Host`` header check that defeats DNS rebinding (§7.1).

A page on ``evil.example`` whose name is re-pointed at 127.0.0.1 makes the browser send
``Host: evil.example:8477`` to the console. Only the loopback names (``localhost``,
``127.0.0.1`` and the rest of 127/8, ``[::1]``, any port) and the names the operator
configured (``[web] allowed_hosts``, ``vq web serve --allowed-host``) are served; any other
Host — or none — is answered 400 before routing (a JSON error under ``/api``, a plain page
elsewhere). :func:`host_allowed` is pure; :class:`HostCheckMiddleware` is the ASGI wrapper.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.types import Receive, Scope, Send

from vq.web.binding import is_loopback

__all__ = [
    "HostCheckMiddleware",
    "configured_hosts",
    "fleet_configured",
    "host_allowed",
    "host_name",
    "normalize_host",
]


def normalize_host(name: str) -> str:
    """A configured host name in the form :func:`host_name` compares: lower case, no
    trailing dot, IPv6 without brackets."""
    return name.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def host_name(header: str) -> str | None:
    """The host part of a ``Host`` header value (port and IPv6 brackets removed), or
    None when the value is malformed."""
    value = header.strip().lower()
    if not value or any(c in value for c in " /\\@?#"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end == -1 or (value[end + 1 :] and not value[end + 1 :].startswith(":")):
            return None
        host, rest = value[1:end], value[end + 2 :]
    else:
        host, _, rest = value.partition(":")
    if rest and not (rest.isascii() and rest.isdigit()):
        return None
    return host.rstrip(".") or None


def host_allowed(header: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request carrying ``Host: header`` may be served."""
    if header is None:
        return False
    host = host_name(header)
    if host is None:
        return False
    return is_loopback(host) or host in {normalize_host(name) for name in allowed}


class HostCheckMiddleware:
    """Refuse requests whose Host is neither loopback nor configured (400)."""

    def __init__(self, app: Any, allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(normalize_host(name) for name in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        raw = headers.get(b"host")
        header = raw.decode("latin-1") if raw is not None else None
        if host_allowed(header, self.allowed):
            await self.app(scope, receive, send)
            return
        message = "this console answers only to its own host names"
        hint = "open it as http://127.0.0.1:PORT/, or add the name to [web] allowed_hosts"
        if str(scope.get("path", "")).startswith("/api"):
            body = json.dumps(
                {"error": {"code": "bad-host", "message": message, "hint": hint}}
            ).encode()
            kind = b"application/json"
        else:
            body = f"400 Bad Request: {message}.\n{hint}\n".encode()
            kind = b"text/plain; charset=utf-8"
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", kind),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def configured_hosts(flags: Iterable[str] = ()) -> tuple[str, ...]:
    """The allowed host names: ``[web] allowed_hosts`` of the configuration, then
    ``flags`` (``--allowed-host``), normalized and deduplicated. A broken configuration
    raises its ConfigError (the server does not start on it)."""
    from vq.config.settings import load_settings

    names = [*load_settings().web.allowed_hosts, *flags]
    return tuple(dict.fromkeys(normalize_host(name) for name in names if name.strip()))


def fleet_configured() -> bool:
    """``[web] fleet`` of the configuration (a broken configuration raises ConfigError)."""
    from vq.config.settings import load_settings

    return load_settings().web.fleet
