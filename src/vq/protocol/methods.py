"""The RPC contract: one params model and one result model per daemon method.

:data:`CONTRACTS` is the one list of methods served on ``daemon.sock`` (name → params
model, result model). The daemon's method table (:mod:`vq.daemon.routes`) pairs each
entry with its handler and a test keeps the two in step; clients may validate answers
against the same result models.

Params models refuse unknown fields, so a misspelt parameter is an ``invalid-input``
error (exit code 4) naming the field instead of being ignored. Result models declare the
fields every answer carries; answers that embed a whole view (a status view, a spec)
allow the view's further fields, which are documented in docs/json.md. Schemas only
grow: a new field is optional in params and additive in results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from .answers import ListQuery
from .messages import SubmitParams

__all__ = [
    "CONTRACTS",
    "WAIT_MAX_SECONDS",
    "CapacityResult",
    "Contract",
    "DrainParams",
    "DrainResult",
    "EmptyParams",
    "EmptyResult",
    "HealthResult",
    "HoldResult",
    "JobIdParams",
    "JobOutcome",
    "ListParams",
    "ListResult",
    "PingResult",
    "ResubmitParams",
    "SchedulerResolveParams",
    "SchedulerResolveResult",
    "SpecResult",
    "StatusParams",
    "StatusResult",
    "SubmitResult",
    "ThrottleParams",
    "ThrottleResult",
    "UndrainResult",
    "WaitChangeParams",
    "WaitChangeResult",
]

#: The longest one ``wait_change`` call blocks.
WAIT_MAX_SECONDS = 300.0

Positive = Annotated[int, Field(strict=True, ge=1)]
Count = Annotated[int, Field(strict=True, ge=0)]
Seconds = Annotated[float, Field(strict=True, ge=0)]


class Params(BaseModel):
    """Base of every params model: unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Result(BaseModel):
    """Base of the result models whose every field is declared."""

    model_config = ConfigDict(extra="forbid")


class View(BaseModel):
    """Base of the result models that embed an open view (further fields allowed)."""

    model_config = ConfigDict(extra="allow")


# --- params ------------------------------------------------------------------------------
class EmptyParams(Params):
    """A method without parameters."""


class JobIdParams(Params):
    """A method about one job."""

    id: str = Field(min_length=1, max_length=256)


class StatusParams(JobIdParams):
    """``status``: one job; ``uid`` (multi-user) reads the copy in that owner's tree."""

    uid: int | None = Field(default=None, ge=0, le=2**31 - 1)


class WaitChangeParams(JobIdParams):
    """``wait_change``: block until the job leaves ``since_state`` (or is terminal)."""

    since_state: str | None = None
    timeout: Annotated[Seconds, Field(le=WAIT_MAX_SECONDS)] = 60.0


class ListParams(Params):
    """``list``: the filters of ``ListFilter`` and the paging of ``services.listing``."""

    states: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    name: str | None = None
    since: str | None = None
    group: str | None = None
    sort: str | None = None
    table_sort: str | None = None
    table_dir: str | None = None
    offset: Count | None = None
    limit: Count | None = None
    count_only: bool | None = None
    #: how old (seconds) a check for other writers' spec changes may be
    max_age: Annotated[Seconds, Field(le=60)] | None = None

    def query(self) -> ListQuery:
        """The filter and paging parameters as the services read them (no ``max_age``)."""
        return cast("ListQuery", self.model_dump(exclude={"max_age"}, exclude_none=True))


class ResubmitParams(JobIdParams):
    """``resubmit``: a new job from an old one's spec, with field overrides."""

    overrides: dict[str, Any] = Field(default_factory=dict)


class SchedulerResolveParams(JobIdParams):
    """``scheduler_resolve``: adopt ``scheduler_job_id``, or (None) submit it now."""

    scheduler_job_id: str | None = Field(default=None, min_length=1, max_length=64)


class DrainParams(Params):
    """``drain``: stop dispatching; ``full`` also pauses the running jobs."""

    mode: Literal["new", "full"] = "new"
    reject_submits: bool = False
    reason: str | None = Field(default=None, max_length=1024)


class ThrottleParams(Params):
    """``throttle``: lower the caps for a while, or ``clear`` the throttle."""

    clear: bool = False
    max_jobs: Positive | None = None
    max_cpus: Positive | None = None
    seconds: Positive | None = None


# --- results -----------------------------------------------------------------------------
class EmptyResult(Result):
    """An answer without fields (``wake``)."""


class HoldResult(Result):
    """``hold`` (a user's submit socket, multi-user mode): why the daemon holds one of
    the caller's jobs (a collision with another owner's copy, a quarantine), or null."""

    reason: str | None = None


class PingResult(Result):
    """``ping``: who answers, since when, with which caps and methods."""

    version: str
    pid: int
    uptime_seconds: float
    started_at: str
    state_root: str
    methods: list[str]
    provenance: dict[str, str | None]
    cgroup_mode: str
    cgroup_reason: str
    #: whether local jobs are pinned to disjoint cores (``[daemon] cpu_affinity``)
    cpu_affinity: bool = False
    #: why dispatch is held now (memory pressure, a drain, the config), or None
    dispatch_hold: str | None = None
    #: set while dispatch holds because the state root cannot take a write
    storage_hold: dict[str, str] | None = None
    #: a root daemon started with --allow-root / VQ_ALLOW_ROOT=1 (every job runs as root)
    root_single_user: bool = False
    #: the configured (base) caps, and the caps in force after a throttle
    caps: dict[str, int | None]
    effective_caps: dict[str, int | None]


class SubmitResult(View):
    """``submit``: the job's spec (one job) or the group id and every member's spec."""

    capacity_warnings: list[str] = Field(default_factory=list)


class StatusResult(View):
    """``status``: the ``vq status --json`` view (docs/json.md)."""

    id: str
    state: str


class SpecResult(View):
    """``resubmit``: the new job's whole spec."""

    id: str
    state: str


class WaitChangeResult(Result):
    """``wait_change``: the state now and whether it changed, or ``abandoned``."""

    id: str
    state: str
    changed: bool | None = None
    timed_out: bool | None = None
    job: dict[str, Any] | None = None
    abandoned: bool | None = None


class ListResult(Result):
    """``list``: the rows, the unreadable specs and every state's count (plus paging)."""

    jobs: list[dict[str, Any]]
    quarantined: list[dict[str, str]]
    counts: dict[str, int]
    total: int | None = None
    total_jobs: int | None = None


class JobOutcome(View):
    """``kill``, ``pause``, ``resume``: what happened to one job (docs/json.md)."""

    id: str
    state: str


class SchedulerResolveResult(Result):
    """``scheduler_resolve``: the decision applied to a lane job (for a packed element,
    to its whole allocation: ``scheduler_pack_id`` and every element it settled)."""

    id: str
    scheduler_job_id: str | None
    lane: str
    scheduler_pack_id: str | None = None
    elements: list[str] | None = None


class DrainResult(Result):
    """``drain``: the drain now in force (``drain.json``)."""

    mode: str
    reject_submits: bool
    reason: str | None
    set_at: str | None


class UndrainResult(Result):
    """``undrain``: no drain; ``resumed_paused_by`` names the pauses undone (or None)."""

    mode: Literal["none"]
    resumed_paused_by: str | None


class ThrottleResult(Result):
    """``throttle``: the throttle in force (None when cleared) and the caps it leaves."""

    throttle: dict[str, int | str | None] | None
    effective_caps: dict[str, int | None]


class CapacityResult(Result):
    """``capacity``: configured caps, effective caps (after throttle), reserved usage."""

    configured: dict[str, int | None]
    effective: dict[str, int | None]
    reserved: dict[str, int]


class AdminStatusResult(Result):
    """``admin_status``: drain, throttle, configuration health and dispatch holds."""

    drain: dict[str, str | bool | None]
    throttle: dict[str, int | str | None] | None
    config_error: str | None
    #: loaded config files that have disappeared (dispatch is held until one is back)
    config_missing: list[str] = Field(default_factory=list)
    configured_caps: dict[str, int | None]
    effective_caps: dict[str, int | None]
    holding_dispatch: bool
    memory_pressure_hold: bool
    #: why dispatch is held now, in words (the ``pending_reason`` it gives), or None
    dispatch_hold: str | None = None
    #: set while dispatch holds because the state root cannot take a write
    storage_hold: dict[str, str] | None = None


class HealthResult(Result):
    """``health``: whether the daemon is doing its job, check by check."""

    ok: bool
    checked_at: str
    checks: list[dict[str, str | bool]]


class ReloadResult(View):
    """``reload``: what the configuration reload applied (or refused)."""


# --- the contract ------------------------------------------------------------------------
@dataclass(frozen=True)
class Contract:
    """One RPC method: its params model, its result model, whether it changes state."""

    params: type[BaseModel]
    result: type[BaseModel]
    mutating: bool


CONTRACTS: dict[str, Contract] = {
    "ping": Contract(EmptyParams, PingResult, mutating=False),
    "wake": Contract(EmptyParams, EmptyResult, mutating=False),
    "submit": Contract(SubmitParams, SubmitResult, mutating=True),
    "status": Contract(StatusParams, StatusResult, mutating=False),
    "wait_change": Contract(WaitChangeParams, WaitChangeResult, mutating=False),
    "list": Contract(ListParams, ListResult, mutating=False),
    "kill": Contract(JobIdParams, JobOutcome, mutating=True),
    "pause": Contract(JobIdParams, JobOutcome, mutating=True),
    "resume": Contract(JobIdParams, JobOutcome, mutating=True),
    "resubmit": Contract(ResubmitParams, SpecResult, mutating=True),
    "scheduler_resolve": Contract(SchedulerResolveParams, SchedulerResolveResult, mutating=True),
    "reload": Contract(EmptyParams, ReloadResult, mutating=True),
    "drain": Contract(DrainParams, DrainResult, mutating=True),
    "undrain": Contract(EmptyParams, UndrainResult, mutating=True),
    "throttle": Contract(ThrottleParams, ThrottleResult, mutating=True),
    "capacity": Contract(EmptyParams, CapacityResult, mutating=False),
    "health": Contract(EmptyParams, HealthResult, mutating=False),
    "admin_status": Contract(EmptyParams, AdminStatusResult, mutating=False),
}
