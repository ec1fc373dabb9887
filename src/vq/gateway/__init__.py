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

The CLI (:mod:`vq.cli`) and the web console (:mod:`vq.web`) reach the state through this
class and the services only, never the store (an import contract enforces it).

Import cost: only the stdlib client, errors and paths at import time; services, pydantic
and the configuration are imported on the fallback paths. ``vq submit``'s fast path
(:mod:`vq.cli.submit_fast`) tries the daemon with the stdlib client itself and calls
:meth:`Gateway.submit_on_disk` only when none answers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from vq._fs import read_regular
from vq.client import Client, ring_doorbell
from vq.domain.durations import parse_moment
from vq.errors import DaemonNotRunning, PermissionDenied, ProtocolError, VqError
from vq.paths import MultiUserLayout, StatePaths

from .disk import DiskVerbs

if TYPE_CHECKING:  # types only: importing them loads pydantic, which `vq list` never needs
    from vq.domain.quotas import QuotaPolicy
    from vq.domain.spec import JobSpec
    from vq.hosts_config import LaneSettings
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


class Gateway(DiskVerbs):
    """The daemon-or-disk access to one state root.

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

    def daemon_only(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The daemon's answer to a verb that needs it; DaemonNotRunning when none answers."""
        sock = self.paths.daemon_sock
        if sock.exists() and not os.access(sock, os.R_OK | os.W_OK):
            raise PermissionDenied(
                f"the daemon's socket {sock} is open to its admin group only",
                hint="your own jobs are read and written in your own tree without it",
            )
        answer = self.call(method, params)
        if answer is None:
            raise DaemonNotRunning(
                f"no vq daemon is running for {self.paths.root}",
                hint="start one with `vq daemon start`",
            )
        return answer

    # --- reads --------------------------------------------------------------------------
    def list_rows(self, params: dict[str, Any]) -> dict[str, Any]:
        """``{"jobs", "quarantined", "counts"}``: the ``vq list --json`` payload.

        ``counts``: every job by state. With paging parameters (:mod:`vq.services.listing`)
        one page, plus ``total`` and ``total_jobs``. A daemon of an older version that
        does not page or count is answered from the disk instead.
        """
        result = self.call("list", params)
        if result is None:
            return self.disk_list_rows(params)
        if "counts" not in result:
            return self.disk_list_rows(params)
        if "total" not in result:
            from vq.services.listing import page_params

            if page_params(params) is not None:
                return self.disk_list_rows(params)
        return dict(result)

    def disk_list_rows(self, params: dict[str, Any]) -> dict[str, Any]:
        """:meth:`list_rows` from the spec files, whether or not a daemon runs."""
        from vq.services.listing import list_on_disk

        return list_on_disk(self.local_context(), params)

    def status(self, job_id: str, uid: int | None = None) -> dict[str, Any]:
        """The ``vq status --json`` view of one job (with ``queue_eta`` when PENDING).

        ``uid`` (multi-user mode): the copy in that owner's tree, for an id several
        owners' trees hold (a bare lookup of it is ambiguous)."""
        uid = self.owner if uid is None else uid
        view = self.call("status", {"id": job_id, **({"uid": uid} if uid is not None else {})})
        if view is not None:
            return dict(view)
        from vq.services.status import disk_dependency_state, disk_eta_basis, job_status

        ctx = self.local_context()
        if uid is not None and isinstance(self.paths, MultiUserLayout):
            spec = ctx.store.read_copy(job_id, uid)  # root: one owner's copy of an id
        else:
            spec = ctx.read_owned(job_id)
        view = job_status(
            ctx,
            spec,
            effective=None,
            usage=None,
            dependency_state=disk_dependency_state(ctx),
            basis=lambda: disk_eta_basis(ctx),
            lane=_configured_lane(spec.scheduler_target),
        )
        quota = self._owner_quota_reason(ctx, spec) if spec.state.value == "PENDING" else None
        if quota is not None:
            view["pending_reason"] = quota
        return view

    def _owner_quota_reason(self, ctx: ServiceContext, spec: JobSpec) -> str | None:
        """A user's own tree (multi-user mode): why the owner's quota keeps ``spec``
        waiting (``quota: max_concurrent_cpus (2/2)``), from the owner's active jobs in
        that tree, which holds every job of theirs; None when nothing holds it back."""
        owner_dir = self.paths.owner_dir
        if owner_dir is None or isinstance(self.paths, MultiUserLayout):
            return None
        policy = self._quota_policy()
        if policy is None or policy.unlimited:
            return None
        from vq.domain.quotas import Holder, load_of
        from vq.domain.states import ACTIVE

        owner = int(owner_dir.name)
        active = [s for s in ctx.store.scan().specs.values() if s.state in ACTIVE]
        load = load_of(Holder(owner, s.id, s.cpus) for s in active)
        return policy.blocker(owner, spec.cpus, load)

    def job_ids(self, states: list[str], tags: list[str]) -> list[str]:
        """The ids of the jobs in ``states`` carrying every tag in ``tags``."""
        listing = self.list_rows({"states": states, "tags": tags})
        return [str(row["id"]) for row in listing["jobs"]]

    def top(self, live_states: tuple[str, ...], timeout: float) -> dict[str, Any]:
        """The ``vq top --json`` snapshot: the daemon's jobs and caps, or the disk's."""
        from vq.services.query import ListFilter, list_row, select
        from vq.services.reports import caps_from_ping
        from vq.services.top import build_top, read_latest_sample

        ping = self.ask("ping", timeout=timeout)
        live = {"states": sorted(live_states)}
        listing = self.ask("list", live, timeout=timeout) if isinstance(ping, dict) else None
        counts: dict[str, int] | None = None
        if isinstance(ping, dict) and isinstance(listing, dict):
            rows: list[dict[str, Any]] = listing["jobs"]
            counts = listing.get("counts")  # every job's state, counted by the daemon
            caps = caps_from_ping(ping)
            pid = ping.get("pid")
        else:  # no daemon (or it stopped between the calls): read the disk, caps unknown
            ctx = self.local_context()
            now = ctx.now()
            specs = select(ctx.store.scan().specs.values(), ListFilter())
            rows, caps, pid = [list_row(spec, ctx.base_caps, now) for spec in specs], None, None
        samples = {
            row["id"]: read_latest_sample(self.paths.samples(row["id"]))
            for row in rows
            if row["state"] in live_states
        }
        return build_top(rows, samples, caps, datetime.now(UTC), pid, counts=counts)

    def overview(self) -> dict[str, Any]:
        """The ``vq overview --json`` snapshot (without a daemon: the last advertised caps,
        unknown when none is readable)."""
        from vq.services.reports import build_overview, caps_from_ping

        now = datetime.now(UTC)
        quotas = self._quota_policy()
        ping = self.ask("ping")
        listing = self.ask("list", {"states": []}) if isinstance(ping, dict) else None
        if isinstance(ping, dict) and isinstance(listing, dict):
            return build_overview(
                listing["jobs"],
                caps_from_ping(ping),
                now,
                ping,
                quarantined=len(listing["quarantined"]),
                quotas=quotas,
            )
        from vq.services.control import read_capacity

        rows, quarantined = self.disk_report_rows(now)
        snapshot = read_capacity(self.paths)  # the last advertised caps, or None
        return build_overview(rows, snapshot, now, None, quarantined=quarantined, quotas=quotas)

    def _quota_policy(self) -> QuotaPolicy | None:
        """Multi-user mode: the system config's ``[quotas]`` (validated; ConfigError when it
        is not); None in single-user mode."""
        if self.paths.owner_dir is None and not isinstance(self.paths, MultiUserLayout):
            return None
        from vq.config import load_settings

        return load_settings(self.env).quotas.policy()

    def usage(self, by: str, since: datetime | None) -> dict[str, Any]:
        """The ``vq usage --json`` report (always from the spec files: they hold pauses)."""
        from vq.services.reports import build_usage

        now = datetime.now(UTC)
        rows, _ = self.disk_report_rows(now)
        return build_usage(rows, by, since, now)

    def disk_report_rows(self, now: datetime) -> tuple[list[dict[str, Any]], int]:
        """Report rows of every readable spec, and the number of unreadable ones."""
        from vq.services.reports import report_row
        from vq.store.owned import store_for

        scan = store_for(self.paths).scan()
        return [report_row(spec, None, now) for spec in scan.specs.values()], len(scan.quarantined)

    # --- submission ---------------------------------------------------------------------
    def submit(self, params: dict[str, Any]) -> dict[str, Any]:
        """The ``vq submit --json`` payload of one submission (job, array or chain).

        In multi-user mode the job is always written to the submitter's own tree (the
        daemon finds it there), never submitted through the root daemon's socket."""
        if self.paths.owner_dir is not None or isinstance(self.paths, MultiUserLayout):
            return self.submit_on_disk(params)
        payload = self.call("submit", params)
        if payload is not None:
            return dict(payload)
        return self.submit_on_disk(params)

    def submit_on_disk(self, params: dict[str, Any]) -> dict[str, Any]:
        """:meth:`submit` without a daemon: validate, then write the spec(s) ourselves."""
        from vq.protocol.messages import SubmitParams, parse_params
        from vq.services.submit import result_payload, submit

        self._require_own_tree()
        if self.paths.owner_dir is None:
            return result_payload(submit(self.local_context(), parse_params(SubmitParams, params)))
        # Multi-user: the owner is the numeric euid; then the daemon is told to look now.
        params = {**params, "submitter": str(os.geteuid())}
        payload = result_payload(submit(self.local_context(), parse_params(SubmitParams, params)))
        ring_doorbell(self.paths.doorbell)
        return payload

    def _require_own_tree(self) -> None:
        """Multi-user mode: the caller's ``users/<uid>`` tree exists, else PermissionDenied
        naming the admin command that provisions it."""
        if isinstance(self.paths, MultiUserLayout):
            raise PermissionDenied(
                "multi-user mode runs no job as root, so root does not submit",
                hint="submit as the user the job belongs to (`runuser -u USER -- vq submit ...`)",
            )
        owner = self.paths.owner_dir
        if owner is None or owner.is_dir():
            return
        import pwd

        uid = os.geteuid()
        try:
            who = pwd.getpwuid(uid).pw_name
        except KeyError:
            who = str(uid)
        raise PermissionDenied(
            f"multi-user mode: user {who} has no tree under {self.paths.users_dir}",
            hint=f"ask an administrator to run `vq admin user add {who}`",
        )

    # --- job control --------------------------------------------------------------------
    def _call_for_owner(self, method: str, job_id: str) -> Any | None:
        """``method`` on the daemon, after the daemon confirmed (``status --uid``) that
        the job is the named owner's when one was named (NotFound otherwise)."""
        if self.owner is not None and self.call("status", {"id": job_id, "uid": self.owner}):
            return self.call(method, {"id": job_id})
        if self.owner is not None:
            return None  # no daemon: the disk path applies the ownership helper
        return self.call(method, {"id": job_id})

    def kill(self, job_id: str) -> dict[str, Any]:
        """The ``vq kill --json`` item. Without a daemon, waits out the grace itself."""
        result = self._call_for_owner("kill", job_id)
        if result is not None:
            return dict(result)
        from vq.services.kill import kill_and_wait

        outcome = kill_and_wait(self.local_context(), job_id)
        # A multi-user daemon finishes a stop this user may not signal (root's processes).
        ring_doorbell(self.paths.doorbell)
        return outcome.as_dict()

    def pause(self, job_id: str) -> dict[str, Any]:
        return self._pause_or_resume("pause", job_id)

    def resume(self, job_id: str) -> dict[str, Any]:
        return self._pause_or_resume("resume", job_id)

    def _pause_or_resume(self, verb: str, job_id: str) -> dict[str, Any]:
        result = self._call_for_owner(verb, job_id)
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
        """Dispatch again and resume the jobs a full drain paused."""
        result = self.call("undrain", {})
        if result is not None:
            return dict(result)
        from vq.services.control import undrain_on_disk

        return undrain_on_disk(self.local_context())

    def throttle(
        self,
        *,
        clear: bool,
        max_jobs: int | None = None,
        max_cpus: int | None = None,
        seconds: int | None = None,
    ) -> dict[str, Any]:
        """Lower the caps for a while (``throttle.json``), or clear the throttle."""
        params = {"max_jobs": max_jobs, "max_cpus": max_cpus, "seconds": seconds, "clear": clear}
        result = self.call("throttle", {k: v for k, v in params.items() if v is not None})
        if result is not None:
            return dict(result)
        from vq.domain.spec import utcnow
        from vq.services.control import throttle_on_disk

        return throttle_on_disk(
            self.local_context(),
            clear=clear,
            max_jobs=max_jobs,
            max_cpus=max_cpus,
            seconds=seconds,
            now=utcnow(),
        )

    def daemon_pid(self) -> int | None:
        """The pid in ``daemon.pid`` when that process is alive (no RPC)."""
        try:
            pid = int(read_regular(self.paths.daemon_pid, 64).decode().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid if pid > 0 else None


def _configured_lane(target: str | None) -> LaneSettings | None:
    """The configured settings of scheduler lane ``target`` (None: none, or no config)."""
    if target is None:
        return None
    from vq.config import load_settings
    from vq.hosts_config import lanes_of

    try:
        return lanes_of(load_settings().hosts).get(target)
    except VqError:
        return None
