"""Security headers on every answer of the console (pages set their own stricter ones).

Defaults added where a response has not set the header itself: ``X-Content-Type-Options:
nosniff``, ``X-Frame-Options: DENY``, ``Referrer-Policy: same-origin``, ``Cache-Control:
no-store`` (static assets excepted: they may be cached) and a ``Content-Security-Policy``
that allows nothing (:data:`API_CSP`), right for JSON. ``/api/v1/docs`` sets
:data:`DOCS_CSP` with the hash of its one inline script.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from starlette.types import Message, Receive, Scope, Send

__all__ = ["API_CSP", "SecurityHeadersMiddleware", "docs_csp"]

API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
_DEFAULTS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"content-security-policy", API_CSP.encode()),
)
_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def docs_csp(html: str) -> str:
    """The CSP of the Swagger UI page ``html``: own files, its inline script by hash."""
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
        for s in _SCRIPT.findall(html)
    )
    return (
        f"default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )


class SecurityHeadersMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cacheable = str(scope.get("path", "")).startswith("/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {key.lower() for key, _ in headers}
                extra = [(k, v) for k, v in _DEFAULTS if k not in present]
                if not cacheable and b"cache-control" not in present:
                    extra.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers + extra}
            await send(message)

        await self.app(scope, receive, with_headers)
