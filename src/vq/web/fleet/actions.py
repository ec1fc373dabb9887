"""Fleet console form actions: ``POST /fleet/actions/jobs/{host}/{id}/{action}``.

``action`` is kill, pause, resume or resubmit. The rules are the single-host console's
(:mod:`vq.web.pages.actions`) plus the fleet gate (:func:`vq.web.fleet.control.fleet_writer`):
CSRF for a cookie session, ``control``, and fail-closed without any console account. A
kill needs its confirmation (the htmx dialog, or ``confirm=yes`` without JavaScript); its
``resubmit=yes`` field resubmits the killed job on the same host (the outcome links the
new job's page; the audit record carries ``resubmit`` and ``resubmitted``).
The outcome is shown as it came back from the host, including "outcome unknown" when
the SSH call failed after sending (with the host's state); htmx gets an inline
fragment, a plain form post a 303 back to the job page with a one-shot flash message.
"""

from __future__ import annotations

import json
import re

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from vq.errors import VqError
from vq.web.errors import ApiError, status_for
from vq.web.fleet.api import source_of
from vq.web.fleet.control import ACTIONS, fleet_writer, perform
from vq.web.fleet.shapes import ActionOutcome
from vq.web.pages.render import is_htmx, render, render_error
from vq.web.pages.routes import FLASH_COOKIE

__all__ = ["router"]

router = APIRouter(prefix="/fleet/actions", include_in_schema=False)

_HOST = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_JOB = re.compile(r"^[0-9a-f]{12}$")


def _describe(outcome: ActionOutcome) -> tuple[str, str | None]:
    """The outcome line, and the new job's page when one was resubmitted."""
    action, host, job_id, result = (
        outcome["action"],
        outcome["host"],
        outcome["id"],
        outcome["result"],
    )
    if action == "resubmit" and isinstance(result, dict):
        new = result.get("id")
        return f"Job {job_id} resubmitted on {host} as {new}.", f"/fleet/jobs/{host}/{new}"
    row = result[0] if isinstance(result, list) and result else {}
    state = row.get("state") if isinstance(row, dict) else None
    said = f" (now {state})" if state else ""
    message = f"{action.capitalize()} of job {job_id} on {host}: done{said}."
    new = outcome.get("resubmitted")
    if not new:
        return message, None
    return f"{message} Resubmitted as {new}.", f"/fleet/jobs/{host}/{new}"


def _answer(
    request: Request, back: str, message: str, ok: bool, status: int, link: str | None = None
) -> Response:
    request.state.audit_outcome = "ok" if ok else "unknown" if status == 504 else "error"
    if is_htmx(request):
        headers = {"HX-Trigger": "job-changed"} if ok else None
        context = {"ok": ok, "message": message, "link": link, "link_text": "open it"}
        return render(request, "_outcome.html", context, status=status, headers=headers)
    response = RedirectResponse(back, status_code=303)
    flash = json.dumps({"m": message, "ok": ok}, separators=(",", ":"))
    response.set_cookie(FLASH_COOKIE, flash, max_age=60, path="/", httponly=True, samesite="strict")
    return response


@router.post("/jobs/{host}/{job_id}/{action}")
def act(
    request: Request,
    host: str,
    job_id: str,
    action: str,
    csrf_token: str = Form(""),
    confirm: str = Form(""),
    resubmit: str = Form(""),
) -> Response:
    try:
        fleet_writer(request, csrf_token or None)
    except ApiError as exc:
        shown = f"{exc.message}: {exc.hint}" if exc.code == "fleet-writes-closed" else exc.message
        return render_error(request, exc.status, shown)
    if action not in ACTIONS:
        return render_error(request, 404, f"no fleet action named {action[:40]!r}")
    safe = _HOST.match(host) and _JOB.match(job_id)
    back = f"/fleet/jobs/{host}/{job_id}" if safe else "/fleet"
    if action == "kill" and confirm != "yes" and not is_htmx(request):
        return _answer(request, back, "Tick the confirmation box to kill the job.", False, 400)
    again = action == "kill" and resubmit == "yes"
    if again:
        request.state.audit_extra = {"resubmit": True}
    try:
        outcome = perform(source_of(request), host, job_id, action, resubmit=again)
    except VqError as exc:
        return _answer(request, back, exc.message, False, status_for(exc))
    if again:
        request.state.audit_extra = {"resubmit": True, "resubmitted": outcome["resubmitted"]}
    message, link = _describe(outcome)
    return _answer(request, back, message, True, 200, link)
