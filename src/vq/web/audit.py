"""The console's audit trail: one line in ``<state-root>/fleet-audit.jsonl`` per mutation.

Every POST to ``/api/v1/...`` or ``/actions/...`` (kill, pause, resume, resubmit, drain,
undrain, cleanup, submit, upload — through the API or the pages) is recorded as its
answer starts (before the caller can read it), refused or not, with who asked:

``{"ts", "actor", "kind", "role", "action", "job_id", "status", "outcome", "client"}``,
plus ``host`` for a fleet action (``POST /api/v1/fleet/jobs/HOST/ID/ACTION`` or
``/fleet/actions/jobs/HOST/ID/ACTION``)

* ``actor``/``kind``/``role`` come from the request's resolved
  :class:`~vq.web.auth.principal.Principal` (``anonymous`` when none was resolved);
* ``outcome`` is ``ok`` (2xx/3xx), ``refused`` (401/403/429), ``unknown`` (504: a fleet
  action sent over SSH whose answer was lost) or ``error`` (anything else);
* a handler may name the outcome itself (``request.state.audit_outcome``), e.g. a form
  post answered 303 whose action failed;
* a fleet kill asked to resubmit adds ``resubmit: true`` and ``resubmitted`` (the new
  job's id, null when the resubmit did not answer one): ``request.state.audit_extra``;
* never a token, password, request body or server path.

Admins read it on ``/audit`` (§7.3). Appends are best-effort (an audit write failure
never fails the request) and atomic per line (``O_APPEND``), so several web processes
may share the file.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vq._fs import append_line

__all__ = ["AuditMiddleware", "describe", "describe_fleet"]


_JOB_ACTION = re.compile(
    r"^/(?:api/v1|actions)/jobs/(?P<id>[^/]+)/(?P<action>kill|pause|resume|resubmit)$"
)
_OTHER_ACTIONS: dict[str, str] = {
    "/api/v1/jobs": "submit",
    "/api/v1/uploads": "upload",
    "/api/v1/jobs/cleanup": "cleanup",
    "/actions/queue/cleanup": "cleanup",
    "/api/v1/queue/drain": "drain",
    "/actions/queue/drain": "drain",
    "/api/v1/queue/undrain": "undrain",
    "/actions/queue/undrain": "undrain",
}
_FLEET_ACTION = re.compile(
    r"^/(?:api/v1/fleet|fleet/actions)/jobs/(?P<host>[^/]+)/(?P<id>[^/]+)/(?P<action>[^/]+)$"
)
_SAFE_ID = re.compile(r"^[0-9a-f]{12}$")
_SAFE_HOST = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_FLEET_VERBS = frozenset({"kill", "pause", "resume", "resubmit"})


class AuditRecord(TypedDict, total=False):
    """One line of the console's audit log: who did what to which job (and on which
    fleet host), the HTTP status and its outcome; a kill adds what it resubmitted."""

    ts: str
    actor: str
    kind: str
    role: str | None
    action: str
    job_id: str | None
    host: str
    status: int
    outcome: str
    client: str | None
    resubmit: bool
    resubmitted: str | None


def describe(method: str, path: str) -> tuple[str, str | None] | None:
    """``(action, job_id)`` of an audited request, or None for one that is not audited."""
    described = describe_fleet(method, path)
    if described is not None:
        return described[0], described[1]
    if method != "POST":
        return None
    action = _OTHER_ACTIONS.get(path.rstrip("/") or "/")
    if action is not None:
        return action, None
    match = _JOB_ACTION.match(path)
    if match is None:
        return None
    job_id = match.group("id")
    return match.group("action"), job_id if _SAFE_ID.match(job_id) else "(invalid id)"


def describe_fleet(method: str, path: str) -> tuple[str, str, str] | None:
    """``(action, job_id, host)`` of a fleet action request, or None for another one."""
    match = _FLEET_ACTION.match(path) if method == "POST" else None
    if match is None:
        return None
    job_id, host, action = match.group("id"), match.group("host"), match.group("action")
    return (
        action if action in _FLEET_VERBS else "(invalid action)",
        job_id if _SAFE_ID.match(job_id) else "(invalid id)",
        host if _SAFE_HOST.match(host) else "(invalid host)",
    )


def _outcome(status: int) -> str:
    if status < 400:
        return "ok"
    if status in (401, 403, 429):
        return "refused"
    if status == 504:
        return "unknown"
    return "error"


class AuditMiddleware:
    """Pure ASGI middleware (no buffering, so streaming and long-polls are untouched)."""

    def __init__(self, app: ASGIApp, log_path: Path) -> None:
        """``log_path``: the state root's ``fleet_audit_log``."""
        self.app = app
        self.path = log_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        described = describe(scope["method"], scope["path"])
        if described is None:
            await self.app(scope, receive, send)
            return
        recorded = False

        async def capture(message: Message) -> None:
            # The record is written before the answer leaves, so a caller that has its
            # answer can already read the audit line for it.
            nonlocal recorded
            if message["type"] == "http.response.start" and not recorded:
                recorded = True
                self._record(scope, described, int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            if not recorded:
                self._record(scope, described, 500)

    def _record(self, scope: Scope, described: tuple[str, str | None], status: int) -> None:
        action, job_id = described
        fleet = describe_fleet(scope["method"], scope["path"])
        state = scope.get("state") or {}
        principal = state.get("principal")
        client = scope.get("client")
        record: AuditRecord = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "actor": getattr(principal, "name", "anonymous"),
            "kind": getattr(principal, "kind", "anonymous"),
            "role": getattr(principal, "role", None),
            "action": action,
            "job_id": job_id,
        }
        if fleet is not None:
            record["host"] = fleet[2]
        record["status"] = status
        record["outcome"] = state.get("audit_outcome") or _outcome(status)
        record["client"] = client[0] if client else None
        extra = state.get("audit_extra") or {}  # what a handler added (a kill's resubmit)
        if "resubmit" in extra:
            record["resubmit"] = extra["resubmit"]
        if "resubmitted" in extra:
            record["resubmitted"] = extra["resubmitted"]
        if self.path.parent.is_dir():
            append_line(self.path, json.dumps(record, separators=(",", ":")), log_file=True)
