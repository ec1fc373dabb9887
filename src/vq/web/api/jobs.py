"""``/api/v1/jobs``: list, inspect, read logs and samples, kill, pause, resume, resubmit.

Every route goes through :class:`vq.web.backend.Backend` (daemon when it answers, else
the disk), so the JSON is the same as ``vq ... --json``. Reads need ``read``; changes
need ``control``. Errors are shaped only by :mod:`vq.web.errors`: an unknown or
malformed id is 404, a bad query or body 422 (with ``details``), a state conflict
(killing an ended job, pausing a pending one) 409. Routes are plain ``def``: they block
on disk and the daemon socket and run in the threadpool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal, TypedDict

from fastapi import APIRouter, Body, Depends, Path, Query
from fastapi.responses import FileResponse, PlainTextResponse

from vq.protocol.answers import KillAnswer, ListRow, PauseAnswer, QuarantinedItem, SpecJSON
from vq.services.top import Sample
from vq.web.api.models import (
    CleanupRequest,
    CleanupResult,
    JobDetail,
    JobPage,
    KillRequest,
    KillResult,
    PauseResult,
    ResubmitRequest,
)
from vq.web.backend import MAX_TAIL_LINES, Backend, backend_of
from vq.web.deps import need

if TYPE_CHECKING:
    from vq.cleanup.jobs import CleanupReportJSON

__all__ = ["router"]

router = APIRouter(tags=["jobs"])


class JobPageAnswer(TypedDict):
    """``GET /api/v1/jobs``: one page of list rows, the paging, every state's count."""

    jobs: list[ListRow]
    total: int
    limit: int
    offset: int
    counts: dict[str, int]
    quarantined: list[QuarantinedItem]


class KillResubmitAnswer(KillAnswer):
    """``POST /jobs/{id}/kill``: the kill item, and the copy's id when one was resubmitted."""

    resubmitted: str | None


Reader = Depends(need("read"))
Controller = Depends(need("control"))
Gate = Annotated[Backend, Depends(backend_of)]
JobId = Annotated[str, Path(description="A job id: 12 lowercase hex characters.")]
Stream = Literal["stdout", "stderr"]

Sort = Literal[
    "submitted_at",
    "-submitted_at",
    "priority",
    "-priority",
    "state",
    "-state",
    "job_name",
    "-job_name",
    "id",
    "-id",
    "finished_at",
    "-finished_at",
]
#: How many events ``GET /jobs/{id}`` includes.
DETAIL_EVENTS = 20


@router.get(
    "/jobs",
    response_model=JobPage,
    summary="List jobs",
    description="Filtered, sorted and paginated `vq list --json` rows. Filters combine (AND); "
    "`state` and `tag` repeat. `total` counts every match; `counts` every job by state.",
    dependencies=[Reader],
)
def list_jobs(
    backend: Gate,
    state: Annotated[list[str], Query(description="Only these states (repeatable).")] = [],  # noqa: B006
    tag: Annotated[list[str], Query(description="Only jobs with every tag (repeatable).")] = [],  # noqa: B006
    name: Annotated[str | None, Query(max_length=200, description="Name contains.")] = None,
    since: Annotated[
        str | None, Query(max_length=64, description="Submitted since: ISO time or 2h.")
    ] = None,
    group: Annotated[str | None, Query(max_length=64, description="Array/chain group.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
    sort: Sort = "submitted_at",
) -> JobPageAnswer:
    # The daemon (or the disk path) sorts and pages: only this page's rows are built.
    result = backend.list_jobs(
        state, tag, name, since, group, sort=sort, offset=offset, limit=limit
    )
    return {
        "jobs": result["jobs"],
        "total": result["total"],
        "limit": limit,
        "offset": offset,
        "counts": result["counts"],
        "quarantined": result["quarantined"],
    }


@router.post(
    "/jobs/cleanup",
    response_model=CleanupResult,
    summary="Clean up failed rows",
    description="Archive (default) or sweep the workdirs of failed jobs that ended at least "
    '`older_than` ago (default 14d; "0", "0s" or null: any age, just-failed jobs too). A dry '
    "run unless `dry_run` is false. Specs stay; never touches pending, running, suspended or "
    "completed jobs.",
    dependencies=[Controller],
)
def cleanup_failed(backend: Gate, body: CleanupRequest | None = None) -> CleanupReportJSON:
    request = body or CleanupRequest()
    return backend.cleanup_failed(
        older_than=request.older_than,
        states=request.states,
        archive=request.archive,
        execute=not request.dry_run,
    )


@router.get(
    "/jobs/{job_id}",
    response_model=JobDetail,
    summary="One job",
    description="The `vq status --json` view plus the last 20 events and the resource "
    "receipt. 404 for an unknown id.",
    dependencies=[Reader],
)
def job_detail(backend: Gate, job_id: JobId) -> dict[str, object]:
    """The status view, its last events and its receipt (which stands in the view's
    ``resource_usage`` place when it has one): a document of its own, not a view."""
    view = backend.status(job_id)
    events = backend.events(job_id, tail=DETAIL_EVENTS)
    return {**view, "events": events, "resource_usage": backend.receipt(job_id)}


@router.get(
    "/jobs/{job_id}/logs",
    response_class=PlainTextResponse,
    summary="Tail of a job's output",
    description="The last `tail` lines of stdout or stderr as text/plain (empty before the "
    "job writes anything).",
    dependencies=[Reader],
)
def job_logs(
    backend: Gate,
    job_id: JobId,
    stream: Stream = "stdout",
    tail: Annotated[int, Query(ge=0, le=MAX_TAIL_LINES)] = 200,
) -> PlainTextResponse:
    text = backend.log_tail(job_id, stream, tail)
    return PlainTextResponse(text, headers={"X-Content-Type-Options": "nosniff"})


@router.get(
    "/jobs/{job_id}/logs/download",
    response_class=FileResponse,
    summary="Download a job's output",
    description="The whole stdout or stderr file as an attachment. 404 when absent.",
    dependencies=[Reader],
)
def job_logs_download(backend: Gate, job_id: JobId, stream: Stream = "stdout") -> FileResponse:
    path = backend.log_file(job_id, stream)
    return FileResponse(
        path,
        media_type="text/plain; charset=utf-8",
        filename=f"{backend.check_id(job_id)}-{stream}.log",
        headers={"X-Content-Type-Options": "nosniff"},
    )


@router.get(
    "/jobs/{job_id}/samples",
    summary="Watchdog samples",
    description="The last `limit` well-formed records of the job's samples.jsonl (one every "
    "5 s while it runs); malformed lines are skipped; [] when none.",
    dependencies=[Reader],
    response_model=None,
)
def job_samples(
    backend: Gate, job_id: JobId, limit: Annotated[int, Query(ge=1, le=5000)] = 720
) -> list[Sample]:
    return backend.samples(job_id, limit)


@router.post(
    "/jobs/{job_id}/kill",
    response_model=KillResult,
    summary="Kill a job",
    description="PENDING ends at once; RUNNING/SUSPENDED get SIGTERM, a 10 s grace, then "
    "SIGKILL. With `resubmit: true` a copy is submitted as a new job. 409 if the job "
    "already ended otherwise.",
    dependencies=[Controller],
)
def kill_job(
    backend: Gate, job_id: JobId, body: Annotated[KillRequest | None, Body()] = None
) -> KillResubmitAnswer:
    result: KillResubmitAnswer = {**backend.kill(job_id), "resubmitted": None}
    if body is not None and body.resubmit:
        result["resubmitted"] = backend.resubmit(job_id, {})["id"]
    return result


@router.post(
    "/jobs/{job_id}/pause",
    response_model=PauseResult,
    summary="Pause a running job",
    description="SIGSTOP to its process group; it keeps its reservation. 409 unless RUNNING "
    "(pausing a SUSPENDED job changes nothing).",
    dependencies=[Controller],
)
def pause_job(backend: Gate, job_id: JobId) -> PauseAnswer:
    return backend.pause(job_id)


@router.post(
    "/jobs/{job_id}/resume",
    response_model=PauseResult,
    summary="Resume a paused job",
    description="SIGCONT to its process group. 409 unless SUSPENDED (or already RUNNING).",
    dependencies=[Controller],
)
def resume_job(backend: Gate, job_id: JobId) -> PauseAnswer:
    return backend.resume(job_id)


@router.post(
    "/jobs/{job_id}/resubmit",
    summary="Resubmit an ended job",
    description="Run it again as a new job (fresh id, copied workspace) with optional "
    "overrides; returns the new spec. 409 if the job has not ended.",
    dependencies=[Controller],
    response_model=None,
)
def resubmit_job(
    backend: Gate, job_id: JobId, body: Annotated[ResubmitRequest | None, Body()] = None
) -> SpecJSON:
    return backend.resubmit(job_id, body.overrides() if body else {})
