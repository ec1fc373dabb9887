"""Console actions: HTML form posts under ``/actions/...`` that change the queue.

Routes (all ``POST``, form-encoded): ``/actions/jobs/{id}/kill`` (field ``resubmit=yes``
resubmits the killed job), ``.../pause``, ``.../resume``, ``.../resubmit``;
``/actions/queue/drain`` (``mode`` new|full, ``reason``), ``/actions/queue/undrain``,
``/actions/queue/cleanup`` (``older_than``: archive failed jobs that ended at least that
long ago, one of :data:`CLEANUP_AGES`; ``0`` is any age).

Contracts:

* Each action needs ``control`` and, for a cookie session, the form's ``csrf_token``
  (or the ``X-CSRF-Token`` header) — checked before anything is read or changed. A
  refusal is 401 (no credentials) or 403 (not allowed, or a bad CSRF token), as an HTML
  fragment for htmx and an HTML page otherwise.
* Destructive actions (kill, full drain, cleanup) need a confirmation: the htmx dialog
  (``hx-confirm``; the request then carries ``HX-Request``) or, without JavaScript, the
  form's ``confirm=yes`` checkbox. Unconfirmed, nothing happens.
* The work is done by :class:`vq.web.backend.Backend` (the same code as the CLI and the
  API). htmx requests get the outcome as an inline fragment (the service error's status
  on failure); plain form posts get ``303`` back to the page with a one-shot flash
  message in the ``vq_flash`` cookie.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from vq.errors import ConfigError, VqError
from vq.web import deps
from vq.web.auth.guard import enforce
from vq.web.errors import ApiError, status_for
from vq.web.pages.render import is_htmx, render, render_error
from vq.web.pages.routes import FLASH_COOKIE, backend

__all__ = ["router"]

router = APIRouter(prefix="/actions", include_in_schema=False)

#: Ages the cleanup form offers (anything else is refused).
CLEANUP_AGES = ("0", "1h", "1d", "7d", "14d", "30d")  # "0": any age
_MAX_REASON = 200


class Outcome:
    """What an action reports: one line, ok or not, and an optional link."""

    def __init__(
        self, message: str, *, ok: bool = True, status: int = 200, link: str | None = None
    ) -> None:
        self.message = message
        self.ok = ok
        self.status = status
        self.link = link


def _refusal(request: Request, csrf: str) -> Response | None:
    """None when the caller may control (and its CSRF token holds), else the refusal."""
    try:
        principal = deps.principal_of(request)
        deps.check_csrf(request, csrf or None)
        enforce(principal, "control")
    except ApiError as exc:
        return render_error(request, exc.status, exc.message)
    return None


def _answer(request: Request, outcome: Outcome, back: str) -> Response:
    if is_htmx(request):
        context = {
            "ok": outcome.ok,
            "message": outcome.message,
            "link": outcome.link,
            "link_text": "open it",
        }
        headers = {"HX-Trigger": "job-changed"} if outcome.ok else None
        return render(request, "_outcome.html", context, status=outcome.status, headers=headers)
    response = RedirectResponse(back, status_code=303)
    flash = json.dumps({"m": outcome.message, "ok": outcome.ok}, separators=(",", ":"))
    response.set_cookie(FLASH_COOKIE, flash, max_age=60, path="/", httponly=True, samesite="strict")
    return response


def _act(
    request: Request,
    csrf: str,
    back: str,
    work: Callable[[], Outcome],
    *,
    confirmed: bool | None = None,
    unconfirmed: str = "",
) -> Response:
    refused = _refusal(request, csrf)
    if refused is not None:
        return refused
    if confirmed is False and not is_htmx(request):
        return _answer(request, Outcome(unconfirmed, ok=False, status=400), back)
    try:
        outcome = work()
    except VqError as exc:
        status = status_for(exc)
        shown = status < 500 or isinstance(exc, ConfigError)  # the operator must fix it
        message = exc.message if shown else "the queue could not be changed just now"
        outcome = Outcome(message, ok=False, status=status)
    return _answer(request, outcome, back)


def _job_back(job_id: str) -> str:
    return f"/jobs/{job_id}" if len(job_id) == 12 and job_id.isalnum() else "/"


# --- job actions -------------------------------------------------------------------------
@router.post("/jobs/{job_id}/kill")
def kill(
    request: Request,
    job_id: str,
    csrf_token: str = Form(""),
    resubmit: str = Form(""),
    confirm: str = Form(""),
) -> Response:
    def work() -> Outcome:
        data = backend(request)
        result = data.kill(job_id)
        if result.get("already_killed"):
            message = f"Job {job_id} was already killed."
        else:
            message = f"Job {job_id} killed (it was {result.get('previous_state')})."
        if resubmit != "yes":
            return Outcome(message)
        new = data.resubmit(job_id)
        return Outcome(f"{message} Resubmitted as {new['id']}.", link=f"/jobs/{new['id']}")

    return _act(
        request,
        csrf_token,
        _job_back(job_id),
        work,
        confirmed=confirm == "yes",
        unconfirmed="Not killed: tick “Confirm kill” first.",
    )


def _pause_or_resume(request: Request, job_id: str, csrf: str, verb: str) -> Response:
    def work() -> Outcome:
        data = backend(request)
        result = data.pause(job_id) if verb == "pause" else data.resume(job_id)
        done = "paused" if verb == "pause" else "resumed"
        if result.get("changed", True):
            return Outcome(f"Job {job_id} {done} (now {result.get('state')}).")
        return Outcome(f"Job {job_id} was not {done}: it is {result.get('state')}.", ok=False)

    return _act(request, csrf, _job_back(job_id), work)


@router.post("/jobs/{job_id}/pause")
def pause(request: Request, job_id: str, csrf_token: str = Form("")) -> Response:
    return _pause_or_resume(request, job_id, csrf_token, "pause")


@router.post("/jobs/{job_id}/resume")
def resume(request: Request, job_id: str, csrf_token: str = Form("")) -> Response:
    return _pause_or_resume(request, job_id, csrf_token, "resume")


@router.post("/jobs/{job_id}/resubmit")
def resubmit(request: Request, job_id: str, csrf_token: str = Form("")) -> Response:
    def work() -> Outcome:
        new = backend(request).resubmit(job_id)
        return Outcome(f"Resubmitted as {new['id']}.", link=f"/jobs/{new['id']}")

    return _act(request, csrf_token, _job_back(job_id), work)


# --- queue actions -----------------------------------------------------------------------
@router.post("/queue/drain")
def drain(
    request: Request,
    csrf_token: str = Form(""),
    mode: str = Form("new"),
    reason: str = Form(""),
    confirm: str = Form(""),
) -> Response:
    full = mode == "full"

    def work() -> Outcome:
        backend(request).drain(full=full, reason=reason.strip()[:_MAX_REASON] or None)
        if full:
            return Outcome("Queue fully drained: no new jobs start and running jobs are paused.")
        return Outcome("Queue drained: no new jobs start; running jobs go on.")

    return _act(
        request,
        csrf_token,
        "/",
        work,
        confirmed=(confirm == "yes") if full else None,
        unconfirmed="Not drained: tick “Confirm” for a full drain.",
    )


@router.post("/queue/undrain")
def undrain(request: Request, csrf_token: str = Form("")) -> Response:
    def work() -> Outcome:
        backend(request).undrain()
        return Outcome("Queue undrained: jobs start again.")

    return _act(request, csrf_token, "/", work)


@router.post("/queue/cleanup")
def cleanup(
    request: Request,
    csrf_token: str = Form(""),
    older_than: str = Form("14d"),
    confirm: str = Form(""),
) -> Response:
    def work() -> Outcome:
        if older_than not in CLEANUP_AGES:
            return Outcome("Choose one of the offered ages.", ok=False, status=422)
        report = backend(request).cleanup_failed(older_than=older_than, execute=True)
        done = sum(1 for item in report["jobs"] if item.get("done"))
        failed = sum(1 for item in report["jobs"] if item.get("error"))
        if not report["jobs"]:
            if older_than == "0":
                return Outcome("No failed job to clean up.")
            return Outcome("No failed job is old enough to clean up.")
        message = f"Archived {done} failed job{'s' if done != 1 else ''}."
        if failed:
            message += f" {failed} could not be cleaned up (see vq cleanup)."
        return Outcome(message, ok=failed == 0)

    return _act(
        request,
        csrf_token,
        "/",
        work,
        confirmed=confirm == "yes",
        unconfirmed="Nothing cleaned up: tick “Confirm” first.",
    )
