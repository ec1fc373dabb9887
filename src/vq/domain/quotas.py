"""Per-owner dispatch quotas of multi-user mode (§4.9). Pure.

Quotas gate dispatch only: a job over its owner's quota stays PENDING (submit never
refuses) and its pending reason names the quota, e.g. ``quota: max_concurrent_cpus (2/2)``.
A job whose own CPUs exceed its owner's ``max_concurrent_cpus`` can never start under that
quota, whatever else runs: it stays PENDING like a job over a configured cap, and its
reason says so (:meth:`QuotaPolicy.never_fits`).
Both limits count the same *active holders*: running, suspended, and reserved (scheduler
or reattach) jobs, deduplicated by owner and id, so a job seen in memory and on disk is
charged once. ``max_pending_jobs`` caps how many holders an owner has (the name is the
configuration's; it is not a count of accepted pending specs), ``max_concurrent_cpus``
the sum of their declared CPUs. ``None`` is unlimited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "Holder",
    "OwnerLoad",
    "QuotaGate",
    "QuotaHold",
    "QuotaLimits",
    "QuotaPolicy",
    "load_of",
]


@dataclass(frozen=True)
class QuotaLimits:
    """One owner's limits; ``None`` means unlimited."""

    max_pending_jobs: int | None = None
    max_concurrent_cpus: int | None = None


@dataclass(frozen=True)
class QuotaHold:
    """Why an owner's quota holds a pending job (its pending reason); ``never``: the job
    can never start under the quota (:meth:`QuotaPolicy.never_fits`)."""

    reason: str
    never: bool = False


@dataclass(frozen=True)
class Holder:
    """An active job as the quota sees it: whose, which, and its declared CPUs."""

    owner: int
    job_id: str
    cpus: int


@dataclass(frozen=True)
class OwnerLoad:
    """What one owner's holders take: how many, and their CPUs."""

    jobs: int = 0
    cpus: int = 0

    def plus(self, cpus: int) -> OwnerLoad:
        return OwnerLoad(self.jobs + 1, self.cpus + cpus)


def load_of(holders: Iterable[Holder]) -> dict[int, OwnerLoad]:
    """Per-owner load of ``holders``, each (owner, id) charged once."""
    seen: set[tuple[int, str]] = set()
    load: dict[int, OwnerLoad] = {}
    for holder in holders:
        key = (holder.owner, holder.job_id)
        if key in seen:
            continue
        seen.add(key)
        load[holder.owner] = load.get(holder.owner, OwnerLoad()).plus(holder.cpus)
    return load


@dataclass(frozen=True)
class QuotaPolicy:
    """``[quotas]``: the defaults and the ``[quotas.uid.<uid>]`` overrides."""

    default: QuotaLimits = QuotaLimits()
    per_uid: Mapping[int, QuotaLimits] = field(default_factory=dict)

    def limits(self, owner: int) -> QuotaLimits:
        """An override replaces the defaults key by key (an unset key keeps the default)."""
        override = self.per_uid.get(owner)
        if override is None:
            return self.default
        return QuotaLimits(
            override.max_pending_jobs
            if override.max_pending_jobs is not None
            else self.default.max_pending_jobs,
            override.max_concurrent_cpus
            if override.max_concurrent_cpus is not None
            else self.default.max_concurrent_cpus,
        )

    @property
    def unlimited(self) -> bool:
        return self.default == QuotaLimits() and all(
            limits == QuotaLimits() for limits in self.per_uid.values()
        )

    def never_fits(self, owner: int, cpus: int) -> str | None:
        """Why a ``cpus``-CPU job of ``owner`` can never start under the quota (its CPUs
        alone exceed ``max_concurrent_cpus``), or ``None``; independent of the load."""
        limit = self.limits(owner).max_concurrent_cpus
        if limit is None or cpus <= limit:
            return None
        return (
            f"quota: over max_concurrent_cpus (cpus {cpus} > quota {limit}), so it can never "
            "start under this quota; it stays pending until the quota changes"
        )

    def hold(self, owner: int, cpus: int, load: Mapping[int, OwnerLoad]) -> QuotaHold | None:
        """:meth:`blocker` as a :class:`QuotaHold` (None: the quota lets it start now)."""
        never = self.never_fits(owner, cpus)
        if never is not None:
            return QuotaHold(never, never=True)
        blocked = self.blocker(owner, cpus, load)
        return QuotaHold(blocked) if blocked is not None else None

    def blocker(self, owner: int, cpus: int, load: Mapping[int, OwnerLoad]) -> str | None:
        """Why one more ``cpus``-CPU job of ``owner`` may not start now, or ``None`` (a job
        that can never fit says so first: :meth:`never_fits`)."""
        never = self.never_fits(owner, cpus)
        if never is not None:
            return never
        limits = self.limits(owner)
        used = load.get(owner, OwnerLoad())
        if limits.max_pending_jobs is not None and used.jobs + 1 > limits.max_pending_jobs:
            return f"quota: max_pending_jobs ({used.jobs}/{limits.max_pending_jobs})"
        if limits.max_concurrent_cpus is not None and (
            used.cpus + cpus > limits.max_concurrent_cpus
        ):
            return f"quota: max_concurrent_cpus ({used.cpus}/{limits.max_concurrent_cpus})"
        return None


@dataclass(frozen=True)
class QuotaGate:
    """The policy and the owners' current load, as one dispatch pass sees them."""

    policy: QuotaPolicy
    load: Mapping[int, OwnerLoad] = field(default_factory=dict)
