"""Request body size limits, per path, enforced before any route reads the body.

:class:`BodyLimitMiddleware` (pure ASGI) refuses a request body larger than its path's
limit with ``413`` and the standard error body (``code: too-large``). A declared
``Content-Length`` over the limit is refused without reading; a body without one
(chunked) is read up to the limit + 1 byte and refused as soon as it exceeds it, else
replayed to the app unchanged.

The table, first match wins (``method`` None = any method):

=========  ===========================  ============================================
method     path                         limit
=========  ===========================  ============================================
any        ``/api/v1/uploads`` and      none here: the uploads routes stream and cap
           below                        their bodies themselves (``upload_max_bytes``)
POST       ``/api/v1/jobs`` (exactly)   none here: submit enforces its own cap
                                        (``inline_max_bytes``)
any        ``/api/v1/`` and below       :data:`DEFAULT_LIMIT` (1 MiB)
any        anything else (pages, auth)  :data:`DEFAULT_LIMIT` (1 MiB)
=========  ===========================  ============================================

Add a row to :data:`RULES` for a route that needs another cap; keep exemptions narrow.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from vq.web.errors import error_body

__all__ = ["DEFAULT_LIMIT", "RULES", "BodyLimitMiddleware", "Rule", "limit_for"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The body cap of every route not listed otherwise in :data:`RULES`.
DEFAULT_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class Rule:
    """``limit`` (None = not enforced here) for ``path`` (exact, or a prefix with ``prefix``)."""

    path: str
    limit: int | None
    method: str | None = None
    prefix: bool = False

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and method != self.method:
            return False
        if self.prefix:
            return path == self.path or path.startswith(self.path.rstrip("/") + "/")
        return path.rstrip("/") == self.path


RULES: tuple[Rule, ...] = (
    Rule("/api/v1/uploads", None, prefix=True),
    Rule("/api/v1/jobs", None, method="POST"),
)


def limit_for(method: str, path: str) -> int | None:
    """The body limit of a request (None: the route enforces its own)."""
    for rule in RULES:
        if rule.matches(method, path):
            return rule.limit
    return DEFAULT_LIMIT


class BodyLimitMiddleware:
    """Refuse oversized request bodies with 413 (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(str(scope.get("method", "GET")), str(scope.get("path", "")))
        if limit is None:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None:
            if declared > limit:
                await _refuse(send, limit)
                return
            await self.app(scope, receive, send)
            return
        # No Content-Length (chunked or none): read up to the limit, then replay.
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([], message, receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _refuse(send, limit)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], None, receive), send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(queued: list[Message], last: Message | None, receive: Receive) -> Receive:
    pending = [*queued, *([last] if last is not None else [])]

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def _refuse(send: Send, limit: int) -> None:
    payload = json.dumps(
        error_body(
            "too-large",
            f"the request body is larger than {limit} bytes",
            "send a smaller body",
        )
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
