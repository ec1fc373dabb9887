"""Read models: the JSON views of jobs that ``vq status``, ``vq list`` and the API print.

Stable schemas (documented in ``docs/json.md``):

* :func:`status_view` — the whole spec plus derived fields: ``workspace``,
  ``pending_over_capacity`` (tri-state: true / false / null when not applicable),
  ``configured_capacity_overages``, ``pending_reason``, ``elapsed_seconds``,
  ``active_seconds``, ``phase``, ``phase_label``, ``scheduler_dialect`` and, for an
  ended job, ``resource_usage`` (from its receipt).
* :func:`list_row` — one compact row per job for listings.

A lane job's ``elapsed_seconds`` counts from the cluster's start
(``scheduler_started_at``), not from vq's claim: none while the cluster queues it
(:mod:`vq.domain.lane_phase`, which also words its ``phase``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast

from vq.domain.admission import Caps, Request, Usage, capacity_overages, pending_reason
from vq.domain.dependencies import evaluate
from vq.domain.lane_phase import lane_elapsed, lane_phase, phase_label
from vq.domain.receipt import Receipt
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.domain.summary import Listed
from vq.errors import InvalidInput
from vq.paths import StatePaths
from vq.protocol.answers import (
    ListRow,
    Overage,
    ResourceUsage,
    SpecJSON,
    StatusView,
    WaitChangeAnswer,
)

__all__ = [
    "ListFilter",
    "list_row",
    "request_of",
    "select",
    "spec_json",
    "status_view",
    "usage_summary",
    "wait_answer",
]

L = TypeVar("L", bound=Listed)


class LaneSettingsLike(Protocol):
    """What a listing reads of a scheduler lane's settings: its scheduler."""

    @property
    def dialect(self) -> str: ...


def request_of(spec: JobSpec) -> Request:
    """What admission sees of a spec."""
    return Request(
        job_id=spec.id,
        cpus=spec.cpus,
        mem_mb=spec.mem_mb,
        priority=spec.priority,
        submitted_at=spec.submitted_at,
        not_before=spec.not_before,
        sequence=spec.array_index if spec.array_index is not None else spec.chain_index or 0,
    )


def spec_json(spec: JobSpec) -> SpecJSON:
    """The spec as JSON (every field; ``tests/contract`` keeps :class:`SpecJSON` in step
    with the model's fields)."""
    return cast("SpecJSON", spec.model_dump(mode="json"))


def _over_capacity(spec: Listed, caps: Caps | None) -> tuple[bool | None, list[Overage]]:
    if caps is None or spec.state is not JobState.PENDING or spec.scheduler_target:
        return None, []
    overages: list[Overage] = [
        {"resource": o.resource, "requested": o.requested, "capacity": o.capacity}
        for o in capacity_overages(spec.cpus, spec.mem_mb, caps)
    ]
    return bool(overages), overages


def _phase(spec: Listed) -> str | None:
    return lane_phase(spec.state.value, spec.scheduler_target, spec.scheduler_state)


def _elapsed(spec: Listed, now: datetime) -> float | None:
    """Seconds since the job started (to its end); a lane job's since the cluster
    started it (:func:`~vq.domain.lane_phase.lane_elapsed`), never since vq's claim."""
    if spec.scheduler_target is not None:
        if spec.state is JobState.PENDING:
            return None
        return lane_elapsed(_phase(spec), spec.scheduler_started_at, spec.finished_at, now)
    if spec.started_at is None:
        return None
    end = spec.finished_at or now
    return max(0.0, (end - spec.started_at).total_seconds())


def _active(spec: JobSpec, now: datetime) -> float | None:
    """Elapsed wall time minus pauses (the current one included)."""
    elapsed = _elapsed(spec, now)
    if elapsed is None:
        return None
    paused = spec.paused_seconds_total
    if spec.paused_at is not None:
        paused += max(0.0, (now - spec.paused_at).total_seconds())
    return max(0.0, elapsed - paused)


def status_view(
    spec: JobSpec,
    paths: StatePaths,
    caps: Caps | None,
    now: datetime,
    usage: Usage | None = None,
    dependency_state: Callable[[str], JobState | str | None] | None = None,
    effective: Caps | None = None,
    hold: str | None = None,
    dialect: str | None = None,
) -> StatusView:
    """Everything known about one job, as JSON-safe data.

    ``hold``: why the daemon holds all dispatch (memory pressure, a drain, the config),
    which ``pending_reason`` names for a PENDING job that only waits for a pass.

    ``caps``: the advertised base caps (the configured-cap classification; None when
    unknown); ``effective``: the dispatch budget a throttle may have lowered (default
    ``caps``), which ``pending_reason`` names.

    ``dependency_state`` (id → state, None when gone) lets ``pending_reason`` say which
    predecessors a PENDING job waits for.

    ``dialect``: the scheduler of the job's lane (``slurm``, ``torque``; None: not a
    lane job, or not known here), named in ``phase_label`` with the scheduler's reason.
    """
    over, overages = _over_capacity(spec, caps)
    # the spec's keys first, then the derived ones (the view's documented key order);
    # a spec dump has none of the view's optional keys (mypy cannot know that of a **)
    view: StatusView = {
        **spec_json(spec),  # type: ignore[typeddict-item]
        "workspace": str(paths.workspace(spec.id)),
        "pending_over_capacity": over,
        "configured_capacity_overages": overages,
        "pending_reason": (
            pending_reason(request_of(spec), usage or Usage(), effective or caps, now, caps)
            if spec.state is JobState.PENDING and caps is not None
            else None
        ),
        "elapsed_seconds": None,
        "active_seconds": None,
        "phase": None,
        "phase_label": None,
        "scheduler_dialect": dialect if spec.scheduler_target is not None else None,
    }
    if spec.state is JobState.PENDING and hold is not None and not overages:
        view["pending_reason"] = hold
    if spec.state is JobState.PENDING and dependency_state is not None:
        gate = evaluate(spec.depends_on, spec.depends_on_any, dependency_state)
        if not gate.ready:
            view["pending_reason"] = gate.reason
    view["elapsed_seconds"] = _elapsed(spec, now)
    view["active_seconds"] = _active(spec, now)
    phase = _phase(spec)
    view["phase"] = phase
    view["phase_label"] = phase_label(phase, spec.scheduler_queued_reason, dialect)
    if spec.is_terminal:
        from vq.store.receipts import read_receipt

        view["resource_usage"] = usage_summary(read_receipt(paths, spec.id))
    return view


def usage_summary(receipt: Receipt | None) -> ResourceUsage | None:
    """What ``vq status`` shows of an ended job's receipt: peak RSS (wait4's largest
    resident set of any one process, in MB) and CPU time (user + system, of the command
    and its waited-for descendants). None without a readable receipt."""
    if receipt is None:
        return None

    def number(value: object) -> float | None:
        return float(value) if isinstance(value, int | float) else None

    rss_kb, user, system = (
        number(receipt.get("max_rss_kb")),
        number(receipt.get("user_cpu_seconds")),
        number(receipt.get("system_cpu_seconds")),
    )
    return {
        "source": "receipt",
        "peak_rss_mb": None if rss_kb is None else round(rss_kb / 1024, 1),
        "cpu_seconds": None if user is None or system is None else round(user + system, 3),
        "user_cpu_seconds": user,
        "system_cpu_seconds": system,
        "wall_seconds": number(receipt.get("wall_seconds")),
    }


def list_row(
    spec: Listed,
    caps: Caps | None,
    now: datetime,
    dialects: Mapping[str, LaneSettingsLike] | None = None,
) -> ListRow:
    """The compact listing row of one job. ``dialects``: the configured scheduler lanes
    (name → settings with a ``dialect``), whose scheduler ``phase_label`` names."""
    over, _ = _over_capacity(spec, caps)
    phase = _phase(spec)
    lane = (dialects or {}).get(spec.scheduler_target or "")
    dialect = lane.dialect if lane is not None else None
    return {
        "id": spec.id,
        "job_name": spec.job_name,
        "state": spec.state.value,
        "command": spec.command,
        "tags": spec.tags,
        "cpus": spec.cpus,
        "cpu_affinity": spec.cpu_affinity,
        "mem_mb": spec.mem_mb,
        "wall_time_seconds": spec.wall_time_seconds,
        "priority": spec.priority,
        "submitted_at": spec.submitted_at.isoformat(),
        "started_at": spec.started_at.isoformat() if spec.started_at else None,
        "finished_at": spec.finished_at.isoformat() if spec.finished_at else None,
        "exit_code": spec.exit_code,
        "failure_reason": spec.failure_reason,
        "retry_count": spec.retry_count,
        "array_group_id": spec.array_group_id,
        "array_index": spec.array_index,
        "array_value": spec.array_value,
        "chain_group_id": spec.chain_group_id,
        "chain_index": spec.chain_index,
        "parent_jobid": spec.parent_jobid,
        "pending_over_capacity": over,
        "elapsed_seconds": _elapsed(spec, now),
        "scheduler_target": spec.scheduler_target,
        "scheduler_state": spec.scheduler_state,
        "submitter": spec.submitter,
        "phase": phase,
        "phase_label": phase_label(phase, spec.scheduler_queued_reason, dialect),
        "scheduler_queued_reason": spec.scheduler_queued_reason,
    }


@dataclass(frozen=True)
class ListFilter:
    """``vq list`` filters; every given one must match (AND)."""

    states: frozenset[JobState] = field(default_factory=frozenset)
    tags: frozenset[str] = field(default_factory=frozenset)
    name: str | None = None
    since: datetime | None = None
    group: str | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ListFilter:
        try:
            states = frozenset(JobState(s.upper()) for s in params.get("states") or [])
        except ValueError as exc:
            raise InvalidInput(
                f"unknown state in {params.get('states')}",
                hint="states are " + ", ".join(s.value for s in JobState),
            ) from exc
        since = params.get("since")
        return cls(
            states=states,
            tags=frozenset(params.get("tags") or []),
            name=params.get("name"),
            since=datetime.fromisoformat(since) if since else None,
            group=params.get("group"),
        )

    def matches(self, spec: Listed) -> bool:
        if self.states and spec.state not in self.states:
            return False
        if self.tags and not self.tags.issubset(spec.tags):
            return False
        if self.name is not None and self.name not in (spec.job_name or ""):
            return False
        if self.group is not None and self.group not in (spec.array_group_id, spec.chain_group_id):
            return False
        return self.since is None or spec.submitted_at >= self.since


def select(specs: Iterable[L], flt: ListFilter) -> list[L]:
    """Matching specs, oldest submission first (group members in index order)."""
    return sorted(
        (s for s in specs if flt.matches(s)),
        key=lambda s: (s.submitted_at, s.array_index or 0, s.chain_index or 0, s.id),
    )


def wait_answer(spec: JobSpec, baseline: JobState, view: StatusView) -> WaitChangeAnswer:
    """The answer of a long-poll (daemon ``wait_change`` and ``GET .../wait`` alike).

    ``changed``: the job left ``baseline``; ``timed_out``: it did not and is not terminal
    (a terminal job in ``baseline`` answers at once, neither changed nor timed out);
    ``job``: the ``vq status --json`` view.
    """
    changed = spec.state is not baseline
    return {
        "id": spec.id,
        "state": spec.state.value,
        "changed": changed,
        "timed_out": not changed and not spec.is_terminal,
        "job": view,
    }
