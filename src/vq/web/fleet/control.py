"""Fleet writes: who may act on a remote job, and what an action's outcome was.

Rules (§7.2, §7.3):

* With no console account, every fleet write fails closed: 403 ``fleet-writes-closed``
  naming ``vq web user add`` — whoever asks, bearer token included.
* Otherwise the caller needs ``control`` (operator, admin, the admin bearer token, a
  scoped token with that scope); a cookie session must also carry its CSRF token (the
  single-host console's rule, :func:`vq.web.deps.check_csrf`).

Outcomes of :func:`perform` (the request went over SSH):

* the host answered: its ``--json`` result (``ok``), or its own typed error (a 409 for a
  job that already ended, a 404 for an unknown job…) exactly as it came back;
* the transport failed before the command started (unreachable, refused key): 502, the
  request was not carried out;
* the transport failed after sending (a timeout), or the host's answer is not a valid
  vq answer (``remote-bad-answer``: the action ran, what it did cannot be read):
  :class:`~vq.errors.OutcomeUnknown` (504 ``outcome-unknown``), whose message carries the
  host's health state.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request

from vq.errors import (
    CommandTimeout,
    InvalidInput,
    NotFound,
    OutcomeUnknown,
    RemoteProtocolError,
    VqError,
)
from vq.hosts.health import read_health
from vq.web import deps
from vq.web.auth.accounts import any_accounts
from vq.web.auth.guard import enforce
from vq.web.auth.principal import Principal
from vq.web.errors import ApiError
from vq.web.fleet.shapes import ActionOutcome
from vq.web.fleet.source import FleetSource

__all__ = ["ACTIONS", "check_job_id", "fleet_writer", "perform"]

ACTIONS = ("kill", "pause", "resume", "resubmit")
_JOB_ID = re.compile(r"^[0-9a-f]{12}$")


def check_job_id(job_id: str) -> str:
    """``job_id`` when it is well formed (12 lowercase hex), else NotFound."""
    if not _JOB_ID.match(job_id):
        raise NotFound(
            f"no job {job_id[:40]!r}: job ids are 12 lowercase hex characters",
            hint="copy the id from the fleet table",
        )
    return job_id


def fleet_writer(request: Request, csrf: str | None = None) -> Principal:
    """The caller if it may run a fleet action, else raise the refusal (see the rules).

    ``csrf`` is a form's ``csrf_token`` field; None reads the ``X-CSRF-Token`` header.
    """
    config = deps.web_config(request)
    principal = deps.principal_of(request)
    if not any_accounts(config.config_root):
        raise ApiError(
            403,
            "fleet-writes-closed",
            "fleet actions are disabled: no console account exists",
            hint="create one with `vq web user add USER --role operator`, then sign in",
        )
    deps.check_csrf(request, csrf)
    enforce(principal, "control")
    return principal


def _run(source: FleetSource, host: str, job_id: str, action: str) -> Any:
    """The host's ``vq ACTION JOB --json`` answer; a lost answer, or one that is not a
    valid vq answer (the action ran, what it did cannot be read), is OutcomeUnknown."""
    try:
        return source.act(host, job_id, action)
    except (CommandTimeout, RemoteProtocolError) as exc:
        unread = exc.reference == "remote-bad-answer"
        if isinstance(exc, RemoteProtocolError) and not exc.transient and not unread:
            raise  # ssh failed before the command started: nothing was sent
        health = read_health(source.fleet.state_root, host)
        raise OutcomeUnknown(
            f"host {host} did not answer after the {action} request was sent: its outcome "
            f"is unknown (host state: {health.status}; last answered: "
            f"{health.last_ok_at or 'never'})",
            hint="reload the job once the host answers: its state there shows what happened",
        ) from exc


def perform(
    source: FleetSource, host: str, job_id: str, action: str, *, resubmit: bool = False
) -> ActionOutcome:
    """Run ``action`` on ``host``'s job; ``{"host", "id", "action", "result"}`` or raise.

    ``resubmit`` (kill only, the single-host console's kill-with-resubmit): once the kill
    answered, ``vq resubmit JOB --json`` runs on the same host and the answer adds
    ``resubmitted`` (the new job's id; a kill always carries the key, null without it).
    If the resubmit then fails, the error says the job was killed (and is the resubmit's
    own: its status, or outcome-unknown when its answer was lost).
    """
    check_job_id(job_id)
    source.check_host(host)
    if resubmit and action != "kill":
        raise InvalidInput(
            f"resubmit applies to kill, not to {action}", hint="send resubmit only with a kill"
        )
    result = _run(source, host, job_id, action)
    answer: ActionOutcome = {"host": host, "id": job_id, "action": action, "result": result}
    if action != "kill":
        return answer
    answer["resubmitted"] = None
    if resubmit:
        try:
            new = _run(source, host, job_id, "resubmit")
        except VqError as exc:
            exc.message = f"job {job_id} was killed on {host}, but {exc.message}"
            exc.args = (exc.message,)
            raise
        answer["resubmitted"] = new.get("id") if isinstance(new, dict) else None
    return answer
