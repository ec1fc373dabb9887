"""``/api/v1/fleet/...``: the fleet console's JSON API (mounted only in fleet mode).

Reads need ``read``; every answer about a host that did not answer is data (a host row
with ``status``, ``error``, ``last_ok_at``), never an error — except the per-job routes,
which answer the host's own error (404 unknown job, 502 unreachable, 503 marked down).
Writes (``POST .../kill|pause|resume|resubmit``; a kill may carry ``{"resubmit": true}``)
follow :mod:`vq.web.fleet.control`.
All reads come from the shared :class:`~vq.web.fleet.source.FleetSource` cache.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from starlette.concurrency import run_in_threadpool

from vq.web.api.models import KillRequest
from vq.web.auth.principal import Principal
from vq.web.deps import need
from vq.web.fleet.control import check_job_id, fleet_writer, perform
from vq.web.fleet.listing import fleet_table, queue_filter
from vq.web.fleet.shapes import (
    ActionOutcome,
    FleetEvents,
    FleetHosts,
    FleetJob,
    FleetLogs,
    FleetQueue,
    FleetSamples,
    HostBrief,
    HostJSON,
    JobSnapshot,
)
from vq.web.fleet.source import FleetSource

__all__ = ["router", "source_of"]

router = APIRouter(prefix="/fleet", tags=["fleet"])

Reader = Annotated[Principal, Depends(need("read"))]
HostName = Annotated[str, Path(description="A configured host name.")]
JobId = Annotated[str, Path(description="A job id on that host: 12 lowercase hex characters.")]
Action = Literal["kill", "pause", "resume", "resubmit"]


def source_of(request: Request) -> FleetSource:
    source: FleetSource = request.app.state.fleet_source
    return source


@router.get(
    "/hosts",
    summary="Every configured host: status, reason, counts, capacity",
    response_model=None,
)
def fleet_hosts(request: Request, _: Reader) -> FleetHosts:
    """``{"hosts": [{name, status, error, last_ok_at, summary, total_jobs, lanes}]}``;
    ``status`` is ``ok``, ``unreachable``, ``invalid`` or ``down``; ``lanes`` lists the
    scheduler lanes the host drives (docs/json.md)."""
    return {"hosts": [view.as_dict() for view in source_of(request).hosts()]}


@router.get(
    "/queue",
    summary="The whole fleet's jobs as one paged table (a host per row)",
    responses={
        404: {"description": "`host` is not a configured host"},
        422: {"description": "an unknown state, a bad `since`, or a value out of range"},
    },
    response_model=None,
)
def fleet_queue_route(
    request: Request,
    _: Reader,
    state: Annotated[list[str], Query(description="Only these states (repeatable).")] = [],  # noqa: B006
    tag: Annotated[list[str], Query(description="Only jobs with every tag (repeatable).")] = [],  # noqa: B006
    name: Annotated[str | None, Query(max_length=200, description="Name contains.")] = None,
    since: Annotated[
        str | None, Query(max_length=64, description="Submitted since: ISO time or 2h.")
    ] = None,
    group: Annotated[str | None, Query(max_length=64, description="Array/chain group.")] = None,
    host: Annotated[str | None, Query(max_length=63, description="Only this host.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> FleetQueue:
    """``{"jobs": [ROW + "host" + "lane"], "total", "offset", "limit", "hosts": [...],
    "incomplete": [{host, error}]}``: rows as in ``GET /api/v1/jobs``, filtered as
    there, newest submitted first across hosts, every job of every answering host
    (not only a snapshot's newest); ``hosts`` says which hosts answered,
    ``incomplete`` names a host whose listing failed for this page."""
    flt = queue_filter(state, tag, name, since, group)
    source = source_of(request)
    if host is not None:
        source.check_host(host)
    views = source.hosts()
    page = fleet_table(source, views, flt, host=host, offset=offset, limit=limit)
    return {**page, "hosts": [_brief(view.as_dict()) for view in views]}


def _brief(whole: HostJSON) -> HostBrief:
    return {
        "name": whole["name"],
        "status": whole["status"],
        "error": whole["error"],
        "last_ok_at": whole["last_ok_at"],
        "total_jobs": whole["total_jobs"],
        "lanes": whole["lanes"],
    }


def _job(request: Request, host: str, job_id: str) -> JobSnapshot:
    return source_of(request).job(host, check_job_id(job_id))


@router.get(
    "/jobs/{host}/{job_id}",
    summary="One job on one host (the vq status --json view)",
    response_model=None,
)
def fleet_job(request: Request, _: Reader, host: HostName, job_id: JobId) -> FleetJob:
    detail = _job(request, host, job_id)
    return {**detail["job"], "host": host, "receipt": detail.get("receipt")}


@router.get(
    "/jobs/{host}/{job_id}/logs",
    summary="The tail of a job's stdout or stderr",
    response_model=None,
)
def fleet_job_logs(
    request: Request,
    _: Reader,
    host: HostName,
    job_id: JobId,
    stream: Literal["stdout", "stderr"] = "stdout",
) -> FleetLogs:
    """``{"host", "id", "stream", "text"}``: the last 200 lines."""
    text = _job(request, host, job_id)["logs"].get(stream, "")
    return {"host": host, "id": job_id, "stream": stream, "text": text}


@router.get(
    "/jobs/{host}/{job_id}/samples",
    summary="The job's last 60 watchdog samples",
    response_model=None,
)
def fleet_job_samples(request: Request, _: Reader, host: HostName, job_id: JobId) -> FleetSamples:
    return {"host": host, "id": job_id, "samples": _job(request, host, job_id)["samples"]}


@router.get(
    "/jobs/{host}/{job_id}/events",
    summary="The job's timeline (vq events --json)",
    response_model=None,
)
def fleet_job_events(request: Request, _: Reader, host: HostName, job_id: JobId) -> FleetEvents:
    return {"host": host, "id": job_id, "events": _job(request, host, job_id)["events"]}


@router.post(
    "/jobs/{host}/{job_id}/{action}",
    summary="Kill, pause, resume or resubmit a job on a host (over SSH)",
    responses={
        403: {"description": "no console account exists, the caller lacks control, or CSRF"},
        502: {"description": "the host could not be reached; nothing was sent"},
        504: {"description": "outcome-unknown: sent, but the answer was lost"},
    },
    response_model=None,
)
async def fleet_job_action(
    request: Request,
    host: HostName,
    job_id: JobId,
    action: Action,
    body: Annotated[KillRequest | None, Body(description="kill only: {resubmit}")] = None,
) -> ActionOutcome:
    """``{"host", "id", "action", "result"}`` with the host's ``vq ACTION --json``; a kill
    adds ``resubmitted`` (the new job's id when the body asked ``{"resubmit": true}``,
    else null), as ``POST /api/v1/jobs/{id}/kill`` does."""
    await run_in_threadpool(fleet_writer, request, None)
    resubmit = body is not None and body.resubmit
    if resubmit:
        request.state.audit_extra = {"resubmit": True}
    answer = await run_in_threadpool(
        perform, source_of(request), host, job_id, action, resubmit=resubmit
    )
    if resubmit:
        request.state.audit_extra = {"resubmit": True, "resubmitted": answer["resubmitted"]}
    return answer
