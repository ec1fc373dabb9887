"""The web's single gateway to the queue: the daemon when it answers, else the disk.

Every route (API and pages) reads and changes the queue through one :class:`Backend`
built from the app's :class:`~vq.web.context.WebConfig`. Each method returns JSON-ready
data in the same shape as the matching ``vq ... --json`` output, because it runs the
same code (:class:`vq.gateway.Gateway`, shared with the CLI, and :mod:`vq.services`).

Contracts:

* Job ids are validated (:func:`vq.domain.ids.is_job_id`) before any path is built; a
  malformed id is :class:`~vq.errors.NotFound` (it names no job), never a file access.
  An unknown job is ``no job <id>`` with the hint :data:`LIST_HINT`, whether the daemon
  or the disk found it missing (:meth:`Backend.no_job`); every 404 carries a hint.
* Log and sample reads never leave the job's workspace: the resolved file must be inside
  the resolved workspace (a symlink pointing elsewhere is refused as NotFound).
* Every :class:`~vq.errors.VqError` leaving this class has server paths (state root,
  config root, archive directory) replaced by placeholders, so HTTP bodies carry none.
* Reads are bounded: log tails read at most :data:`MAX_TAIL_BYTES`, samples at most
  :data:`MAX_SAMPLE_BYTES` from the end of ``samples.jsonl``.
* Methods block on disk or the daemon socket: call them from ``def`` routes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar, cast

from fastapi import Request

from vq._fs import read_regular, read_tail_lines
from vq.domain.events import Event
from vq.domain.ids import is_job_id, resolve_prefix
from vq.domain.receipt import Receipt
from vq.domain.spec import JobSpec
from vq.domain.states import TERMINAL, JobState
from vq.errors import InvalidInput, NotFound, VqError
from vq.gateway import Gateway, since_moment
from vq.protocol.answers import (
    DrainAnswer,
    KillAnswer,
    ListAnswer,
    ListQuery,
    PauseAnswer,
    QuarantinedItem,
    SpecJSON,
    StatusView,
    UndrainAnswer,
)
from vq.protocol.report_answers import OverviewAnswer, UsageAnswer
from vq.services.top import Sample, parse_sample
from vq.web.context import WebConfig

if TYPE_CHECKING:
    from vq.cleanup.jobs import CleanupReportJSON
    from vq.web.cockpit import QueueSummary

__all__ = [
    "FAILED_STATES",
    "MAX_TAIL_BYTES",
    "MAX_TAIL_LINES",
    "Backend",
    "Stream",
    "backend_of",
]

Stream = Literal["stdout", "stderr"]
T = TypeVar("T")

#: The most lines a log tail returns, and the most bytes it reads from the file's end.
MAX_TAIL_LINES = 10_000
MAX_TAIL_BYTES = 2 * 1024 * 1024
#: How much of the end of ``samples.jsonl`` is read (a record is ~300 bytes).
MAX_SAMPLE_BYTES = 4 * 1024 * 1024
MAX_SAMPLES = 5000
#: The hint of every "no such job" answer.
LIST_HINT = "GET /api/v1/jobs lists the jobs"
#: The hint of a missing log or workspace file.
FILES_HINT = "the file appears once the job writes it; GET /api/v1/jobs/<id> shows its state"
#: ``older_than`` values that mean "any age" in :meth:`Backend.cleanup_failed`.
ANY_AGE = frozenset({"", "0", "0s"})
#: What "failed rows" means for the console's cleanup: every terminal state but success.
FAILED_STATES: frozenset[JobState] = TERMINAL - {JobState.COMPLETED}


class Backend:
    """Queue access for one web process (cheap to build: no I/O in the constructor)."""

    def __init__(self, config: WebConfig) -> None:
        self.config = config
        self.paths = config.state
        env = {**os.environ, "VQ_CONFIG_DIR": str(config.config_root)}
        self.gateway = Gateway(config.state, env)

    # --- errors -------------------------------------------------------------------------
    def _scrub(self, text: str | None) -> str | None:
        if text is None:
            return None
        for path, name in (
            (self.paths.archive_dir, "<archive-dir>"),
            (self.paths.root, "<state-root>"),
            (self.config.config_root, "<config-root>"),
        ):
            text = text.replace(str(path), name)
        return text

    @contextmanager
    def _clean_errors(self) -> Iterator[None]:
        try:
            yield
        except VqError as exc:
            exc.message = self._scrub(exc.message) or ""
            exc.hint = self._scrub(exc.hint)
            exc.args = (exc.message,)
            raise

    def _run(self, fn: Callable[[], T]) -> T:
        with self._clean_errors():
            return fn()

    @staticmethod
    def check_id(job_id: str) -> str:
        """``job_id`` when well-formed; NotFound otherwise (it cannot name a job)."""
        if not is_job_id(job_id):
            raise NotFound("no such job: job ids are 12 lowercase hex characters", hint=LIST_HINT)
        return job_id

    def full_id(self, text: str) -> str:
        """The job id ``text`` names: itself, or the one id it is a unique prefix of (at
        least 4 characters); NotFound, InvalidInput or AmbiguousId otherwise."""
        if is_job_id(text):
            return text
        try:
            return resolve_prefix(text, self.gateway.known_ids())
        except InvalidInput:
            raise self.no_job(text[:64]) from None

    @staticmethod
    def no_job(job_id: str) -> NotFound:
        """The one not-found error of a well-formed id that names no job."""
        return NotFound(f"no job {job_id}", hint=LIST_HINT)

    @staticmethod
    def no_route() -> NotFound:
        """The error of a ``/api/v1/jobs/...`` path no route serves (e.g. ``../..`` ids)."""
        return NotFound(
            "no such job or job resource: job ids are 12 lowercase hex characters",
            hint=LIST_HINT,
        )

    def _by_id(self, job_id: str, fn: Callable[[str], T]) -> T:
        """``fn(job_id)`` for a well-formed id, its "no job" error in :meth:`no_job` form."""
        job_id = self.check_id(job_id)
        with self._clean_errors():
            try:
                return fn(job_id)
            except NotFound as exc:
                if exc.message.startswith(f"no job {job_id}"):
                    raise self.no_job(job_id) from None
                raise

    def _spec(self, job_id: str) -> JobSpec:
        return self._by_id(job_id, self.gateway.spec)

    def spec(self, job_id: str) -> JobSpec:
        """The job's spec as stored (NotFound for unknown or malformed ids)."""
        return self._run(lambda: self._spec(job_id))

    # --- listings and views -------------------------------------------------------------
    def list_jobs(
        self,
        states: list[str] | None = None,
        tags: list[str] | None = None,
        name: str | None = None,
        since: str | None = None,
        group: str | None = None,
        *,
        sort: str | None = None,
        table_sort: str | None = None,
        table_dir: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
        count_only: bool | None = None,
    ) -> ListAnswer:
        """``{"jobs", "quarantined", "counts"}``: ``vq list --json`` plus every state's count.

        ``paging``: the parameters of :mod:`vq.services.listing` (``sort``, ``table_sort``,
        ``table_dir``, ``offset``, ``limit``, ``count_only``); with any of them only that
        page is listed and ``total`` and ``total_jobs`` are added.
        """

        def work() -> ListAnswer:
            moment = since_moment(since) if since else None
            params: ListQuery = {
                "states": [s.upper() for s in states or []],
                "tags": list(tags or []),
                "name": name,
                "since": moment.isoformat() if moment else None,
                "group": group,
            }
            # the paging asked for (none: the whole listing, without totals)
            if sort is not None:
                params["sort"] = sort
            if table_sort is not None:
                params["table_sort"] = table_sort
            if table_dir is not None:
                params["table_dir"] = table_dir
            if offset is not None:
                params["offset"] = offset
            if limit is not None:
                params["limit"] = limit
            if count_only is not None:
                params["count_only"] = count_only
            result = self.gateway.list_rows(params)
            result["quarantined"] = [self._quarantined(q) for q in result["quarantined"]]
            return result

        return self._run(work)

    def _quarantined(self, item: QuarantinedItem) -> QuarantinedItem:
        fields: Mapping[str, object] = item  # an item names no ``id`` (the path says "")
        job_id = str(fields.get("id", ""))
        return {
            **item,
            "path": f"queue/{job_id}.json",
            "reason": self._scrub(str(item.get("reason", ""))) or "",
        }

    def status(self, job_id: str) -> StatusView:
        """The ``vq status --json`` view."""
        return self._by_id(job_id, self.gateway.status)

    def states_of(self, job_ids: list[str]) -> dict[str, str | None]:
        """The current state of each job (None for an unknown or unreadable one)."""
        states: dict[str, str | None] = {}
        for job_id in job_ids:
            try:
                states[job_id] = self._spec(job_id).state.value
            except VqError:
                states[job_id] = None
        return states

    def events(self, job_id: str, tail: int | None = None) -> list[Event]:
        """The job's well-formed event records, oldest first (the last ``tail`` of them)."""

        def work() -> list[Event]:
            spec = self._spec(job_id)
            records = self.gateway.events(spec.id, refuse_archived=False)
            return records[-tail:] if tail else records

        return self._run(work)

    # --- files inside the workspace -----------------------------------------------------
    def _inside_workspace(self, job_id: str, relative: str) -> Path:
        workspace = self.paths.workspace(job_id).resolve()
        target = (workspace / relative).resolve()
        if not target.is_relative_to(workspace) or target == workspace:
            raise NotFound(f"job {job_id} has no such file in its workspace", hint=FILES_HINT)
        return target

    def log_file(self, job_id: str, stream: Stream) -> Path:
        """The resolved stdout/stderr file of a job, inside its workspace (NotFound if absent)."""

        def work() -> Path:
            spec = self._spec(job_id)
            if stream not in ("stdout", "stderr"):
                raise InvalidInput("stream must be stdout or stderr")
            if spec.archive_path and not self.paths.workspace(spec.id).exists():
                raise NotFound(
                    f"job {spec.id} was archived; its logs are in the archive",
                    hint="`vq fetch` or the archive's workspace/ folder holds them",
                )
            relative = spec.stdout_path if stream == "stdout" else spec.stderr_path
            path = self._inside_workspace(spec.id, relative)
            if not path.is_file():
                raise NotFound(f"job {spec.id} has no {stream} yet", hint=FILES_HINT)
            return path

        return self._run(work)

    def log_tail(self, job_id: str, stream: Stream, lines: int) -> str:
        """The last ``lines`` lines of a job's stdout or stderr ("" when none yet)."""
        if not 0 <= lines <= MAX_TAIL_LINES:
            raise InvalidInput(f"lines must be between 0 and {MAX_TAIL_LINES}")
        try:
            path = self.log_file(job_id, stream)
        except NotFound:
            self.spec(job_id)  # an unknown job stays a 404; a missing log is empty
            return ""
        if lines == 0:
            return ""
        chunks = read_tail_lines(path, MAX_TAIL_BYTES)
        ends_with_newline = bool(chunks) and chunks[-1] == b""
        if ends_with_newline:
            chunks = chunks[:-1]
        kept = chunks[-lines:]
        text = b"\n".join(kept) + (b"\n" if kept and ends_with_newline else b"")
        return text.decode("utf-8", errors="replace")

    def samples(self, job_id: str, limit: int = 720) -> list[Sample]:
        """The last ``limit`` well-formed watchdog samples (malformed lines skipped)."""
        if not 1 <= limit <= MAX_SAMPLES:
            raise InvalidInput(f"limit must be between 1 and {MAX_SAMPLES}")
        spec = self.spec(job_id)
        try:
            path = self._inside_workspace(spec.id, "_vq/samples.jsonl")
            lines = read_tail_lines(path, MAX_SAMPLE_BYTES)
        except (OSError, NotFound):
            return []
        records = [r for r in (parse_sample(line) for line in lines) if r is not None]
        return records[-limit:]

    def receipt(self, job_id: str) -> Receipt | None:
        """The terminal ``resource-usage.json`` receipt, or None (absent or malformed)."""
        spec = self.spec(job_id)
        try:
            path = self._inside_workspace(spec.id, "_vq/resource-usage.json")
            data = json.loads(read_regular(path, 1024 * 1024, follow=True))
        except (OSError, ValueError, NotFound):
            return None
        return cast(Receipt, data) if isinstance(data, dict) else None

    # --- snapshots ----------------------------------------------------------------------
    def queue_summary(self, max_age: float | None = None) -> QueueSummary:
        """The §6.3 cockpit (:func:`vq.web.cockpit.queue_summary`)."""
        from vq.web.cockpit import queue_summary

        return self._run(lambda: queue_summary(self.gateway, self.paths, max_age))

    def overview(self) -> OverviewAnswer:
        """``vq overview --json``."""
        return self._run(self.gateway.overview)

    def usage(self, by: str = "tag", since: str | None = None) -> UsageAnswer:
        """``vq usage --json`` (``by``: tag, name, day or state)."""
        if by not in ("tag", "name", "day", "state"):
            raise InvalidInput("by must be tag, name, day or state")
        return self._run(lambda: self.gateway.usage(by, since_moment(since)))

    # --- control ------------------------------------------------------------------------
    def kill(self, job_id: str) -> KillAnswer:
        """``vq kill --json`` item; Conflict when the job already ended otherwise."""
        return self._by_id(job_id, self.gateway.kill)

    def pause(self, job_id: str) -> PauseAnswer:
        return self._by_id(job_id, self.gateway.pause)

    def resume(self, job_id: str) -> PauseAnswer:
        return self._by_id(job_id, self.gateway.resume)

    def resubmit(self, job_id: str, overrides: Mapping[str, object] | None = None) -> SpecJSON:
        """The new job's spec (``vq resubmit --json``)."""
        return self._by_id(job_id, lambda jid: self.gateway.resubmit(jid, overrides or {}))

    def drain(
        self, full: bool = False, reject_submits: bool = False, reason: str | None = None
    ) -> DrainAnswer:
        return self._run(
            lambda: self.gateway.drain(full=full, reject_submits=reject_submits, reason=reason)
        )

    def undrain(self) -> UndrainAnswer:
        return self._run(self.gateway.undrain)

    def cleanup_failed(
        self,
        *,
        older_than: str | None = "14d",
        states: list[str] | None = None,
        archive: bool = True,
        execute: bool = False,
    ) -> CleanupReportJSON:
        """``vq cleanup --json`` restricted to failed rows (:data:`FAILED_STATES`).

        A dry run unless ``execute``; ``states`` narrows among the failed states;
        ``older_than`` None, ``""``, ``"0"`` or ``"0s"`` means any age (just-failed jobs
        too). Only terminal jobs are ever candidates (:mod:`vq.cleanup.jobs`). Archive
        (default) writes ``.tar.bz2`` archives and removes workspaces; otherwise only
        workdirs are swept. The specs stay (``archive_path`` records where).
        """
        from vq.cleanup.jobs import CleanupPolicy

        def work() -> CleanupReportJSON:
            chosen = [s.upper() for s in states] if states else sorted(FAILED_STATES)
            for state in chosen:
                if state not in _FAILED_NAMES:
                    raise InvalidInput(
                        f"{state} is not a failed state",
                        hint="failed states are " + ", ".join(sorted(_FAILED_NAMES)),
                    )
            any_age = (older_than or "").strip().lower() in ANY_AGE
            policy = CleanupPolicy.parse("1s" if any_age else str(older_than), chosen, archive)
            if any_age:
                policy = replace(policy, older_than_seconds=0)
            report = self.gateway.cleanup(policy, execute=execute)
            result = report.as_dict()
            for item in result["jobs"]:
                item["archive_path"] = self._scrub(item["archive_path"])
                item["error"] = self._scrub(item["error"])
            return result

        return self._run(work)


def backend_of(request: Request) -> Backend:
    """The app's one :class:`Backend` (a FastAPI dependency: ``Depends(backend_of)``)."""
    backend: Backend | None = getattr(request.app.state, "vq_backend", None)
    if backend is None:
        backend = Backend(request.app.state.vq)
        request.app.state.vq_backend = backend
    return backend


_FAILED_NAMES = frozenset(state.value for state in FAILED_STATES)
