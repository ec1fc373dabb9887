"""Ask the daemon when one answers, else run the same service against the disk.

This is the one implementation of the "daemon or disk" rule that the CLI
(:mod:`vq.cli`) and the web console (:mod:`vq.web.backend`) share, so ``vq ... --json``
and ``/api/v1`` return the same shapes from the same code:

* :meth:`Gateway.call` — the daemon's answer, or None when no daemon is answering;
* :meth:`Gateway.ask` — the same, but a daemon that dies mid-call also yields None
  (for read-only snapshots that can fall back to the disk safely);
* :meth:`Gateway.daemon_only` — verbs that mean nothing without a daemon (``reload``,
  ``ping``, ``admin_status``): the answer, or :class:`~vq.errors.DaemonNotRunning`;
* the verbs (``submit``, ``list_rows``, ``job_ids``, ``status``, ``top``, ``kill``,
  ``pause``, ``resume``, ``resubmit``, ``drain``, ``undrain``, ``throttle``,
  ``overview``, ``usage``) — each tries the daemon's RPC method and otherwise calls the
  matching :mod:`vq.services` function over a
  :class:`~vq.services.context.ServiceContext` built from the configured caps; both
  paths answer the same shape (``tests/integration/test_gateway_parity.py``);
* the disk-only verbs (:mod:`vq.gateway.disk`: ``spec``, ``events``, ``final_state``,
  ``fetch_tree``, ``fetch_artifact``, ``cleanup``): the spec files and workspaces are
  the truth for them whether or not a daemon runs.

The halves live apart, each a class in its own module that the gateway composes (no
inheritance across files): :mod:`vq.gateway.daemon` (:class:`DaemonLink`: the socket, the
RPC calls, ``daemon.pid``), :mod:`vq.gateway.disk` (:class:`DiskVerbs`: the disk-only
verbs and the service context) and :mod:`vq.gateway.fallback` (:class:`DiskFallbacks`:
each daemon verb's answer from the disk); :class:`Gateway` here only chooses between
them, verb by verb. The CLI (:mod:`vq.cli`) and the web console (:mod:`vq.web`) reach the
state through this class and the services only, never the store (an import contract
enforces it).

Import cost: only the stdlib client, errors and paths at import time; services, pydantic
and the configuration are imported on the fallback paths. ``vq submit``'s fast path
(:mod:`vq.cli.submit_fast`) tries the daemon with the stdlib client itself and calls
:meth:`Gateway.submit_on_disk` only when none answers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, TypeVar

from vq.client import submit_to_owner_socket
from vq.domain.durations import parse_moment
from vq.paths import MultiUserLayout, StatePaths
from vq.protocol import answers as rpc
from vq.protocol.answers import (
    DrainAnswer,
    FinalState,
    KillAnswer,
    ListAnswer,
    ListQuery,
    ListRow,
    PauseAnswer,
    Rpc,
    SpecJSON,
    StatusView,
    SubmitAnswer,
    ThrottleAnswer,
    UndrainAnswer,
)
from vq.protocol.report_answers import OverviewAnswer, TopAnswer, UsageAnswer

from .daemon import SNAPSHOT_TIMEOUT_SECONDS, DaemonLink
from .disk import DiskVerbs
from .fallback import DiskFallbacks

if TYPE_CHECKING:
    from pathlib import Path

    from vq.cleanup.jobs import CleanupPolicy, CleanupReport
    from vq.domain.admission import Caps
    from vq.domain.events import Event
    from vq.domain.spec import JobSpec
    from vq.fetch.local import FetchResult
    from vq.fetch.snapshot import SourceKind
    from vq.services.context import ServiceContext
    from vq.services.ownership import OwnerCheck

__all__ = ["SNAPSHOT_TIMEOUT_SECONDS", "Gateway", "since_moment"]

A = TypeVar("A")


def since_moment(text: str | None) -> datetime | None:
    """A ``--since`` value: an ISO time (naive = local time) or a duration ago (``2h``).

    InvalidInput (from the duration parser) when it is neither.
    """
    if text is None:
        return None
    return parse_moment(text, datetime.now(UTC), ago=True)


class Gateway:
    """The daemon-or-disk access to one state root.

    Composed of a :class:`DaemonLink` (``link``: the socket), a :class:`DiskVerbs`
    (``disk``: the files, the service context) and a :class:`DiskFallbacks`
    (``fallback``: each daemon verb's answer from the disk); this class only chooses
    between them, verb by verb, and forwards the verbs that need no choice.

    ``env`` selects the configuration (``VQ_CONFIG_DIR`` and its fallbacks) used for the
    caps, profiles and programs of the no-daemon path; None means ``os.environ``.
    """

    def __init__(
        self,
        paths: StatePaths,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        owner: int | None = None,
    ) -> None:
        self.paths = paths
        self.env = env
        self.timeout = timeout
        self.owner = owner
        self.link = DaemonLink(paths, timeout)
        self.disk = DiskVerbs(paths, env, owner)
        self.fallback = DiskFallbacks(self.disk)

    # --- the daemon alone ---------------------------------------------------------------
    def call(self, method: Rpc[A], params: Mapping[str, object] | None = None) -> A | None:
        """:meth:`DaemonLink.call`: the daemon's answer, or None when none answers."""
        return self.link.call(method, params)

    def ask(
        self,
        method: Rpc[A],
        params: Mapping[str, object] | None = None,
        timeout: float = SNAPSHOT_TIMEOUT_SECONDS,
    ) -> A | None:
        """:meth:`DaemonLink.ask`: also None when the daemon fails mid-call (reads only)."""
        return self.link.ask(method, params, timeout)

    def daemon_only(self, method: Rpc[A], params: Mapping[str, object] | None = None) -> A:
        """:meth:`DaemonLink.daemon_only`: DaemonNotRunning when no daemon answers."""
        return self.link.daemon_only(method, params)

    def daemon_pid(self) -> int | None:
        """:meth:`DaemonLink.daemon_pid`: the live pid in ``daemon.pid``, or None."""
        return self.link.daemon_pid()

    # --- the disk alone -----------------------------------------------------------------
    def local_context(self) -> ServiceContext:
        """:meth:`DiskVerbs.local_context`: a service context over the disk."""
        return self.disk.local_context()

    def owner_check(self) -> OwnerCheck | None:
        """:meth:`DiskVerbs.owner_check`: the ownership helper (None: single-user)."""
        return self.disk.owner_check()

    def known_ids(self) -> list[str]:
        """:meth:`DiskVerbs.known_ids`: every job id with a spec file."""
        return self.disk.known_ids()

    def spec(self, job_id: str) -> JobSpec:
        """:meth:`DiskVerbs.spec`: the job's spec, behind the ownership helper."""
        return self.disk.spec(job_id)

    def events(self, job_id: str, *, refuse_archived: bool = True) -> list[Event]:
        """:meth:`DiskVerbs.events`: the job's timeline."""
        return self.disk.events(job_id, refuse_archived=refuse_archived)

    def final_state(self, job_id: str) -> FinalState | None:
        """:meth:`DiskVerbs.final_state`: how the job ended, or None while it has not."""
        return self.disk.final_state(job_id)

    def fetch_tree(self, job_id: str, dest: Path | None, kind: SourceKind) -> FetchResult:
        """:meth:`DiskVerbs.fetch_tree` (``vq fetch``)."""
        return self.disk.fetch_tree(job_id, dest, kind)

    def fetch_artifact(
        self, job_id: str, name: str, dest: Path | None, kind: SourceKind
    ) -> FetchResult:
        """:meth:`DiskVerbs.fetch_artifact` (``vq fetch --name``)."""
        return self.disk.fetch_artifact(job_id, name, dest, kind)

    def cleanup(self, policy: CleanupPolicy, *, execute: bool) -> CleanupReport:
        """:meth:`DiskVerbs.cleanup` (``vq cleanup``; a dry run unless ``execute``)."""
        return self.disk.cleanup(policy, execute=execute)

    def usage(self, by: str, since: datetime | None) -> UsageAnswer:
        """:meth:`DiskFallbacks.usage` (``vq usage``: always from the spec files)."""
        return self.fallback.usage(by, since)

    def submit_on_disk(self, params: Mapping[str, object]) -> SubmitAnswer:
        """:meth:`DiskFallbacks.submit_on_disk` (``vq submit`` without a daemon)."""
        return self.fallback.submit_on_disk(params)

    # --- reads --------------------------------------------------------------------------
    def list_rows(self, params: ListQuery) -> ListAnswer:
        """``{"jobs", "quarantined", "counts"}``: the ``vq list --json`` payload.

        ``counts``: every job by state. With paging parameters (:mod:`vq.services.listing`)
        one page, plus ``total`` and ``total_jobs``. A daemon of an older version that
        does not page or count is answered from the disk instead.
        """
        result = self.call(rpc.LIST, params)
        if result is None:
            return self.fallback.disk_list_rows(params)
        if "counts" not in result:
            return self.fallback.disk_list_rows(params)
        if "total" not in result:
            from vq.services.listing import page_params

            if page_params(params) is not None:
                return self.fallback.disk_list_rows(params)
        return result

    def status(self, job_id: str, uid: int | None = None) -> StatusView:
        """The ``vq status --json`` view of one job (with ``queue_eta`` when PENDING).

        ``uid`` (multi-user mode): the copy in that owner's tree, for an id several
        owners' trees hold (a bare lookup of it is ambiguous)."""
        uid = self.owner if uid is None else uid
        view = self.call(rpc.STATUS, {"id": job_id, **({"uid": uid} if uid is not None else {})})
        if view is not None:
            return view
        return self.fallback.disk_status(job_id, uid)

    def job_ids(self, states: list[str], tags: list[str]) -> list[str]:
        """The ids of the jobs in ``states`` carrying every tag in ``tags``."""
        listing = self.list_rows({"states": states, "tags": tags})
        return [str(row["id"]) for row in listing["jobs"]]

    def top(self, live_states: tuple[str, ...], timeout: float) -> TopAnswer:
        """The ``vq top --json`` snapshot: the daemon's jobs and caps, or the disk's."""
        from vq.services.reports import caps_from_ping
        from vq.services.top import build_top, read_latest_sample

        ping = self.ask(rpc.PING, timeout=timeout)
        live = {"states": sorted(live_states)}
        listing = self.ask(rpc.LIST, live, timeout=timeout) if isinstance(ping, dict) else None
        counts: dict[str, int] | None = None
        caps: Caps | None
        answered = isinstance(ping, dict) and isinstance(listing, dict)
        rows: list[ListRow]
        if isinstance(ping, dict) and isinstance(listing, dict):
            rows = listing["jobs"]
            counts = listing.get("counts")  # every job's state, counted by the daemon
            caps = caps_from_ping(ping)
            pid = ping.get("pid")
        else:  # no daemon (or it stopped between the calls): the disk, the last caps
            from vq.services.control import read_capacity

            rows, caps, pid = self.fallback.disk_top_rows(), read_capacity(self.paths), None
        samples = {
            row["id"]: read_latest_sample(self.paths.samples(row["id"]))
            for row in rows
            if row["state"] in live_states
        }
        return build_top(
            rows, samples, caps, datetime.now(UTC), pid, counts=counts, daemon_running=answered
        )

    def overview(self) -> OverviewAnswer:
        """The ``vq overview --json`` snapshot (without a daemon: the last advertised caps,
        unknown when none is readable)."""
        from vq.services.reports import build_overview, caps_from_ping

        now = datetime.now(UTC)
        quotas = self.fallback.quota_policy()
        ping = self.ask(rpc.PING)
        listing = self.ask(rpc.LIST, {"states": []}) if isinstance(ping, dict) else None
        if isinstance(ping, dict) and isinstance(listing, dict):
            return build_overview(
                listing["jobs"],
                caps_from_ping(ping),
                now,
                ping,
                quarantined=len(listing["quarantined"]),
                quotas=quotas,
            )
        return self.fallback.disk_overview(now, quotas)

    # --- submission ---------------------------------------------------------------------
    def submit(self, params: Mapping[str, object]) -> SubmitAnswer:
        """The ``vq submit --json`` payload of one submission (job, array or chain).

        In multi-user mode the job always lands in the submitter's own tree, never through
        the root daemon's ``daemon.sock``: a plain one is handed to the user's own submit
        socket (:mod:`vq._owner_socket`), which writes it there as the user; any other
        is written here."""
        if self.paths.owner_dir is not None:
            env = os.environ if self.env is None else self.env
            answered = submit_to_owner_socket(str(self.paths.root), params, env)
            if answered is not None:
                return answered
        if self.paths.owner_dir is not None or isinstance(self.paths, MultiUserLayout):
            return self.submit_on_disk(params)
        payload = self.call(rpc.SUBMIT, params)
        if payload is not None:
            return payload
        return self.submit_on_disk(params)

    # --- job control --------------------------------------------------------------------
    def _call_for_owner(self, method: Rpc[A], job_id: str) -> A | None:
        """``method`` on the daemon, after the daemon confirmed (``status --uid``) that
        the job is the named owner's when one was named (NotFound otherwise)."""
        owner = self.owner
        if owner is not None and self.call(rpc.STATUS, {"id": job_id, "uid": owner}) is not None:
            return self.call(method, {"id": job_id})
        if self.owner is not None:
            return None  # no daemon: the disk path applies the ownership helper
        return self.call(method, {"id": job_id})

    def kill(self, job_id: str) -> KillAnswer:
        """The ``vq kill --json`` item. Without a daemon, waits out the grace itself."""
        result = self._call_for_owner(rpc.KILL, job_id)
        if result is not None:
            return result
        return self.fallback.disk_kill(job_id)

    def pause(self, job_id: str) -> PauseAnswer:
        return self._pause_or_resume("pause", job_id)

    def resume(self, job_id: str) -> PauseAnswer:
        return self._pause_or_resume("resume", job_id)

    def _pause_or_resume(self, verb: Literal["pause", "resume"], job_id: str) -> PauseAnswer:
        result = self._call_for_owner(rpc.PAUSE if verb == "pause" else rpc.RESUME, job_id)
        if result is not None:
            return result
        return self.fallback.disk_pause_or_resume(verb, job_id)

    def resubmit(self, job_id: str, overrides: Mapping[str, object]) -> SpecJSON:
        """The new job's spec (``vq resubmit --json``)."""
        spec = self.call(rpc.RESUBMIT, {"id": job_id, "overrides": overrides})
        if spec is not None:
            return spec
        return self.fallback.disk_resubmit(job_id, overrides)

    # --- queue control ------------------------------------------------------------------
    def drain(self, *, full: bool, reject_submits: bool, reason: str | None) -> DrainAnswer:
        """Stop dispatching (``drain.json``); a full drain also pauses running jobs."""
        mode = "full" if full else "new"
        params = {"mode": mode, "reject_submits": reject_submits, "reason": reason}
        result = self.call(rpc.DRAIN, params)
        if result is not None:
            return result
        return self.fallback.disk_drain(mode, reject_submits, reason)

    def undrain(self) -> UndrainAnswer:
        """Dispatch again and resume the jobs a full drain paused."""
        result = self.call(rpc.UNDRAIN, {})
        if result is not None:
            return result
        return self.fallback.disk_undrain()

    def throttle(
        self,
        *,
        clear: bool,
        max_jobs: int | None = None,
        max_cpus: int | None = None,
        seconds: int | None = None,
    ) -> ThrottleAnswer:
        """Lower the caps for a while (``throttle.json``), or clear the throttle."""
        params = {"max_jobs": max_jobs, "max_cpus": max_cpus, "seconds": seconds, "clear": clear}
        result = self.call(rpc.THROTTLE, {k: v for k, v in params.items() if v is not None})
        if result is not None:
            return result
        return self.fallback.disk_throttle(
            clear=clear, max_jobs=max_jobs, max_cpus=max_cpus, seconds=seconds
        )
