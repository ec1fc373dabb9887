"""The JSON of the report verbs (``vq overview``, ``vq usage``, ``vq top``), as stdlib types.

The gateway builds these from the daemon's ``ping`` and ``list`` answers or from the spec
files (:mod:`vq.services.reports`, :mod:`vq.services.top`); the CLI prints them and the
web console serves them (``GET /api/v1/overview``, ``/usage``). Shapes as in
docs/json.md; ``tests/contract/test_answer_types.py`` checks these keys against what the
services build. Like :mod:`vq.protocol.answers`, this module does not postpone its
annotations (``NotRequired`` must reach ``__optional_keys__`` at run time).
"""

from typing import TypedDict

from vq.protocol.answers import CapsJSON

__all__ = [
    "CapUse",
    "DaemonSummary",
    "LaneUse",
    "OverviewAnswer",
    "OwnerUse",
    "RecentTerminal",
    "Reservation",
    "TopAnswer",
    "TopCapacity",
    "TopDaemon",
    "TopJob",
    "UsageAnswer",
    "UsageGroup",
    "UsageTotals",
]


# --- vq overview ---------------------------------------------------------------------------
class DaemonSummary(TypedDict):
    """Whether a daemon answered, and what its ``ping`` said of it (nulls without one)."""

    running: bool
    pid: int | None
    version: str | None
    started_at: str | None
    uptime_seconds: float | None
    cgroup_mode: str | None


class RecentTerminal(TypedDict):
    """The jobs that ended in the recent window, by state."""

    window_hours: float
    since: str
    counts: dict[str, int]


class Reservation(TypedDict):
    """What a set of local jobs reserves."""

    jobs: int
    cpus: int
    mem_mb: int


class LaneUse(TypedDict):
    """The RUNNING/SUSPENDED jobs of scheduler lanes (§6.3). They run on a cluster, so
    they are never counted against this host's capacity. ``running_*``: the last
    scheduler phase is exactly ``running`` (confirmed execution); ``unconfirmed_scheduler_*``:
    every other phase (queued, held, submitting, finishing, reattachment, unknown)."""

    jobs: int
    cpus: int
    running_jobs: int
    running_cpus: int
    unconfirmed_scheduler_jobs: int
    unconfirmed_scheduler_cpus: int


class OwnerUse(TypedDict):
    """One owner's quota use (multi-user mode)."""

    uid: int
    holders: int
    cpus: int
    pending: int
    max_pending_jobs: int | None
    max_concurrent_cpus: int | None


class OverviewAnswer(TypedDict):
    """``vq overview --json``: the queue at a glance."""

    generated_at: str
    daemon: DaemonSummary
    counts: dict[str, int]
    total_jobs: int
    quarantined: int
    recent_terminal: RecentTerminal
    running: Reservation
    reserved: Reservation
    capacity: CapsJSON | None
    pending_cpus: int
    over_capacity_pending_jobs: int | None
    owners: list[OwnerUse] | None
    unconfirmed_scheduler_jobs: int
    unconfirmed_scheduler_cpus: int
    lanes: LaneUse


# --- vq usage ------------------------------------------------------------------------------
class UsageTotals(TypedDict):
    """Jobs that ran, and their wall- and CPU-hours."""

    jobs: int
    wall_hours: float
    cpu_hours: float


class UsageGroup(UsageTotals):
    """One group of ``vq usage --by``: its key (null: untagged, unnamed, ...) and totals."""

    key: str | None


class UsageAnswer(TypedDict):
    """``vq usage --json``: the groups, largest first, and the total."""

    by: str
    since: str | None
    generated_at: str
    groups: list[UsageGroup]
    total: UsageTotals


# --- vq top --------------------------------------------------------------------------------
class TopDaemon(TypedDict):
    """Whether a daemon answered, and its pid."""

    running: bool
    pid: int | None


class CapUse(TypedDict):
    """One resource: what the live jobs reserve and the cap (null: none or unknown)."""

    reserved: int
    cap: int | None


class TopCapacity(TypedDict):
    """The live jobs' reservations against the caps."""

    cpus: CapUse
    mem_mb: CapUse
    jobs: CapUse


class TopJob(TypedDict):
    """One live job of ``vq top``: its request and its latest sample's readings."""

    id: str
    job_name: str | None
    state: str
    cpus: int
    cpu_affinity: list[int] | None
    cpu_percent: float | None
    rss_mb: float | None
    mem_limit_mb: int | None
    mem_percent: float | None
    elapsed_seconds: float | None
    wall_time_seconds: int | None
    wall_percent: float | None
    sample_age_seconds: float | None
    stale: bool
    #: a lane job's cluster phase and the STATE text shown for it (else None)
    phase: str | None
    phase_label: str | None


class TopAnswer(TypedDict):
    """``vq top --json``: counts, reservations and the live jobs."""

    generated_at: str
    daemon: TopDaemon
    capacity_source: str | None
    counts: dict[str, int]
    capacity: TopCapacity
    jobs: list[TopJob]
    lanes: LaneUse
