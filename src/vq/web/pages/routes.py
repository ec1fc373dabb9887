"""Console pages (server-rendered HTML) and the htmx fragments that refresh them.

Pages: ``/`` (queue), ``/jobs/{id}`` (detail), ``/overview``, ``/audit`` (admin). Each
page renders completely without JavaScript; the queue table shows one page of
:data:`PAGE_ENTRIES` entries (``?page=N``, an array or chain counting as one entry),
with previous/next links; htmx re-fetches only a fragment every few
seconds (``/fragments/...``), which returns that fragment alone (no layout).

Contracts:

* Every route is a plain ``def`` (Backend blocks on disk or the daemon socket).
* Reads go through :func:`vq.web.pages.render.reader`: a caller who must sign in is
  redirected to ``/login?next=...``; all data comes from :class:`vq.web.backend.Backend`.
* A service error renders an HTML error page (or fragment) with the Backend's already
  scrubbed message; nothing server-side (paths, tracebacks) reaches the page.
* ``/jobs/{id}/logs/{stream}`` downloads a whole log as an attachment (text/plain).
* ``/api/v1/jobs/...`` paths no API route serves (a malformed id such as ``../..``)
  get the API's JSON 404 with its hint here (405 when another method is served).
* ``/jobs/...`` and ``/fragments/jobs/...`` paths no page route serves get the console's
  HTML 404 page (or fragment), never the API's JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TypedDict, cast
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from vq._fs import read_tail_lines
from vq.errors import ConfigError, VqError
from vq.protocol.answers import ListAnswer
from vq.web.api.fallback import other_methods
from vq.web.backend import Backend, Stream
from vq.web.deps import web_config
from vq.web.errors import status_for
from vq.web.pages import jobview, views
from vq.web.pages.contexts import (
    AuditContext,
    AuditRow,
    DetailContext,
    Flash,
    LiveContext,
    OverviewContext,
    SummaryContext,
    TableContext,
)
from vq.web.pages.render import login_redirect, reader, render, render_error

__all__ = ["FLASH_COOKIE", "router"]

router = APIRouter(include_in_schema=False)

FLASH_COOKIE = "vq_flash"
#: Lines of stdout/stderr shown on the detail page.
TAIL_LINES = 200
#: Audit lines shown, and the most bytes read from the end of each audit file.
AUDIT_LINES = 200
AUDIT_BYTES = 512 * 1024
#: Entries (a job, or one whole array or chain) on one page of the queue table.
PAGE_ENTRIES = 100
#: The queue page's summary accepts the table's check of the spec files this recent.
SUMMARY_AFTER_TABLE_SECONDS = 1.0
#: States in which a job's page keeps polling.
LIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED"})


def backend(request: Request) -> Backend:
    return Backend(web_config(request))


def guarded(request: Request, build: Callable[[], Response]) -> Response:
    """Run ``build`` for a caller allowed to read; service errors become error pages."""
    who = reader(request)
    if isinstance(who, Response):
        return who
    try:
        return build()
    except VqError as exc:
        status = status_for(exc)
        shown = status < 500 or isinstance(exc, ConfigError)  # the operator must fix it
        message = exc.message if shown else "the queue could not be read just now"
        return render_error(request, status, message)


def take_flash(request: Request) -> Flash:
    """The one-shot outcome message a no-JS action left in a cookie."""
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
        return {"flash": str(data["m"])[:500], "flash_kind": "ok" if data.get("ok") else "error"}
    except (ValueError, KeyError, TypeError):
        return {}


def page(request: Request, template: str, context: Mapping[str, object]) -> Response:
    """A full page: the flash message shown once, then its cookie cleared."""
    flash = take_flash(request)
    response = render(request, template, {**context, **flash})
    if request.cookies.get(FLASH_COOKIE):
        response.delete_cookie(FLASH_COOKIE, path="/")
    return response


# --- queue -----------------------------------------------------------------------------
def _table_page(data: Backend, query: views.TableQuery) -> ListAnswer:
    """One page of table entries (an array or chain is one entry) from the listing."""
    return data.list_jobs(
        states=[query.state] if query.state else None,
        tags=[query.tag] if query.tag else None,
        name=query.name or None,
        table_sort=query.sort,
        table_dir=query.dir,
        offset=(query.page - 1) * PAGE_ENTRIES,
        limit=PAGE_ENTRIES,
    )


def _table_context(request: Request) -> TableContext:
    params = request.query_params
    query = views.TableQuery.from_params(params, params.getlist("open"))
    data = backend(request)
    listing = _table_page(data, query)
    pages = max(1, -(-int(listing["total"]) // PAGE_ENTRIES))
    if query.page > pages:  # past the end (jobs went away): the last page instead
        query = replace(query, page=pages)
        listing = _table_page(data, query)
    entries = views.table_entries(listing["jobs"], query)
    first = (query.page - 1) * PAGE_ENTRIES
    return {
        "q": query,
        "entries": entries,
        "total": listing["total"],
        "total_jobs": listing["total_jobs"],
        "first": first + 1 if entries else 0,
        "last": first + len(entries),
        "pages": pages,
        "quarantined": len(listing["quarantined"]),
        "states": views.STATES,
    }


def _summary_context(request: Request, max_age: float | None = None) -> SummaryContext:
    summary = backend(request).queue_summary(max_age)
    return {"summary": summary, "bars": views.capacity_bars(summary), "states": views.STATES}


@router.get("/")
def queue_page(request: Request) -> Response:
    def build() -> Response:
        table = _table_context(request)
        # The table's listing has just re-checked the spec files: the summary reuses that.
        summary = _summary_context(request, max_age=SUMMARY_AFTER_TABLE_SECONDS)
        return page(request, "queue.html", {"nav": "queue", **summary, **table})

    return guarded(request, build)


@router.get("/fragments/jobs")
def jobs_fragment(request: Request) -> Response:
    return guarded(request, lambda: render(request, "_jobs_table.html", _table_context(request)))


@router.get("/fragments/summary")
def summary_fragment(request: Request) -> Response:
    return guarded(request, lambda: render(request, "_summary.html", _summary_context(request)))


# --- job detail --------------------------------------------------------------------------
def _live_context(request: Request, job_id: str) -> LiveContext:
    data = backend(request)
    # the page's copy of the view: no server path, no idempotency digest
    job = jobview.scrub(data.status(job_id))
    dep_states = data.states_of(jobview.dependency_ids(job)[: jobview.MAX_DEP_LINKS * 2])
    return {
        "job": job,
        "spec_rows": jobview.spec_rows(job, dep_states),
        "events": data.events(job_id, tail=200),
        "live": job["state"] in LIVE_STATES,
        "kill": views.watchdog_reading(job),
    }


def _detail_context(request: Request, job_id: str) -> DetailContext:
    data = backend(request)
    live = _live_context(request, job_id)
    samples = data.samples(job_id)
    return {
        **live,
        "nav": "queue",
        "logs": {s: data.log_tail(job_id, s, TAIL_LINES) for s in ("stdout", "stderr")},
        "receipt": data.receipt(job_id),
        "series": views.sample_series(samples, live["job"].get("mem_mb")),
        "sample_count": len(samples),
        "tail_lines": TAIL_LINES,
    }


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: str) -> Response:
    """A job's page; a short id (a unique prefix of 4+ characters) redirects to it."""

    def build() -> Response:
        full = backend(request).full_id(job_id)
        if full != job_id:
            return RedirectResponse(f"/jobs/{full}", status_code=307)
        return page(request, "job.html", _detail_context(request, job_id))

    return guarded(request, build)


@router.get("/fragments/jobs/{job_id}/live")
def job_live_fragment(request: Request, job_id: str, seen: str = "") -> Response:
    """The live part; ``HX-Trigger: job-changed`` when the state is not the ``seen`` one."""

    def build() -> Response:
        context = _live_context(request, job_id)
        changed = bool(seen) and seen != context["job"]["state"]
        headers = {"HX-Trigger": "job-changed"} if changed else None
        return render(request, "_job_live.html", context, headers=headers)

    return guarded(request, build)


@router.get("/fragments/jobs/{job_id}/actions")
def job_actions_fragment(request: Request, job_id: str) -> Response:
    """The action buttons for the job's current state (empty for callers without control)."""

    def build() -> Response:
        if not request.state.principal.can("control"):
            return Response(status_code=204)
        job = backend(request).status(job_id)
        return render(request, "_job_actions.html", {"job": job})

    return guarded(request, build)


@router.get("/fragments/jobs/{job_id}/log")
def job_log_fragment(request: Request, job_id: str, stream: str = "stdout") -> Response:
    def build() -> Response:
        if stream not in ("stdout", "stderr"):
            return render_error(request, 422, "stream must be stdout or stderr")
        data = backend(request)
        text = data.log_tail(job_id, cast(Stream, stream), TAIL_LINES)
        live = data.status(job_id)["state"] in LIVE_STATES
        context = {
            "job_id": job_id,
            "stream": stream,
            "text": text,
            "tail_lines": TAIL_LINES,
            "live": live,
        }
        return render(request, "_log.html", context)

    return guarded(request, build)


@router.get("/jobs/{job_id}/logs/{stream}")
def job_log_download(request: Request, job_id: str, stream: str) -> Response:
    def build() -> Response:
        if stream not in ("stdout", "stderr"):
            return render_error(request, 404, "logs are stdout or stderr")
        path = backend(request).log_file(job_id, cast(Stream, stream))
        name = f"{job_id}.{stream}.txt"
        return FileResponse(
            path,
            media_type="text/plain; charset=utf-8",
            headers={
                "Content-Disposition": f"attachment; filename=\"{name}\"; filename*=UTF-8''"
                + quote(name),
                "X-Content-Type-Options": "nosniff",
            },
        )

    return guarded(request, build)


# --- overview and audit ----------------------------------------------------------------
def _overview_context(request: Request) -> OverviewContext:
    data = backend(request)
    now = datetime.now(UTC)
    rows = data.list_jobs()["jobs"]
    return {
        "nav": "overview",
        "overview": data.overview(),
        "usage": data.usage("tag"),
        "chart": views.usage_by_day_and_tag(rows, now),
        "queue": views.queue_over_time(rows, now),
    }


@router.get("/overview")
def overview_page(request: Request) -> Response:
    return guarded(request, lambda: page(request, "overview.html", _overview_context(request)))


class AuditLine(TypedDict, total=False):
    """One line of an audit log as the file holds it: the console's (``actor``,
    ``action``) or the daemon's RPC log (``method``, ``peer_uid``); the page shows the
    keys it names and the rest as detail."""

    ts: object
    user: object
    actor: object
    role: object
    action: object
    method: object
    outcome: object
    peer_uid: object


def _tail_jsonl(path: os.PathLike[str] | str, lines: int) -> list[AuditLine]:
    """The last ``lines`` JSON-object lines of a file (bounded read; bad lines skipped)."""
    try:
        raw = read_tail_lines(path, AUDIT_BYTES)
    except OSError:
        return []
    records: list[AuditLine] = []
    for line in raw[-lines:]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(cast(AuditLine, record))
    return records


def _audit_row(source: str, record: AuditLine) -> AuditRow:
    actor = record.get("user") or record.get("actor")
    if actor is None and record.get("peer_uid") is not None:
        actor = f"uid {record['peer_uid']}"
    action = record.get("action") or record.get("method") or ""
    shown = {"ts", "user", "actor", "role", "action", "method", "outcome", "peer_uid"}
    detail = {k: v for k, v in record.items() if k not in shown}
    return {
        "source": source,
        "ts": record.get("ts", ""),
        "actor": actor or "",
        "role": record.get("role") or "",
        "action": action,
        "outcome": record.get("outcome", ""),
        "detail": json.dumps(detail, separators=(", ", ": "), default=str) if detail else "",
    }


@router.get("/audit")
def audit_page(request: Request) -> Response:
    def build() -> Response:
        principal = request.state.principal
        if principal.kind == "anonymous":
            return login_redirect(request)
        if not principal.can("admin"):
            return render_error(request, 403, f"{principal.name} may not read the audit log")
        logs = web_config(request).state.audit_logs
        rows = [
            _audit_row(path.name, record)
            for path in logs
            for record in _tail_jsonl(path, AUDIT_LINES)
        ]
        rows.sort(key=lambda r: str(r["ts"]), reverse=True)
        files = [path.name for path in logs]
        context: AuditContext = {"nav": "audit", "rows": rows[:AUDIT_LINES], "files": files}
        return page(request, "audit.html", context)

    return guarded(request, build)


# --- paths no route serves -------------------------------------------------------------
# Registered after every other page, fragment and API route (this router is included
# last of them), so only paths nothing else serves land here, e.g. ``/jobs/../../etc``.
@router.get("/jobs/{rest:path}")
@router.get("/fragments/jobs/{rest:path}")
def page_job_unmatched(request: Request, rest: str) -> Response:
    """The console's HTML 404 page (or fragment) for a malformed job path."""
    if other_methods(request):
        return render_error(request, 405, "this page only accepts form posts")
    return guarded(request, lambda: render_error(request, 404, Backend.no_route().message))
