"""Ask the daemon when one answers, else run the same service against the disk.

This is the one implementation of the "daemon or disk" rule that the CLI
(:mod:`vq.cli`) and the web console (:mod:`vq.web.backend`) share, so ``vq ... --json``
and ``/api/v1`` return the same shapes from the same code:

* :meth:`Gateway.call` — the daemon's answer, or None when no daemon is answering;
* :meth:`Gateway.ask` — the same, but a daemon that dies mid-call also yields None
  (for read-only snapshots that can fall back to the disk safely);
* the verbs (``list_rows``, ``status``, ``kill``, ``pause``, ``resume``, ``resubmit``,
  ``drain``, ``undrain``, ``overview``, ``usage``) — each tries the daemon's RPC method
  and otherwise calls the matching :mod:`vq.services` function over a
  :class:`~vq.services.context.ServiceContext` built from the configured caps.

Import cost: only the stdlib client, errors and paths at import time; services, pydantic
and the configuration are imported on the fallback paths (``vq submit``'s fast path does
not import this module at all).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from vq._fs import read_regular
from vq.client import Client
from vq.domain.durations import parse_moment
from vq.errors import DaemonNotRunning, ProtocolError
from vq.paths import StatePaths

if TYPE_CHECKING:
    from vq.services.context import ServiceContext

__all__ = ["Gateway", "since_moment"]

#: How long a read-only snapshot waits for the daemon before reading the disk instead.
SNAPSHOT_TIMEOUT_SECONDS = 10.0


def since_moment(text: str | None) -> datetime | None:
    """A ``--since`` value: an ISO time (naive = local time) or a duration ago (``2h``).

    InvalidInput (from the duration parser) when it is neither.
    """
    if text is None:
        return None
    return parse_moment(text, datetime.now(UTC), ago=True)


class Gateway:
    """The daemon-or-disk access to one state root.

    ``env`` selects the configuration (``VQ_CONFIG_DIR`` and its fallbacks) used for the
    caps, profiles and programs of the no-daemon path; None means ``os.environ``.
    """

    def __init__(
        self, paths: StatePaths, env: Mapping[str, str] | None = None, timeout: float = 60.0
    ) -> None:
        self.paths = paths
        self.env = env
        self.timeout = timeout

    # --- plumbing -----------------------------------------------------------------------
    def client(self, timeout: float | None = None) -> Client:
        return Client(str(self.paths.daemon_sock), timeout=timeout or self.timeout)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any | None:
        """The daemon's answer, or None when no daemon is answering (use the fallback)."""
        if not self.paths.daemon_sock.exists():
            return None
        try:
            return self.client().call(method, params)
        except DaemonNotRunning:
            return None

    def ask(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        timeout: float = SNAPSHOT_TIMEOUT_SECONDS,
    ) -> Any | None:
        """Like :meth:`call`, but a daemon that fails mid-call also yields None (reads only)."""
        if not self.paths.daemon_sock.exists():
            return None
        try:
            return self.client(timeout).call(method, params)
        except (DaemonNotRunning, ProtocolError, OSError):
            return None

    def local_context(self) -> ServiceContext:
        """A service context over the disk (no daemon needed): the configured caps as the
        budget, and the last advertised snapshot (``daemon_capacity.json``) as the base
        caps the capacity classification uses; None, so null, when none is readable."""
        from vq.config import load_settings
        from vq.services.context import ServiceContext
        from vq.services.control import read_capacity

        settings = load_settings(self.env)
        return ServiceContext(
            self.paths,
            settings.daemon.caps(),
            profiles=settings.profile,
            programs=settings.programs,
            base_caps=read_capacity(self.paths),
        )

    # --- reads --------------------------------------------------------------------------
    def list_rows(self, params: dict[str, Any]) -> dict[str, Any]:
        """``{"jobs", "quarantined"[, "counts"]}``: the ``vq list --json`` payload.

        With paging parameters (:mod:`vq.services.listing`) one page, plus ``total``,
        ``total_jobs`` and ``counts`` (every job by state) from the disk path too.
        """
        result = self.call("list", params)
        if result is not None:
            return dict(result)
        return self.disk_list_rows(params)

    def disk_list_rows(self, params: dict[str, Any]) -> dict[str, Any]:
        """:meth:`list_rows` from the spec files, whether or not a daemon runs."""
        from vq.domain.states import JobState
        from vq.services.listing import page_params, paged
        from vq.services.query import ListFilter, list_row, select

        ctx = self.local_context()
        flt = ListFilter.from_params(params)
        paging = page_params(params)
        scan = ctx.store.scan()
        now = ctx.now()
        selected = select(scan.specs.values(), flt)
        page = paged(selected, paging) if paging is not None else None
        answer: dict[str, Any] = {
            "jobs": [list_row(s, ctx.base_caps, now) for s in (page.specs if page else selected)],
            "quarantined": [item.as_dict() for item in scan.quarantined.values()],
        }
        if page is not None:
            counts = {state.value: 0 for state in JobState}
            for spec in scan.specs.values():
                counts[spec.state.value] += 1
            answer.update(total=page.total, total_jobs=page.total_jobs, counts=counts)
        return answer

    def status(self, job_id: str) -> dict[str, Any]:
        """The ``vq status --json`` view of one job."""
        view = self.call("status", {"id": job_id})
        if view is not None:
            return dict(view)
        from vq.errors import CorruptSpec, NotFound
        from vq.services.query import status_view
        from vq.services.reports import queue_eta, report_row

        ctx = self.local_context()

        def dependency_state(dep: str) -> str | None:
            try:
                return ctx.store.read(dep).state
            except NotFound:
                return None
            except CorruptSpec:
                return "unreadable"

        spec = ctx.store.read(job_id)
        now = ctx.now()
        base = ctx.base_caps  # the last advertised snapshot; None: unknown
        view = status_view(spec, ctx.paths, base, now, None, dependency_state)
        if spec.state.value == "PENDING":
            rows = [report_row(s, base, now) for s in ctx.store.scan().specs.values()]
            view["queue_eta"] = queue_eta(report_row(spec, base, now), rows, base, now)
        return view

    def overview(self) -> dict[str, Any]:
        """The ``vq overview --json`` snapshot (without a daemon: the last advertised caps,
        unknown when none is readable)."""
        from vq.services.reports import build_overview, caps_from_ping

        now = datetime.now(UTC)
        ping = self.ask("ping")
        listing = self.ask("list", {"states": []}) if isinstance(ping, dict) else None
        if isinstance(ping, dict) and isinstance(listing, dict):
            return build_overview(
                listing["jobs"],
                caps_from_ping(ping),
                now,
                ping,
                quarantined=len(listing["quarantined"]),
            )
        from vq.services.control import read_capacity

        rows, quarantined = self.disk_report_rows(now)
        snapshot = read_capacity(self.paths)  # the last advertised caps, or None
        return build_overview(rows, snapshot, now, None, quarantined=quarantined)

    def usage(self, by: str, since: datetime | None) -> dict[str, Any]:
        """The ``vq usage --json`` report (always from the spec files: they hold pauses)."""
        from vq.services.reports import build_usage

        now = datetime.now(UTC)
        rows, _ = self.disk_report_rows(now)
        return build_usage(rows, by, since, now)

    def disk_report_rows(self, now: datetime) -> tuple[list[dict[str, Any]], int]:
        """Report rows of every readable spec, and the number of unreadable ones."""
        from vq.services.reports import report_row
        from vq.store.specs import SpecStore

        scan = SpecStore(self.paths).scan()
        return [report_row(spec, None, now) for spec in scan.specs.values()], len(scan.quarantined)

    # --- job control --------------------------------------------------------------------
    def kill(self, job_id: str) -> dict[str, Any]:
        """The ``vq kill --json`` item. Without a daemon, waits out the grace itself."""
        result = self.call("kill", {"id": job_id})
        if result is not None:
            return dict(result)
        from vq.services.kill import kill_and_wait

        return kill_and_wait(self.local_context(), job_id).as_dict()

    def pause(self, job_id: str) -> dict[str, Any]:
        return self._pause_or_resume("pause", job_id)

    def resume(self, job_id: str) -> dict[str, Any]:
        return self._pause_or_resume("resume", job_id)

    def _pause_or_resume(self, verb: str, job_id: str) -> dict[str, Any]:
        result = self.call(verb, {"id": job_id})
        if result is not None:
            return dict(result)
        from vq.services import pause as pausing

        fn = pausing.pause_job if verb == "pause" else pausing.resume_job
        return fn(self.local_context(), job_id).as_dict()

    def resubmit(self, job_id: str, overrides: dict[str, Any]) -> dict[str, Any]:
        """The new job's spec (``vq resubmit --json``)."""
        spec = self.call("resubmit", {"id": job_id, "overrides": overrides})
        if spec is not None:
            return dict(spec)
        from vq.services.resubmit import resubmit

        return resubmit(self.local_context(), job_id, overrides).model_dump(mode="json")

    # --- queue control ------------------------------------------------------------------
    def drain(self, *, full: bool, reject_submits: bool, reason: str | None) -> dict[str, Any]:
        """Stop dispatching (``drain.json``); a full drain also pauses running jobs."""
        params = {
            "mode": "full" if full else "new",
            "reject_submits": reject_submits,
            "reason": reason,
        }
        result = self.call("drain", params)
        if result is not None:
            return dict(result)
        from dataclasses import asdict

        from vq.domain.spec import utcnow
        from vq.services.control import DrainState, write_drain

        state = DrainState(str(params["mode"]), reject_submits, reason, utcnow().isoformat())
        write_drain(self.paths, state)
        return asdict(state)

    def undrain(self) -> dict[str, Any]:
        result = self.call("undrain", {})
        if result is not None:
            return dict(result)
        from vq.services.control import DrainState, write_drain

        write_drain(self.paths, DrainState())
        return {"mode": "none", "resumed_paused_by": None}

    def daemon_pid(self) -> int | None:
        """The pid in ``daemon.pid`` when that process is alive (no RPC)."""
        try:
            pid = int(read_regular(self.paths.daemon_pid, 64).decode().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid if pid > 0 else None
