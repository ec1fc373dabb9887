"""The packing planner (pure, deterministic): which tasks run, in which allocations.

Selection, per task of the roster, from one revision-bound :class:`View`:

* a valid result → skipped;
* an attempt whose acceptance is unresolved (intent without receipt) → withheld (ambiguous);
* an accepted attempt that is QUEUED or RUNNING → withheld (active);
* otherwise, when the task has accepted attempts: every one terminal (SUCCEEDED, FAILED,
  CANCELLED) → selected only with ``retry``; any UNKNOWN or unobserved → selected only with
  ``retry`` *and* ``allow_duplicate_risk`` (it may still be running);
* never accepted (no attempt, or only ``not_submitted``) → selected.

Grouping: authored order; the fewest groups that respect every ceiling of the target
(tasks, CPUs, MiB, GPUs per allocation), balanced so sizes differ by at most one. n tasks
request exactly n·C CPUs, n·M MiB, n·G GPUs and the time T rounded up to minutes once.
``tasks_per_allocation`` lowers packing; above the feasible capacity it is refused, never
clamped. Allocation identities are derived from the pack's random identity, the revision,
the attempt count and the group's keys, so a plan regenerated from its own inputs is
byte-identical (:func:`plan_bytes`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

from vq.packing.profiles import PackingProfile
from vq.packing.roster import Attempt, Task, roster_digest
from vq.packing.script import render_script, sbatch_args
from vq.packing.timelimit import format_minutes

__all__ = [
    "PLAN_SCHEMA",
    "AllocationJSON",
    "PlanDocument",
    "PlanInputs",
    "PlanRefused",
    "TaskView",
    "View",
    "capacity",
    "digest",
    "group_sizes",
    "plan_bytes",
    "plan_document",
]

PLAN_SCHEMA = "vq.pack-plan/1"
SchedulerState = Literal["QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"]
ACTIVE = frozenset({"QUEUED", "RUNNING"})


class TaskViewJSON(TypedDict):
    key: str
    result: str
    scheduler: dict[str, SchedulerState | None]


class ViewJSON(TypedDict):
    """The plan's frozen :class:`View`."""

    revision: int
    observed_at: str | None
    tasks: list[TaskViewJSON]


class AllocationJSON(TypedDict):
    """One allocation of a plan: its tasks, resources, ``sbatch`` directives and digests."""

    allocation_id: str
    task_keys: list[str]
    tasks: int
    cpus: int
    memory_mib: int
    gpus: int
    time: str
    sbatch_args: list[str]
    shape_sha256: str
    script_sha256: str


class PlanProfileJSON(TypedDict):
    """The profile a plan was made with (``target`` and ``resources`` as dumped)."""

    label: str
    target: dict[str, Any]
    resources: dict[str, Any]
    target_sha256: str
    resources_sha256: str
    effective_time: str
    capacity: int


class Withheld(TypedDict):
    key: str
    reason: str


class PlanSelectionJSON(TypedDict):
    tasks_per_allocation: int | None
    retry: list[str]
    allow_duplicate_risk: list[str]
    selected: list[str]
    withheld: list[Withheld]
    skipped: list[str]


class PlanTotalsJSON(TypedDict):
    allocations: int
    tasks: int
    cpus: int
    memory_mib: int
    gpus: int


class PlanDocument(TypedDict):
    """A ``vq.pack-plan/1`` document (PLAN.json); ``plan_sha256`` is the digest of the
    rest."""

    schema: str
    pack: str
    pack_id: str
    revision: int
    sealed: bool
    roster_sha256: str
    attempts: int
    profile: PlanProfileJSON
    view: ViewJSON
    selection: PlanSelectionJSON
    allocations: list[AllocationJSON]
    totals: PlanTotalsJSON
    plan_sha256: NotRequired[str]


TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


class PlanRefused(ValueError):
    """A plan vq will not make; the message says why."""


@dataclass(frozen=True)
class TaskView:
    """What is known of one task: its result and its scheduler evidence per accepted
    attempt (``None`` = not observed)."""

    key: str
    result: Literal["valid", "missing", "unobserved"] = "unobserved"
    scheduler: Mapping[str, SchedulerState | None] = field(default_factory=dict)


@dataclass(frozen=True)
class View:
    """One revision-bound observation of a pack (frozen into the plan)."""

    revision: int
    observed_at: str | None
    tasks: Mapping[str, TaskView]

    def as_dict(self) -> ViewJSON:
        return {
            "revision": self.revision,
            "observed_at": self.observed_at,
            "tasks": [
                {"key": view.key, "result": view.result, "scheduler": dict(view.scheduler)}
                for view in self.tasks.values()
            ],
        }


@dataclass(frozen=True)
class PlanInputs:
    """Everything a plan is a function of."""

    pack: str
    pack_id: str
    revision: int
    sealed: bool
    roster: Sequence[Task]
    attempts: Sequence[Attempt]
    view: View
    profile: PackingProfile
    tasks_per_allocation: int | None = None
    retry: frozenset[str] = frozenset()
    allow_duplicate_risk: frozenset[str] = frozenset()


def capacity(profile: PackingProfile) -> int:
    """The most tasks one allocation can hold under every ceiling of the target."""
    target, res = profile.target, profile.resources
    limits = [
        target.max_tasks_per_allocation,
        target.max_cpus_per_allocation // res.cpus_per_task,
        target.max_memory_mib_per_allocation // res.memory_mib_per_task,
    ]
    if res.gpus_per_task:
        limits.append(target.max_gpus_per_allocation // res.gpus_per_task)
    return min(limits)


def group_sizes(count: int, per_allocation: int) -> list[int]:
    """The fewest sizes ≤ ``per_allocation`` summing to ``count``, differing by ≤ 1."""
    if count == 0:
        return []
    groups = -(-count // per_allocation)
    base, extra = divmod(count, groups)
    return [base + 1] * extra + [base] * (groups - extra)


def _select(inputs: PlanInputs) -> tuple[list[Task], list[Withheld], list[str]]:
    """(selected tasks, withheld [{key, reason}], skipped keys) in authored order."""
    by_task: dict[str, list[Attempt]] = {}
    for attempt in inputs.attempts:
        for key in attempt.task_keys:
            by_task.setdefault(key, []).append(attempt)
    selected: list[Task] = []
    withheld: list[Withheld] = []
    skipped: list[str] = []
    views = inputs.view.tasks
    for task in inputs.roster:
        view = views.get(task.key)
        attempts = by_task.get(task.key)
        if not attempts:  # the common case: never submitted
            if view is not None and view.result == "valid":
                skipped.append(task.key)
            else:
                selected.append(task)
            continue
        view = view or TaskView(task.key)
        accepted = [a for a in attempts if a.outcome == "accepted"]
        states = [view.scheduler.get(a.allocation_id) or "UNKNOWN" for a in accepted]
        if view.result == "valid":
            skipped.append(task.key)
        elif any(a.outcome == "intent" for a in attempts):
            withheld.append({"key": task.key, "reason": "ambiguous: acceptance unresolved"})
        elif any(state in ACTIVE for state in states):
            withheld.append({"key": task.key, "reason": "active: an accepted attempt runs"})
        elif not accepted:
            selected.append(task)
        elif task.key not in inputs.retry:
            withheld.append({"key": task.key, "reason": "accepted before: needs --retry"})
        elif any(state not in TERMINAL for state in states) and (
            task.key not in inputs.allow_duplicate_risk
        ):
            withheld.append(
                {
                    "key": task.key,
                    "reason": "outcome unknown: needs --allow-duplicate-risk with --retry",
                }
            )
        else:
            selected.append(task)
    return selected, withheld, skipped


def _check_choices(inputs: PlanInputs) -> None:
    keys = {task.key for task in inputs.roster}
    for option, chosen in (
        ("--retry", inputs.retry),
        ("--allow-duplicate-risk", inputs.allow_duplicate_risk),
    ):
        unknown = sorted(chosen - keys)
        if unknown:
            raise PlanRefused(f"{option} names a task the pack does not have: {unknown[0]}")
    lonely = sorted(inputs.allow_duplicate_risk - inputs.retry)
    if lonely:
        raise PlanRefused(f"--allow-duplicate-risk {lonely[0]} needs --retry {lonely[0]} too")
    if inputs.view.revision != inputs.revision:
        raise PlanRefused("the view belongs to another revision of the pack")


#: The canonical JSON encoder of digests (made once: ``json.dumps`` with options builds one
#: per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def digest(payload: Any) -> str:
    """SHA-256 of the canonical JSON of ``payload`` (sorted keys, no spaces)."""
    return hashlib.sha256(_CANONICAL.encode(payload).encode()).hexdigest()


def allocation_id(inputs: PlanInputs, keys: Sequence[str]) -> str:
    """16 hex digits derived from the pack's random identity and the group."""
    return digest([inputs.pack_id, inputs.revision, len(inputs.attempts), list(keys)])[:16]


def plan_document(inputs: PlanInputs) -> tuple[PlanDocument, dict[str, bytes]]:
    """The plan (no task arguments or stdin) and each allocation's complete script."""
    _check_choices(inputs)
    profile = inputs.profile
    feasible = capacity(profile)
    per_allocation = feasible
    if inputs.tasks_per_allocation is not None:
        if inputs.tasks_per_allocation < 1:
            raise PlanRefused("--tasks-per-allocation must be at least 1")
        if inputs.tasks_per_allocation > feasible:
            raise PlanRefused(
                f"--tasks-per-allocation {inputs.tasks_per_allocation} is above what one "
                f"allocation of profile {profile.name!r} can hold ({feasible})"
            )
        per_allocation = inputs.tasks_per_allocation
    selected, withheld, skipped = _select(inputs)
    sizes = group_sizes(len(selected), per_allocation)
    if len(sizes) > profile.target.max_allocations_per_submit:
        raise PlanRefused(
            f"{len(sizes)} allocations are needed but the profile allows "
            f"{profile.target.max_allocations_per_submit} per submit"
        )
    res = profile.resources
    time = format_minutes(res.time_minutes)
    allocations: list[AllocationJSON] = []
    scripts: dict[str, bytes] = {}
    shapes: dict[tuple[str, ...], str] = {}  # one digest per distinct shape
    start = 0
    for size in sizes:
        group = selected[start : start + size]
        start += size
        keys = [task.key for task in group]
        alloc = allocation_id(inputs, keys)
        args = sbatch_args(alloc, size, profile)
        script = render_script(alloc, group, profile, args)
        if len(script) > profile.target.max_script_bytes:
            raise PlanRefused(
                f"the script of allocation {alloc} is {len(script)} bytes, over the "
                f"profile's max_script_bytes ({profile.target.max_script_bytes})"
            )
        scripts[alloc] = script
        allocations.append(
            {
                "allocation_id": alloc,
                "task_keys": keys,
                "tasks": size,
                "cpus": size * res.cpus_per_task,
                "memory_mib": size * res.memory_mib_per_task,
                "gpus": size * res.gpus_per_task,
                "time": time,
                "sbatch_args": args,
                # the directives without the allocation's identity (name, comment, log):
                # one `sbatch --test-only` per distinct shape
                "shape_sha256": shapes.get(tuple(args[:-3]))
                or shapes.setdefault(tuple(args[:-3]), digest(args[:-3])),
                "script_sha256": hashlib.sha256(script).hexdigest(),
            }
        )
    target = profile.target.model_dump(mode="json")
    resources = profile.resources.model_dump(mode="json")
    body: PlanDocument = {
        "schema": PLAN_SCHEMA,
        "pack": inputs.pack,
        "pack_id": inputs.pack_id,
        "revision": inputs.revision,
        "sealed": inputs.sealed,
        "roster_sha256": roster_digest(inputs.roster),
        "attempts": len(inputs.attempts),
        "profile": {
            "label": profile.name,
            "target": target,
            "resources": resources,
            "target_sha256": digest(target),
            "resources_sha256": digest(resources),
            "effective_time": time,
            "capacity": feasible,
        },
        "view": inputs.view.as_dict(),
        "selection": {
            "tasks_per_allocation": inputs.tasks_per_allocation,
            "retry": sorted(inputs.retry),
            "allow_duplicate_risk": sorted(inputs.allow_duplicate_risk),
            "selected": [task.key for task in selected],
            "withheld": withheld,
            "skipped": skipped,
        },
        "allocations": allocations,
        "totals": {
            "allocations": len(allocations),
            "tasks": len(selected),
            "cpus": sum(a["cpus"] for a in allocations),
            "memory_mib": sum(a["memory_mib"] for a in allocations),
            "gpus": sum(a["gpus"] for a in allocations),
        },
    }
    body["plan_sha256"] = digest(body)
    return body, scripts


def plan_bytes(document: Mapping[str, Any]) -> bytes:
    """The canonical bytes of a plan document (what PLAN.json holds)."""
    return (json.dumps(document, sort_keys=True, indent=1, ensure_ascii=True) + "\n").encode()
