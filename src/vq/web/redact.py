"""No API body carries an absolute server path (docs/agents.md).

:func:`redact_paths` is pure: it rewrites a JSON-able value so every server path becomes
a placeholder form, the way error messages already read. Path fields (``workspace``,
``cwd``, ``workdir``, ``archive_path``, ``workspace_source``, ``path``) under a known root
become ``<state-root>/jobs/<id>``, ``<archive-dir>/NAME.tar.bz2`` or ``<config-root>/…``;
any other absolute path in those fields becomes ``<server-path>``; other strings get the
known roots replaced where they occur. :class:`RedactPathsMiddleware` applies it to every
JSON answer under ``/api/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from starlette.types import Message, Receive, Scope, Send

__all__ = ["PATH_FIELDS", "RedactPathsMiddleware", "redact_paths"]

#: Fields whose value is a server path when it is absolute.
PATH_FIELDS = frozenset({"workspace", "cwd", "workdir", "archive_path", "workspace_source", "path"})
SERVER_PATH = "<server-path>"


def _replace_roots(text: str, roots: Sequence[tuple[str, str]]) -> str:
    for root, name in roots:
        text = text.replace(root, name)
    return text


def _redact_path(value: str, roots: Sequence[tuple[str, str]]) -> str:
    for root, name in roots:
        if value == root or value.startswith(root.rstrip("/") + "/"):
            return name + value[len(root.rstrip("/")) :]
    return SERVER_PATH if value.startswith("/") else value


def redact_paths(value: Any, roots: Sequence[tuple[str, str]]) -> Any:
    """``value`` with server paths replaced. ``roots`` are (absolute path, placeholder)
    pairs, most specific first (``/srv/q/archive`` before ``/srv/q``)."""
    if isinstance(value, dict):
        return {
            key: _redact_path(item, roots)
            if key in PATH_FIELDS and isinstance(item, str)
            else redact_paths(item, roots)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact_paths(item, roots) for item in value]
    if isinstance(value, str) and "/" in value:
        return _replace_roots(value, roots)
    return value


class RedactPathsMiddleware:
    """Rewrite JSON answers under ``/api/`` with :func:`redact_paths` (OpenAPI excluded)."""

    def __init__(self, app: Any, roots: Sequence[tuple[str | os.PathLike[str], str]]) -> None:
        self.app = app
        self.roots = sorted(
            ((os.fspath(path), name) for path, name in roots),
            key=lambda r: len(r[0]),
            reverse=True,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not path.startswith("/api/") or path.endswith(".json"):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def buffered(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                if not headers.get(b"content-type", b"").startswith(b"application/json"):
                    start = None
                    await send(message)
                    return
                start = message
                return
            if start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(chunks)
            try:
                body = json.dumps(
                    redact_paths(json.loads(body), self.roots), separators=(",", ":")
                ).encode()
            except ValueError:
                pass  # not JSON after all: pass it on untouched
            kept = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
            kept.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": kept})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, buffered)
