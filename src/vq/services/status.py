"""One job's status view (``vq status --json``), assembled the same way on every path.

The daemon passes its index's dependency states, its reserved usage and its kept ETA
basis; the no-daemon path (:mod:`vq.gateway`) passes the same from the spec files
(:func:`disk_dependency_state`, :func:`disk_eta_basis`). A PENDING job's view carries
``queue_eta`` (:func:`~vq.services.reports.queue_eta`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from vq.config.hosts import LaneSettings
from vq.domain.admission import Caps, Usage
from vq.domain.quotas import QuotaHold
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import CorruptSpec, NotFound
from vq.protocol.answers import SchedulerWarning, StatusView
from vq.services.context import ServiceContext
from vq.services.query import status_view
from vq.services.queue_eta import unavailable_eta
from vq.services.reports import EtaBasis, eta_basis, queue_eta, report_row

__all__ = [
    "apply_daemon_hold",
    "apply_quota_hold",
    "blind_lane_warning",
    "disk_dependency_state",
    "disk_eta_basis",
    "job_status",
]

#: The ``queue_eta`` basis of a job that can never start under its owner's quota.
OVER_QUOTA = "over its owner's quota"


def job_status(
    ctx: ServiceContext,
    spec: JobSpec,
    *,
    effective: Caps | None,
    usage: Usage | None,
    dependency_state: Callable[[str], JobState | str | None],
    basis: Callable[[], EtaBasis],
    hold: str | None = None,
    lane: LaneSettings | None = None,
) -> StatusView:
    """The status view of ``spec`` against the base caps (``ctx.base_caps``: the daemon's,
    or its last advertised snapshot; None: unknown) and the ``effective`` ones (after a
    throttle; the daemon knows them). ``basis`` is asked only for a PENDING job whose
    base caps are known. ``hold``: why the daemon holds all dispatch, if it does.
    ``lane``: the settings of the scheduler lane the job targets, when it has one (for
    ``scheduler_warning``, :func:`blind_lane_warning`)."""
    now = ctx.now()
    base = ctx.base_caps
    if lane is None and spec.scheduler_target is not None:
        lane = ctx.lanes.get(spec.scheduler_target)
    view = status_view(
        spec,
        ctx.paths,
        base,
        now,
        usage,
        dependency_state,
        effective=effective,
        hold=hold,
        dialect=lane.dialect if lane is not None else None,
    )
    if spec.state is JobState.PENDING:
        row = report_row(spec, base, now)
        known = basis() if base is not None else None
        view["queue_eta"] = queue_eta(row, (), base, now, basis=known)
    if spec.scheduler_target is not None:
        view["scheduler_warning"] = blind_lane_warning(spec, lane, now)
    return view


def apply_daemon_hold(view: StatusView, reason: str) -> None:
    """Multi-user mode: the root daemon holds this PENDING job and will not start it as
    things stand (another owner's copy of its id, a quarantine): ``reason`` becomes its
    pending reason, and it has no queue ETA."""
    view["pending_reason"] = reason
    if "queue_eta" in view:
        view["queue_eta"] = unavailable_eta("held by the daemon")


def apply_quota_hold(view: StatusView, hold: QuotaHold) -> None:
    """Multi-user mode: the owner's quota holds this PENDING job. Its reason becomes the
    pending reason; a job that can never start under the quota has no queue ETA (like a
    job over a configured cap)."""
    view["pending_reason"] = hold.reason
    if hold.never and "queue_eta" in view:
        view["queue_eta"] = unavailable_eta(OVER_QUOTA)


def blind_lane_warning(
    spec: JobSpec, lane: LaneSettings | None, now: datetime
) -> SchedulerWarning | None:
    """``{code, message, hint}`` when a lane without accounting has gone blind to a job.

    Without ``sacct`` the only scheduler record of a job is its queue entry, which the
    controller keeps for ``MinJobAge`` (``scheduler_min_job_age``) after the job ends.
    A job still RUNNING or SUSPENDED in vq whose scheduler report (``last_heartbeat_at``,
    else ``started_at``) is older than that may have ended and been forgotten: vq can then
    learn only what its exit marker says, and nothing of how it ended without one. Pure."""
    if lane is None or lane.accounting != "none" or spec.scheduler_job_id is None:
        return None
    if spec.state not in (JobState.RUNNING, JobState.SUSPENDED):
        return None
    seen = spec.last_heartbeat_at or spec.started_at
    if seen is None:
        return None
    silent = (now - seen).total_seconds()
    if silent <= lane.min_job_age:
        return None
    return {
        "code": "lane_blind",
        "message": (
            f'lane {lane.name} has no accounting (scheduler_accounting = "none") and its '
            f"scheduler last reported this job {int(silent)} s ago, longer than MinJobAge "
            f"({int(lane.min_job_age)} s): if the job ended, the scheduler may have "
            "forgotten it, and without its exit marker vq cannot tell how it ended"
        ),
        "hint": (
            f'set scheduler_accounting = "sacct" on [hosts.{lane.name}], or look the '
            f"job up on the cluster (scheduler id {spec.scheduler_job_id})"
        ),
    }


def disk_dependency_state(ctx: ServiceContext) -> Callable[[str], JobState | str | None]:
    """A dependency's state read from its spec file (None: gone; "unreadable")."""

    def state(job_id: str) -> JobState | str | None:
        try:
            return ctx.store.read(job_id).state
        except NotFound:
            return None
        except CorruptSpec:
            return "unreadable"

    return state


def disk_eta_basis(ctx: ServiceContext) -> EtaBasis:
    """The ETA basis of every readable spec file (what the daemon keeps for its index)."""
    now = ctx.now()
    base = ctx.base_caps or ctx.caps
    rows = [report_row(s, base, now) for s in ctx.store.scan().specs.values()]
    return eta_basis(rows, base)
