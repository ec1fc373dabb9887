"""Fleet reads for the console: one bounded SSH call per host per refresh, shared.

Contract of :class:`FleetSource` (one per app, created lazily):

* :meth:`FleetSource.hosts` returns one :class:`HostView` per configured host, in name
  order. A host marked ``down`` is never contacted. Every other host is read with
  ``vq web fleet-snapshot --json`` (:mod:`vq.web.fleet.snapshots`), bounded by its
  ``ssh_timeout``; all hosts are read in parallel.
* Answers are cached per host for :data:`FRESH_SECONDS`; concurrent readers of the same
  host share one in-flight call (single flight), so ten browsers refreshing every few
  seconds cause at most one SSH call per host per :data:`FRESH_SECONDS`.
* A reader never waits for the refresh of a host that answered less than
  ``2 × FRESH_SECONDS`` ago: it gets that answer at once while the refresh runs in the
  background (stale while revalidating), until that refresh settles (within the host's
  ``ssh_timeout``), so a page open on a busy fleet does not pay an SSH read every
  refresh period. Only an older answer, a first read or a read after
  :meth:`FleetSource.forget` waits for the host (bounded by its ``ssh_timeout``).
* A host whose last answer was a failure is not waited for: its row (status, reason,
  ``last_ok_at`` from the health file) is served at once while a refresh runs in the
  background. A partitioned host therefore costs its ``ssh_timeout`` once, when it
  first stops answering, and comes back on a later refresh without a restart.
* :meth:`FleetSource.job` reads one job's detail (``vq web fleet-job ID --json``),
  cached the same way; :meth:`FleetSource.act` runs a control verb (never cached) and
  then drops the host's and the job's cached reads.
* :meth:`FleetSource.listing` reads a selection of a host's jobs the snapshot cannot
  answer (``vq web fleet-list``: a filter on a host with more jobs than a snapshot
  lists, or a page past them), cached the same way per host, selection and size. The
  fleet table's first page, unfiltered, never needs it.
* This workstation is one of the hosts: given ``local`` (the console's own queue, a
  :class:`~vq.web.fleet.snapshots.Snapshots` factory), :meth:`FleetSource.hosts` starts
  with :data:`LOCAL` (``localhost``), whose snapshot, job details and listings are the
  same payloads read in-process (no SSH), cached the same way and bounded by
  :data:`LOCAL_WAIT_S`; its scheduler lanes come with its snapshot. Control verbs are
  not sent to it here (its jobs are acted on through the single-host API).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from vq.errors import HostDown, TransportError, VqError
from vq.hosts.health import mark_down, read_health
from vq.protocol.answers import ListQuery
from vq.protocol.remote_answers import (
    ActionAnswer,
    FleetJobAnswer,
    FleetListAnswer,
    FleetSnapshotAnswer,
    StatusAnswer,
)
from vq.remote.fleet import Fleet
from vq.remote.host import job_words
from vq.web.fleet.shapes import FleetRow, HostJSON, HostListing, JobSnapshot, LaneSummary

if TYPE_CHECKING:
    from vq.web.cockpit import QueueSummary
    from vq.web.fleet.snapshots import Snapshots

__all__ = ["FRESH_SECONDS", "LOCAL", "LOCAL_WAIT_S", "FleetSource", "HostView"]

#: This workstation's name among the fleet's hosts (its own queue, read in-process).
LOCAL = "localhost"
#: How long a reader waits for this queue's own snapshot (a disk scan, no SSH).
LOCAL_WAIT_S = 10.0

#: How long one host's answer (or one job's detail) is reused: the pages refresh this often.
FRESH_SECONDS = 5.0
_MAX_PARALLEL = 8
#: Extra seconds a reader waits for a call beyond the host's ssh_timeout.
_WAIT_SLACK_S = 1.0
#: Cached answers kept before the stale ones are dropped.
_MAX_ENTRIES = 1000
#: Each hidden ``vq web`` verb's answer (validated before it is cached).
_ANSWERS: dict[str, type[BaseModel]] = {
    "fleet-snapshot": FleetSnapshotAnswer,
    "fleet-job": FleetJobAnswer,
    "fleet-list": FleetListAnswer,
}


@dataclass
class HostView:
    """One host as the fleet pages show it."""

    name: str
    status: str  # ok | unreachable | invalid | down
    error: str | None = None
    last_ok_at: str | None = None
    summary: QueueSummary | None = None  # as the host sent it
    jobs: list[FleetRow] = field(default_factory=list)
    total_jobs: int = 0
    running: list[FleetRow] = field(default_factory=list)
    #: The scheduler lanes the host drives (:mod:`vq.web.fleet.lanes`; [] from an older vq).
    lanes: list[LaneSummary] = field(default_factory=list)

    def as_dict(self) -> HostJSON:
        return {
            "name": self.name,
            "status": self.status,
            "error": self.error,
            "last_ok_at": self.last_ok_at,
            "summary": self.summary or None,
            "total_jobs": self.total_jobs,
            "lanes": self.lanes,
        }


@dataclass
class _Entry:
    value: Any = None  # the last answer (a payload or the VqError it raised)
    at: float = float("-inf")
    answered: bool = False
    pending: Future[Any] | None = None
    serve_while_pending: bool = False  # the answer was recent when ``pending`` started


def _rows(host: str, rows: Any) -> list[FleetRow]:
    """The host's rows plus ``host`` and ``lane`` (the scheduler lane, null for others)."""
    return [
        cast(FleetRow, dict(row, host=host, lane=row.get("scheduler_target") or None))
        for row in rows or []
        if isinstance(row, dict)
    ]


def _active(rows: list[FleetRow]) -> list[FleetRow]:
    """Running and paused rows (a snapshot of an older vq lists no ``running``)."""
    return [row for row in rows if row.get("state") in ("RUNNING", "SUSPENDED")]


def _view(name: str, answer: Any, last_ok_at: str | None) -> HostView:
    """An answering host's view from its snapshot payload."""
    payload = answer if isinstance(answer, dict) else {}
    jobs = _rows(name, payload.get("jobs"))
    running = payload.get("running")
    return HostView(
        name,
        "ok",
        last_ok_at=last_ok_at,
        summary=payload.get("summary") or None,
        jobs=jobs,
        total_jobs=int(payload.get("total_jobs") or len(jobs)),
        running=_rows(name, running) if isinstance(running, list) else _active(jobs),
        lanes=[
            cast(LaneSummary, lane) for lane in payload.get("lanes") or [] if isinstance(lane, dict)
        ],
    )


def _filters(words: list[str]) -> ListQuery:
    """The selection ``vq web fleet-list`` options ``words`` ask for
    (:meth:`vq.web.fleet.views.QueueFilter.words`), as a list query."""
    states: list[str] = []
    tags: list[str] = []
    query: ListQuery = {"states": states, "tags": tags, "name": None, "since": None, "group": None}
    for option, value in zip(words[::2], words[1::2], strict=False):
        if option == "--state":
            states.append(value)
        elif option == "--tag":
            tags.append(value)
        elif option == "--name":
            query["name"] = value
        elif option == "--since":
            query["since"] = value
        elif option == "--group":
            query["group"] = value
    return query


class FleetSource:
    """Cached, single-flight fleet reads (see the module docstring)."""

    def __init__(
        self,
        load: Callable[[], Fleet],
        *,
        local: Callable[[], Snapshots] | None = None,
        fresh_s: float = FRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._local = local
        self._fleet: Fleet | None = None
        self._fresh_s, self._clock = fresh_s, clock
        # Re-entrant: a future that is already done runs its callback (``_settle``) at once,
        # in the thread that adds it, which holds this lock.
        self._lock = threading.RLock()
        self._entries: dict[tuple[str, ...], _Entry] = {}
        self._pool = ThreadPoolExecutor(max_workers=_MAX_PARALLEL, thread_name_prefix="vq-fleet")
        #: SSH calls started per host (the fleet benchmark reads it).
        self.calls: dict[str, int] = {}

    @property
    def fleet(self) -> Fleet:
        if self._fleet is None:
            self._fleet = self._load()
        return self._fleet

    def names(self) -> list[str]:
        """The configured remote hosts (this workstation is not one of them)."""
        return self.fleet.names()

    def view_names(self) -> list[str]:
        """Every host the fleet pages show: :data:`LOCAL` first (when this queue is
        read), then the configured remote hosts."""
        return ([LOCAL] if self._local is not None else []) + self.names()

    def check_host(self, name: str) -> None:
        """NotFound (404) for a name that is not a configured host (nor this queue)."""
        if name == LOCAL and self._local is not None:
            return
        self.fleet.host(name)

    def _is_local(self, host: str) -> bool:
        return host == LOCAL and self._local is not None

    # --- the cache ----------------------------------------------------------------------
    def _call(self, host: str, words: list[str]) -> Any:
        with self._lock:
            self.calls[host] = self.calls.get(host, 0) + 1
        try:
            if self._is_local(host):
                return self._read_here(words)
            return self.fleet.host(host).run_json(words, _ANSWERS[words[1]])
        except VqError as exc:
            return exc
        except Exception as exc:  # never leave a refresh without an answer
            return TransportError(f"host {host}: the read failed ({type(exc).__name__})")

    def _read_here(self, words: list[str]) -> Any:
        """The answer ``vq WORDS…`` would print on this queue, read in-process."""
        assert self._local is not None
        snapshots = self._local()
        if words[1] == "fleet-snapshot":
            return snapshots.host()
        if words[1] == "fleet-job":
            return snapshots.job(words[-1])
        return snapshots.listing(_filters(words[5:]), int(words[4]))

    def _get(self, key: tuple[str, ...], host: str, words: list[str]) -> Any:
        """The cached answer for ``key``, refreshed as the module docstring says."""
        with self._lock:
            if len(self._entries) > _MAX_ENTRIES:
                self._prune()
            entry = self._entries.setdefault(key, _Entry())
            now = self._clock()
            if now - entry.at < self._fresh_s:
                return entry.value
            recent = entry.answered and now - entry.at < 2 * self._fresh_s  # forget(): -inf
            if entry.pending is None:
                future = self._pool.submit(self._call, host, words)
                entry.pending, entry.serve_while_pending = future, recent
                future.add_done_callback(lambda done: self._settle(key, done))
            pending = entry.pending
            failed_before = entry.answered and isinstance(entry.value, VqError)
            recent = recent or entry.serve_while_pending  # the refresh is bounded
        if failed_before or recent:
            return entry.value  # the background refresh decides the next answer
        timeout = LOCAL_WAIT_S if self._is_local(host) else self.fleet.hosts[host].ssh_timeout
        wait = timeout + _WAIT_SLACK_S
        try:
            return pending.result(timeout=wait)
        except FutureTimeout:
            with self._lock:
                if entry.answered:
                    return entry.value
            return TransportError(f"host {host}: no answer within {wait:.0f} s", transient=True)

    def _prune(self) -> None:
        """Drop settled entries no reader asked for lately (job pages come and go)."""
        stale = self._clock() - 12 * self._fresh_s
        for key in [k for k, e in self._entries.items() if e.pending is None and e.at < stale]:
            del self._entries[key]

    def _settle(self, key: tuple[str, ...], done: Future[Any]) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.pending is not done:
                return  # a call forget() detached: it may predate the change
            entry.value, entry.at, entry.pending = done.result(), self._clock(), None
            entry.answered = True

    def forget(self, host: str, job_id: str | None = None) -> None:
        """Drop cached reads of ``host`` (and of its job ``job_id``) after a change: the
        next reader waits for a new call (an in-flight one may predate the change)."""
        with self._lock:
            for key in [("host", host), *([("job", host, job_id)] if job_id else [])]:
                entry = self._entries.get(key)
                if entry is not None:
                    entry.at, entry.pending = float("-inf"), None

    # --- reads --------------------------------------------------------------------------
    def host(self, name: str) -> HostView:
        """One host's view (never raises for a host that does not answer)."""
        fleet = self.fleet
        if self._is_local(name):
            return self._local_view()
        if fleet.hosts[name].down:
            health = mark_down(fleet.state_root, name)
            return HostView(name, "down", "marked down in the configuration", health.last_ok_at)
        answer = self._get(("host", name), name, ["web", "fleet-snapshot", "--json"])
        health = read_health(fleet.state_root, name)
        if isinstance(answer, VqError):
            status = health.status if health.status in ("unreachable", "invalid") else "invalid"
            if isinstance(answer, TransportError) and answer.transient:
                status = "unreachable"
            return HostView(name, status, answer.message, health.last_ok_at)
        return _view(name, answer, health.last_ok_at)

    def _local_view(self) -> HostView:
        """This queue's view: its snapshot read in-process (an error is its row)."""
        answer = self._get(("host", LOCAL), LOCAL, ["web", "fleet-snapshot", "--json"])
        if isinstance(answer, VqError):
            return HostView(LOCAL, "invalid", answer.message)
        return _view(LOCAL, answer, None)

    def hosts(self) -> list[HostView]:
        """Every host (this queue first), read in parallel (see the module docstring)."""
        names = self.view_names()
        if not names:
            return []
        with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL, len(names))) as pool:
            return list(pool.map(self.host, names))

    def job(self, host: str, job_id: str) -> JobSnapshot:
        """One job's detail payload; the host's VqError (NotFound, unreachable…) raised."""
        self.check_host(host)
        if not self._is_local(host) and self.fleet.hosts[host].down:
            raise HostDown(
                f"host {host} is marked down in the configuration",
                hint=f"remove `down = true` from [hosts.{host}] to use it again",
            )
        words = job_words(["web", "fleet-job", "--json"], [job_id])
        answer = self._get(("job", host, job_id), host, words)
        if isinstance(answer, VqError):
            raise answer
        if not isinstance(answer, dict):
            raise TransportError(f"host {host}: the job detail was not a JSON object")
        return cast(JobSnapshot, answer)  # FleetJobAnswer checked it

    def listing(self, host: str, words: list[str], want: int) -> HostListing:
        """``{"jobs": [ROW + host], "total"}``: the host's newest ``want`` jobs matching the
        ``vq web fleet-list`` options ``words``, and how many match; the host's VqError
        raised."""
        key = ("list", host, str(want), *words)
        listing = ["web", "fleet-list", "--json", "--limit", str(want), *words]
        answer = self._get(key, host, listing)
        if isinstance(answer, VqError):
            raise answer
        if not isinstance(answer, dict) or not isinstance(answer.get("total"), int):
            raise TransportError(f"host {host}: the job listing was not the expected JSON")
        return {"jobs": _rows(host, answer.get("jobs")), "total": answer["total"]}

    # --- actions ------------------------------------------------------------------------
    def act(self, host: str, job_id: str, action: str) -> Any:
        """Run ``vq ACTION JOB --json`` on ``host`` (errors raised as the host typed them;
        the answer validated: the rows of ``kill``/``pause``/``resume``, the new job of
        ``resubmit``)."""
        self.check_host(host)
        with self._lock:
            self.calls[host] = self.calls.get(host, 0) + 1
        answer = StatusAnswer if action == "resubmit" else ActionAnswer
        try:
            return self.fleet.host(host).run_json(job_words([action, "--json"], [job_id]), answer)
        finally:
            self.forget(host, job_id)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
