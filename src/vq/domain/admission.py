"""Declared-resource admission for local jobs (§4.3, §5.1). Pure.

Candidates are considered by descending priority, then submission time, then position
in their array or chain (elements of one ``--array`` share a submission time and start
in index order), then id, so the order is total. A candidate that does not fit the
remaining budget is *skipped*, so a smaller later job can start; its durable state stays
PENDING. A job whose request exceeds a configured base cap (``max_cpus`` /
``max_mem_mb``) can never start until the caps change: it stays PENDING and is
classified ``pending_over_capacity``.

Two cap sets are in play. The *base* caps are what the daemon advertises as configured;
the configured-cap classification compares with them only. The *effective* caps are the
base lowered by a temporary throttle: the dispatch budget. A request over an effective
cap but within the base is an ordinary blocker (it waits for the throttle to end), never
an impossibility.

Effective memory is the declared ``mem_mb``, else ``default_job_mem_mb``, else zero.
These are reservations, not measurements of actual use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from vq.domain.quotas import OwnerLoad, QuotaGate

__all__ = [
    "Caps",
    "Overage",
    "Request",
    "Usage",
    "capacity_overages",
    "effective_mem_mb",
    "order_key",
    "pending_reason",
    "plan_dispatch",
]


@dataclass(frozen=True)
class Caps:
    """The daemon's admission budget. ``None`` means unlimited (or unknown)."""

    max_jobs: int | None = None
    max_cpus: int | None = None
    max_mem_mb: int | None = None
    default_job_mem_mb: int | None = None


@dataclass(frozen=True)
class Request:
    """What one pending job asks for, as admission sees it."""

    job_id: str
    cpus: int
    mem_mb: int | None
    priority: int
    submitted_at: datetime
    not_before: datetime | None = None
    #: the array index (or chain index) of an element; 0 for a plain job
    sequence: int = 0
    #: the owning uid in multi-user mode (quotas apply per owner); None: no owner
    owner: int | None = None


@dataclass(frozen=True)
class Usage:
    """Resources currently reserved by running, suspended and grace-held jobs."""

    jobs: int = 0
    cpus: int = 0
    mem_mb: int = 0

    def plus(self, cpus: int, mem_mb: int) -> Usage:
        return Usage(self.jobs + 1, self.cpus + cpus, self.mem_mb + mem_mb)


@dataclass(frozen=True)
class Overage:
    """One configured cap a request exceeds (the ``configured_capacity_overages`` item)."""

    resource: str
    requested: int
    capacity: int

    def as_dict(self) -> dict[str, object]:
        return {"resource": self.resource, "requested": self.requested, "capacity": self.capacity}


def effective_mem_mb(mem_mb: int | None, caps: Caps) -> int:
    """The memory a job reserves: declared, else the configured default, else 0."""
    if mem_mb is not None:
        return mem_mb
    return caps.default_job_mem_mb or 0


def capacity_overages(cpus: int, mem_mb: int | None, caps: Caps) -> list[Overage]:
    """The base caps a request exceeds; empty when it could ever fit."""
    out: list[Overage] = []
    if caps.max_cpus is not None and cpus > caps.max_cpus:
        out.append(Overage("cpus", cpus, caps.max_cpus))
    memory = effective_mem_mb(mem_mb, caps)
    if caps.max_mem_mb is not None and memory > caps.max_mem_mb:
        out.append(Overage("mem_mb", memory, caps.max_mem_mb))
    return out


def order_key(request: Request) -> tuple[int, datetime, int, str]:
    """Descending priority, then FIFO by submission time, then array index, then id."""
    return (-request.priority, request.submitted_at, request.sequence, request.job_id)


def _fits(request: Request, usage: Usage, caps: Caps) -> bool:
    memory = effective_mem_mb(request.mem_mb, caps)
    if caps.max_jobs is not None and usage.jobs + 1 > caps.max_jobs:
        return False
    if caps.max_cpus is not None and usage.cpus + request.cpus > caps.max_cpus:
        return False
    return caps.max_mem_mb is None or usage.mem_mb + memory <= caps.max_mem_mb


def _over_quota(
    quota: QuotaGate | None, owner: int | None, cpus: int, load: dict[int, OwnerLoad]
) -> bool:
    if quota is None or owner is None:
        return False
    return quota.policy.blocker(owner, cpus, load) is not None


def plan_dispatch(
    candidates: Iterable[Request],
    usage: Usage,
    caps: Caps,
    now: datetime,
    base: Caps | None = None,
    quota: QuotaGate | None = None,
    *,
    ordered: bool = False,
) -> list[str]:
    """The ids to start now, in start order, without exceeding ``caps`` (the effective
    caps); ``base``: the advertised base caps (default ``caps``); ``quota``: the owners'
    quotas and load (multi-user mode), charged as jobs are chosen. ``ordered``: the
    candidates already come in :func:`order_key` order (they are then consumed lazily,
    only until every job slot is taken).

    Invariant: the returned jobs plus ``usage`` never exceed any cap or any owner's
    quota; no returned job has ``not_before`` in the future or a configured-cap overage.
    A request over a throttled cap or its owner's quota is skipped like any job that
    does not fit now.
    """
    chosen: list[str] = []
    load: dict[int, OwnerLoad] = dict(quota.load) if quota is not None else {}
    for request in candidates if ordered else sorted(candidates, key=order_key):
        if caps.max_jobs is not None and usage.jobs >= caps.max_jobs:
            break
        if request.not_before is not None and request.not_before > now:
            continue
        if capacity_overages(request.cpus, request.mem_mb, base or caps):
            continue
        owner = request.owner
        if _over_quota(quota, owner, request.cpus, load):
            continue
        if _fits(request, usage, caps):
            chosen.append(request.job_id)
            usage = usage.plus(request.cpus, effective_mem_mb(request.mem_mb, caps))
            if owner is not None:
                load[owner] = load.get(owner, OwnerLoad()).plus(request.cpus)
            if caps.max_jobs is not None and usage.jobs >= caps.max_jobs:
                break  # every slot taken: look no further
    return chosen


def _throttled(name: str, caps: Caps, base: Caps | None) -> str:
    """`` (throttled from N)`` when a throttle lowered cap ``name`` below its base."""
    if base is None:
        return ""
    lowered, configured = getattr(caps, name), getattr(base, name)
    if lowered is None or lowered == configured:
        return ""
    return f" (throttled from {configured if configured is not None else 'unlimited'})"


def pending_reason(
    request: Request,
    usage: Usage,
    caps: Caps,
    now: datetime,
    base: Caps | None = None,
    quota: QuotaGate | None = None,
) -> str:
    """A one-line, human explanation of why a pending job is not running yet.

    ``caps`` are the effective caps; ``base`` the advertised base caps (default
    ``caps``). Only the base decides "over configured capacity"; a cap that a throttle
    lowered is named as such.
    """
    overages = capacity_overages(request.cpus, request.mem_mb, base or caps)
    if overages:
        parts = ", ".join(f"{o.resource} {o.requested} > cap {o.capacity}" for o in overages)
        return f"over configured capacity ({parts}); it stays pending until the caps change"
    if request.not_before is not None and request.not_before > now:
        return f"not before {request.not_before.isoformat(timespec='seconds')}"
    if quota is not None and request.owner is not None:
        blocked = quota.policy.blocker(request.owner, request.cpus, quota.load)
        if blocked is not None:
            return blocked
    if caps.max_jobs is not None and usage.jobs >= caps.max_jobs:
        return f"all {caps.max_jobs} job slots are in use" + _throttled("max_jobs", caps, base)
    if caps.max_cpus is not None and request.cpus > caps.max_cpus:
        return (
            f"throttled: max_cpus is {caps.max_cpus}{_throttled('max_cpus', caps, base)} "
            f"and the job needs {request.cpus}; it starts when the throttle ends "
            "(`vq daemon throttle --clear`)"
        )
    memory = effective_mem_mb(request.mem_mb, caps)
    if caps.max_cpus is not None and usage.cpus + request.cpus > caps.max_cpus:
        return f"waiting for CPUs ({request.cpus} needed, {caps.max_cpus - usage.cpus} free)"
    if caps.max_mem_mb is not None and usage.mem_mb + memory > caps.max_mem_mb:
        free = caps.max_mem_mb - usage.mem_mb
        return f"waiting for memory ({memory} MB needed, {free} MB free)"
    return "waiting for the next dispatch pass (higher-priority or earlier jobs go first)"
