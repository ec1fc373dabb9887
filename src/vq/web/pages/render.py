"""Rendering console pages: one Jinja2 environment, the common context, the page guard.

Contracts:

* Every template is autoescaped (``autoescape=True`` for all names, not only ``.html``);
  nothing user-supplied is marked safe anywhere. JSON for charts is embedded in
  ``<script type="application/json">`` through the ``json_script`` filter, which escapes
  ``<``, ``>`` and ``&`` so a job name cannot close the tag.
* Every HTML answer carries :data:`CSP` (scripts and styles from ``'self'`` only, no
  inline script), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy``.
* :func:`render` adds ``principal``, ``csrf_token`` and ``can_control`` to the context, so
  any template extending ``base.html`` (``login.html`` included) gets the header right.
* :func:`reader` is the read guard of pages and fragments: a caller who may not read and
  is not signed in is sent to ``/login?next=<path>`` (303; for an htmx request, 401 with
  ``HX-Redirect``); a signed-in caller without ``read`` gets 403.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup

from vq.web import deps
from vq.web.auth.principal import Principal
from vq.web.errors import ApiError

__all__ = [
    "CSP",
    "SECURITY_HEADERS",
    "is_htmx",
    "login_redirect",
    "reader",
    "render",
    "render_error",
    "when",
]

TEMPLATES_DIR = Path(__file__).parent / "templates"

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def _json_script(value: Any) -> Markup:
    """JSON safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(value, separators=(",", ":"), default=str)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return Markup(text)  # noqa: S704 - every markup-significant character is escaped above


def _when(value: Any) -> str:
    """An ISO time as ``YYYY-MM-DD HH:MM:SS`` UTC ("" for none)."""
    if not value:
        return ""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: Any) -> str:
    """``1h 02m``, ``3m 05s``, ``42s`` ("" for none)."""
    if seconds is None or seconds == "":
        return ""
    total = int(float(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def _mem(mb: Any) -> str:
    if mb is None or mb == "":
        return ""
    value = float(mb)
    return f"{value / 1024:.1f} GB" if value >= 1024 else f"{value:.0f} MB"


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,
)
ENV.filters["json_script"] = _json_script
ENV.filters["when"] = _when
when = _when
ENV.filters["duration"] = _duration
ENV.filters["mem"] = _mem
ENV.filters["shjoin"] = lambda argv: shlex.join(str(a) for a in argv or [])
ENV.globals["quote"] = lambda value: quote(str(value), safe="")


def job_urls(job_id: Any, host: Any = None) -> dict[str, str | None]:
    """Where the parts of a job page live: the single-host console's for ``host`` None
    (or undefined in a template), the fleet console's for a host name.

    ``page``, ``live`` (the live fragment), ``actions`` (the buttons fragment), ``act``
    (the action form prefix: ``act + "/kill"``), ``samples`` (the JSON the chart polls),
    ``log`` (the log fragment, ``?stream=`` added) and ``download`` (a log's download
    prefix, None on the fleet).
    """
    job = quote(str(job_id), safe="")
    if not host:
        return {
            "page": f"/jobs/{job}",
            "live": f"/fragments/jobs/{job}/live",
            "actions": f"/fragments/jobs/{job}/actions",
            "act": f"/actions/jobs/{job}",
            "samples": f"/api/v1/jobs/{job}/samples",
            "log": f"/fragments/jobs/{job}/log",
            "download": f"/jobs/{job}/logs",
        }
    where = f"{quote(str(host), safe='')}/{job}"
    return {
        "page": f"/fleet/jobs/{where}",
        "live": f"/fleet/fragments/jobs/{where}/live",
        "actions": f"/fleet/fragments/jobs/{where}/actions",
        "act": f"/fleet/actions/jobs/{where}",
        "samples": f"/api/v1/fleet/jobs/{where}/samples",
        "log": f"/fleet/fragments/jobs/{where}/log",
        "download": None,
    }


ENV.globals["job_urls"] = job_urls


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request", "").lower() == "true"


def _principal(request: Request) -> Principal | None:
    """The caller, or None when its credentials are refused (the page still renders)."""
    try:
        return deps.principal_of(request)
    except ApiError:
        return None


def render(
    request: Request,
    template: str,
    context: Mapping[str, object] | None = None,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """Render ``template`` with the common context and the security headers."""
    principal = _principal(request)
    values: dict[str, Any] = {
        "request": request,
        "principal": principal,
        "csrf_token": deps.csrf_token(request) if principal is not None else "",
        "can_control": principal is not None and principal.can("control"),
        "nav": "",
    }
    values.update(context or {})
    body = ENV.get_template(template).render(values)
    response = HTMLResponse(body, status_code=status)
    response.headers.update(SECURITY_HEADERS)
    if headers:
        response.headers.update(headers)
    return response


def render_error(request: Request, status: int, message: str) -> HTMLResponse:
    """A console error page (or a bare fragment for htmx) with ``message`` escaped."""
    if is_htmx(request):
        return render(request, "_outcome.html", {"ok": False, "message": message}, status=status)
    return render(request, "error.html", {"status": status, "message": message}, status=status)


def login_redirect(request: Request) -> Response:
    """Send an unsigned caller to the login page, back to this page afterwards."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if is_htmx(request):
        page = request.headers.get("hx-current-url") or target
        return Response(
            status_code=401, headers={"HX-Redirect": "/login?next=" + quote(_local(page), safe="")}
        )
    return RedirectResponse("/login?next=" + quote(target, safe=""), status_code=303)


def _local(url: str) -> str:
    """The path and query of a same-site URL (the host part of HX-Current-URL dropped)."""
    if url.startswith("/"):
        return url
    _, _, rest = url.partition("://")
    _, slash, path = rest.partition("/")
    return "/" + path if slash else "/"


def reader(request: Request) -> Principal | Response:
    """The caller if it may read, else the response that refuses it (redirect or 403)."""
    principal = deps.principal_of(request)
    if deps.login_redirect_needed(request):
        return login_redirect(request)
    if principal.can("read"):
        return principal
    return render_error(request, 403, f"{principal.name} may not read the queue")
