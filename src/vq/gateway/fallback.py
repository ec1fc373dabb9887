"""The gateway's disk half: what each daemon verb answers when no daemon does.

Every method here runs the matching :mod:`vq.services` function over a
:class:`~vq.services.context.ServiceContext` built from the configured caps
(:meth:`DiskVerbs.local_context`, composed, not inherited) and answers the shape the
daemon's RPC method answers (``tests/integration/test_gateway_parity.py``). None of them
talks to the daemon; the choice between the two halves is :class:`vq.gateway.Gateway`'s.

Import cost: services, pydantic and the configuration are imported inside the methods,
so importing the gateway stays cheap for the paths that never fall back.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from vq.client import ring_doorbell
from vq.errors import PermissionDenied, VqError
from vq.paths import MultiUserLayout
from vq.protocol.answers import (
    DrainAnswer,
    KillAnswer,
    ListAnswer,
    ListQuery,
    ListRow,
    PauseAnswer,
    ReportRow,
    SpecJSON,
    StatusView,
    SubmitAnswer,
    ThrottleAnswer,
    UndrainAnswer,
)
from vq.protocol.report_answers import OverviewAnswer, UsageAnswer

from .disk import DiskVerbs

if TYPE_CHECKING:  # types only: importing them loads pydantic, which `vq list` never needs
    from collections.abc import Mapping

    from vq.config.hosts import LaneSettings
    from vq.domain.quotas import QuotaHold, QuotaPolicy
    from vq.domain.spec import JobSpec
    from vq.services.context import ServiceContext

__all__ = ["DiskFallbacks", "root_does_not_submit"]


def root_does_not_submit() -> PermissionDenied:
    """The refusal of a local submit by root in multi-user mode (its CLI and its web
    console): every job runs as its submitter, and none as root."""
    return PermissionDenied(
        "multi-user mode runs no job as root, so root does not submit",
        hint="submit as the user the job belongs to (`runuser -u USER -- vq submit ...`)",
    )


class DiskFallbacks:
    """The no-daemon answers of the daemon verbs, for the state root of ``disk`` (whose
    service context and ownership helper they run on)."""

    def __init__(self, disk: DiskVerbs) -> None:
        self.disk = disk
        self.paths = disk.paths
        self.env = disk.env
        self.owner = disk.owner

    def local_context(self) -> ServiceContext:
        """The service context over the disk (:meth:`DiskVerbs.local_context`)."""
        return self.disk.local_context()

    # --- reads --------------------------------------------------------------------------
    def disk_list_rows(self, params: ListQuery) -> ListAnswer:
        """``vq list --json``'s payload from the spec files, whether or not a daemon runs.

        A tree the filesystem does not let this user read (another owner's, in multi-user
        mode, outside a shared primary group) is refused with PermissionDenied (exit 15)."""
        from vq.services.listing import list_on_disk

        try:
            return list_on_disk(self.local_context(), params)
        except PermissionError:
            raise self._unreadable_tree() from None

    def _unreadable_tree(self) -> PermissionDenied:
        if self.owner is not None and self.owner != os.geteuid():
            return PermissionDenied(
                f"the jobs of uid {self.owner}: permission denied",
                hint="root, and the multi-user admin group through the daemon, list every "
                "owner's jobs; you list your own with `vq list`",
            )
        return PermissionDenied(
            f"cannot read the queue {self.paths.queue_dir}: permission denied",
            hint="check the permissions of the state root",
        )

    def disk_status(self, job_id: str, uid: int | None) -> StatusView:
        """``vq status --json`` of one job from its spec file (``uid``: that owner's copy,
        multi-user root only), with the owner's quota as the pending reason when it holds
        the job back, and on a user's own tree why the root daemon holds it, if it does
        (:meth:`_daemon_hold`)."""
        from vq.services.status import (
            apply_daemon_hold,
            apply_quota_hold,
            disk_dependency_state,
            disk_eta_basis,
            job_status,
        )

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
        local_pending = spec.state.value == "PENDING" and spec.scheduler_target is None
        quota = self._owner_quota_hold(ctx, spec) if local_pending else None
        if quota is not None:
            apply_quota_hold(view, quota)
        held = self._daemon_hold(spec) if spec.state.value == "PENDING" else None
        if held is not None:
            apply_daemon_hold(view, held)
        return view

    def _daemon_hold(self, spec: JobSpec) -> str | None:
        """A user's own tree (multi-user mode): why the root daemon holds this job, asked
        on the user's submit socket (another owner's copy of its id, a quarantine), which
        nothing in the user's own files can tell; None when nothing does."""
        owner_dir = self.paths.owner_dir
        if owner_dir is None or isinstance(self.paths, MultiUserLayout):
            return None
        if owner_dir.name != str(os.geteuid()):
            return None  # a teammate's tree (--uid): only its owner may ask
        from vq.client import owner_hold

        return owner_hold(str(self.paths.root), spec.id)

    def _owner_quota_hold(self, ctx: ServiceContext, spec: JobSpec) -> QuotaHold | None:
        """A user's own tree (multi-user mode): why the owner's quota keeps ``spec``
        waiting (``quota: max_concurrent_cpus (2/2)``, or that it can never fit), from the
        owner's active jobs in that tree, which holds every job of theirs; None when
        nothing holds it back."""
        owner_dir = self.paths.owner_dir
        if owner_dir is None or isinstance(self.paths, MultiUserLayout):
            return None
        policy = self.quota_policy()
        if policy is None or policy.unlimited:
            return None
        from vq.domain.quotas import Holder, load_of
        from vq.domain.states import ACTIVE

        owner = int(owner_dir.name)
        active = [s for s in ctx.store.scan().specs.values() if s.state in ACTIVE]
        load = load_of(Holder(owner, s.id, s.cpus) for s in active)
        return policy.hold(owner, spec.cpus, load)

    def disk_top_rows(self) -> list[ListRow]:
        """Every job's list row from the spec files (``vq top`` without a daemon)."""
        from vq.services.query import ListFilter, list_row, select

        ctx = self.local_context()
        now = ctx.now()
        specs = select(ctx.store.scan().specs.values(), ListFilter())
        return [list_row(spec, ctx.base_caps, now, ctx.lanes) for spec in specs]

    def disk_overview(self, now: datetime, quotas: QuotaPolicy | None) -> OverviewAnswer:
        """``vq overview --json`` from the spec files and the last advertised caps (unknown
        when none is readable)."""
        from vq.services.control import read_capacity
        from vq.services.reports import build_overview

        rows, quarantined = self.disk_report_rows(now)
        snapshot = read_capacity(self.paths)  # the last advertised caps, or None
        return build_overview(rows, snapshot, now, None, quarantined=quarantined, quotas=quotas)

    def quota_policy(self) -> QuotaPolicy | None:
        """Multi-user mode: the system config's ``[quotas]`` (validated; ConfigError when it
        is not); None in single-user mode."""
        if self.paths.owner_dir is None and not isinstance(self.paths, MultiUserLayout):
            return None
        from vq.config.settings import load_settings

        return load_settings(self.env).quotas.policy()

    def usage(self, by: str, since: datetime | None) -> UsageAnswer:
        """The ``vq usage --json`` report (always from the spec files: they hold pauses)."""
        from vq.services.reports import build_usage

        now = datetime.now(UTC)
        rows, _ = self.disk_report_rows(now)
        return build_usage(rows, by, since, now)

    def disk_report_rows(self, now: datetime) -> tuple[list[ReportRow], int]:
        """Report rows of every readable spec, and the number of unreadable ones."""
        from vq.services.reports import report_row
        from vq.store.owned import store_for

        scan = store_for(self.paths).scan()
        return [report_row(spec, None, now) for spec in scan.specs.values()], len(scan.quarantined)

    # --- submission ---------------------------------------------------------------------
    def submit_on_disk(self, params: Mapping[str, object]) -> SubmitAnswer:
        """``vq submit`` without a daemon: validate, then write the spec(s) ourselves."""
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
            raise root_does_not_submit()
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
    def disk_kill(self, job_id: str) -> KillAnswer:
        """``vq kill --json``'s item, waiting out the grace here."""
        from vq.services.kill import kill_and_wait

        outcome = kill_and_wait(self.local_context(), job_id)
        # A multi-user daemon finishes a stop this user may not signal (root's processes).
        ring_doorbell(self.paths.doorbell)
        return outcome.as_dict()

    def disk_pause_or_resume(self, verb: str, job_id: str) -> PauseAnswer:
        from vq.services import pause as pausing

        fn = pausing.pause_job if verb == "pause" else pausing.resume_job
        return fn(self.local_context(), job_id).as_dict()

    def disk_resubmit(self, job_id: str, overrides: Mapping[str, object]) -> SpecJSON:
        from vq.services.query import spec_json
        from vq.services.resubmit import resubmit

        return spec_json(resubmit(self.local_context(), job_id, dict(overrides)))

    # --- queue control ------------------------------------------------------------------
    def disk_drain(self, mode: str, reject_submits: bool, reason: str | None) -> DrainAnswer:
        """Write ``drain.json`` with no daemon to tell."""
        from vq.domain.spec import utcnow
        from vq.services.control import DrainState, drain_json, write_drain

        state = DrainState(mode, reject_submits, reason, utcnow().isoformat())
        write_drain(self.paths, state)
        return drain_json(state)

    def disk_undrain(self) -> UndrainAnswer:
        from vq.services.control import undrain_on_disk

        return undrain_on_disk(self.local_context())

    def disk_throttle(
        self, *, clear: bool, max_jobs: int | None, max_cpus: int | None, seconds: int | None
    ) -> ThrottleAnswer:
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


def _configured_lane(target: str | None) -> LaneSettings | None:
    """The configured settings of scheduler lane ``target`` (None: none, or no config)."""
    if target is None:
        return None
    from vq.config.hosts import lanes_of
    from vq.config.settings import load_settings

    try:
        return lanes_of(load_settings().hosts).get(target)
    except VqError:
        return None
