"""Fleet console pages (mounted only in fleet mode): ``/fleet``, ``/fleet/hosts/NAME``,
``/fleet/jobs/HOST/ID`` (+ its live, actions and log fragments and outputs download) and
``/fleet/audit``.

Contracts:

* Reads go through :func:`vq.web.pages.render.reader` (the single-host pages' guard:
  sign-in redirect once accounts exist, open reads on loopback until then).
* All host data comes from the shared :class:`~vq.web.fleet.source.FleetSource`; a host
  that does not answer is a row saying so (status, reason, last answered), never an
  error page. A job page on such a host is an error page naming the host's state.
* A job page is the single-host job page (``job.html``) with the fleet's URLs: while the
  job can change, its live part re-fetches itself every 3 s and its chart polls
  ``/api/v1/fleet/jobs/HOST/ID/samples`` every 5 s; both read the job's cached detail, so
  open pages add no SSH call beyond one per job per cache period.
* Everything rendered is autoescaped (remote job names included).
* ``/fleet/jobs/HOST/ID/outputs.tar.gz`` streams the host's ``vq fetch ID --tar-stream``
  through gzip as it arrives (nothing is spooled here).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import TypedDict

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from vq.domain.events import Event
from vq.domain.receipt import Receipt
from vq.errors import ConfigError, VqError
from vq.remote.host import job_words, remote_error
from vq.web.deps import web_config
from vq.web.errors import status_for
from vq.web.fleet.api import source_of
from vq.web.fleet.control import check_job_id
from vq.web.fleet.listing import fleet_table, queue_filter
from vq.web.fleet.shapes import FleetRow, HostRow, Incomplete, JobLogs
from vq.web.fleet.views import host_rows
from vq.web.pages import routes as single
from vq.web.pages.jobview import SpecRow
from vq.web.pages.render import login_redirect, reader, render, render_error
from vq.web.pages.views import (
    STATES,
    SampleSeries,
    WatchdogReading,
    sample_series,
    watchdog_reading,
)

__all__ = ["router"]

router = APIRouter(prefix="/fleet", include_in_schema=False)

PAGE_ROWS = 100
_STREAM_DEADLINE_S = 3600.0


def guarded(request: Request, build: Callable[[], Response]) -> Response:
    who = reader(request)
    if isinstance(who, Response):
        return who
    try:
        return build()
    except VqError as exc:
        status = status_for(exc)
        shown = status < 500 or isinstance(exc, ConfigError) or status in (502, 503, 504)
        return render_error(
            request, status, exc.message if shown else "the fleet could not be read"
        )


def _page_number(request: Request) -> int:
    raw = request.query_params.get("page", "1")
    return max(1, int(raw)) if raw.isascii() and raw.isdigit() and len(raw) < 7 else 1


class FleetContext(TypedDict):
    """``/fleet`` and ``/fleet/hosts/{host}``: the host table and one page of jobs."""

    nav: str
    hosts: list[HostRow]
    jobs: list[FleetRow]
    total: int
    page: int
    pages: int
    state: str
    name: str
    states: tuple[str, ...]
    host: str | None
    incomplete: list[Incomplete]


class FleetJobContext(TypedDict):
    """``/fleet/jobs/{host}/{id}``: one job of a host, as the single-host job page."""

    nav: str
    host: str
    job: FleetRow
    events: list[Event]
    logs: JobLogs | dict[str, str]
    receipt: Receipt | None
    series: SampleSeries
    sample_count: int
    spec_rows: list[SpecRow]
    live: bool
    kill: WatchdogReading | None
    tail_lines: int


def _fleet_context(request: Request, host: str | None = None) -> FleetContext:
    source = source_of(request)
    if host is not None:
        source.check_host(host)
    params = request.query_params
    state = params.get("state", "").upper()
    name = params.get("name", "")[:200]
    number = _page_number(request)
    views = [source.host(host)] if host is not None else source.hosts()
    flt = queue_filter(states=[state] if state in STATES else [], name=name or None)
    offset = (number - 1) * PAGE_ROWS
    listing = fleet_table(source, views, flt, host=host, offset=offset, limit=PAGE_ROWS)
    pages = max(1, -(-listing["total"] // PAGE_ROWS))
    return {
        "nav": "fleet",
        "hosts": host_rows(views),
        "jobs": listing["jobs"],
        "total": listing["total"],
        "page": number,
        "pages": pages,
        "state": state,
        "name": name,
        "states": STATES,
        "host": host,
        "incomplete": listing["incomplete"],
    }


@router.get("")
def fleet_page(request: Request) -> Response:
    return guarded(
        request, lambda: single.page(request, "fleet/fleet.html", _fleet_context(request))
    )


@router.get("/fragments/fleet")
def fleet_fragment(request: Request) -> Response:
    return guarded(request, lambda: render(request, "fleet/_fleet.html", _fleet_context(request)))


@router.get("/hosts/{host}")
def host_page(request: Request, host: str) -> Response:
    return guarded(
        request, lambda: single.page(request, "fleet/fleet.html", _fleet_context(request, host))
    )


def _job_context(request: Request, host: str, job_id: str) -> FleetJobContext:
    detail = source_of(request).job(host, check_job_id(job_id))
    job = detail["job"]
    samples = detail.get("samples") or []
    return {
        "nav": "fleet",
        "host": host,
        "job": job,
        "events": detail.get("events") or [],
        "logs": detail.get("logs") or {},
        "receipt": detail.get("receipt"),
        "series": sample_series(samples, job.get("mem_mb")),
        "sample_count": len(samples),
        "spec_rows": [],
        "live": job.get("state") in single.LIVE_STATES,
        "kill": watchdog_reading(job),
        "tail_lines": 200,
    }


@router.get("/jobs/{host}/{job_id}")
def job_page(request: Request, host: str, job_id: str) -> Response:
    return guarded(
        request, lambda: single.page(request, "fleet/job.html", _job_context(request, host, job_id))
    )


@router.get("/fragments/jobs/{host}/{job_id}/live")
def job_live_fragment(request: Request, host: str, job_id: str, seen: str = "") -> Response:
    """The live part; ``HX-Trigger: job-changed`` when the state is not the ``seen`` one."""

    def build() -> Response:
        context = _job_context(request, host, job_id)
        changed = bool(seen) and seen != context["job"].get("state")
        headers = {"HX-Trigger": "job-changed"} if changed else None
        return render(request, "_job_live.html", context, headers=headers)

    return guarded(request, build)


@router.get("/fragments/jobs/{host}/{job_id}/actions")
def job_actions_fragment(request: Request, host: str, job_id: str) -> Response:
    """The action buttons for the job's current state (empty without control)."""

    def build() -> Response:
        if not request.state.principal.can("control"):
            return Response(status_code=204)
        return render(request, "_job_actions.html", _job_context(request, host, job_id))

    return guarded(request, build)


@router.get("/fragments/jobs/{host}/{job_id}/log")
def job_log_fragment(request: Request, host: str, job_id: str, stream: str = "stdout") -> Response:
    def build() -> Response:
        if stream not in ("stdout", "stderr"):
            return render_error(request, 422, "stream must be stdout or stderr")
        source_of(request).forget(host, job_id)  # a refresh asks the host again
        context = _job_context(request, host, job_id)
        text = context["logs"].get(stream, "")
        live = context["live"]
        values = {"host": host, "job_id": job_id, "stream": stream, "text": text, "live": live}
        return render(request, "_log.html", {**values, "tail_lines": 200})

    return guarded(request, build)


def _gzip(chunks: Iterator[bytes]) -> Iterator[bytes]:
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    for chunk in chunks:
        out = packer.compress(chunk)
        if out:
            yield out
    yield packer.flush()


@router.get("/jobs/{host}/{job_id}/outputs.tar.gz")
def job_outputs(request: Request, host: str, job_id: str) -> Response:
    """The job's workspace snapshot from its host, as a gzip'd tar, streamed."""

    def build() -> Response:
        source = source_of(request)
        check_job_id(job_id)
        source.check_host(host)
        stream = source.fleet.host(host).stream(
            job_words(["fetch", "--tar-stream"], [job_id]), deadline_s=_STREAM_DEADLINE_S
        )
        first = stream.read()
        if not first:  # the remote refused (unknown job…): its error, not an empty file
            raise remote_error(host, stream.wait())

        def body() -> Iterator[bytes]:
            try:
                yield first
                while chunk := stream.read():
                    yield chunk
            finally:
                stream.close()

        name = f"{host}-{job_id}-outputs.tar.gz"
        return StreamingResponse(
            _gzip(body()),
            media_type="application/gzip",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    return guarded(request, build)


@router.get("/audit")
def audit_page(request: Request) -> Response:
    """The fleet audit trail (admins), optionally only one host's rows (``?host=``)."""

    def build() -> Response:
        principal = request.state.principal
        if principal.kind == "anonymous":
            return login_redirect(request)
        if not principal.can("admin"):
            return render_error(request, 403, f"{principal.name} may not read the audit log")
        host = request.query_params.get("host", "")[:63]
        log = web_config(request).state.fleet_audit_log
        records = single._tail_jsonl(log, single.AUDIT_LINES)
        if host:
            records = [r for r in records if r.get("host") == host]
        rows = [single._audit_row(log.name, r) for r in reversed(records)]
        context = {"nav": "fleet", "rows": rows, "host": host, "hosts": source_of(request).names()}
        return single.page(request, "fleet/audit.html", context)

    return guarded(request, build)
