"""``vq pack plan``: plan a pack against a profile, publish PLAN.json, reload it exactly.

The plan is a pure function (:func:`vq.packing.planner.plan_document`) of the pack's
current revision, a view of it, the profile's resolved values and the caller's choices.
PLAN.json is published owner-only with :func:`vq.publish.publish_file` (never over an
existing path). :func:`load_plan` regenerates the plan from the pack file and the plan's
own frozen inputs and requires identical bytes; a pack that moved to another revision
makes the plan stale.

The view comes from ``observe`` (the CLI passes scheduler inspection when the pack has
accepted attempts, :mod:`vq.packing.cases.inspection`); without it every task is unobserved.
A plan records how many attempts the pack had; reloading regenerates it against that
prefix of the (append-only) attempt list, so submitting some of its allocations does not
make the rest unreadable; a genuine plan whose bytes no longer regenerate is stale.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vq.errors import Conflict, InvalidInput, NotFound
from vq.packing.cases.rosters import load_pack
from vq.packing.planner import (
    PlanDocument,
    PlanInputs,
    PlanRefused,
    TaskView,
    View,
    digest,
    plan_bytes,
    plan_document,
)
from vq.packing.profiles import PackingProfile
from vq.packing.roster import Attempt, PackDocument
from vq.paths import StatePaths
from vq.publish import publish_file

__all__ = ["LoadedPlan", "load_plan", "make_plan", "unobserved_view", "write_plan"]

MAX_PLAN_BYTES = 64 << 20


@dataclass(frozen=True)
class LoadedPlan:
    document: PlanDocument
    scripts: dict[str, bytes]
    data: bytes


def unobserved_view(pack: PackDocument) -> View:
    """A view with no result probe and no scheduler evidence."""
    return View(
        revision=pack.revision,
        observed_at=None,
        tasks={task.key: TaskView(task.key) for task in pack.tasks},
    )


def _inputs(
    pack: PackDocument,
    attempts: Sequence[Attempt],
    view: View,
    profile: PackingProfile,
    tasks_per_allocation: int | None,
    retry: frozenset[str],
    allow_duplicate_risk: frozenset[str],
) -> PlanInputs:
    return PlanInputs(
        pack=pack.name,
        pack_id=pack.pack_id,
        revision=pack.revision,
        sealed=pack.sealed,
        roster=pack.roster(),
        attempts=attempts,
        view=view,
        profile=profile,
        tasks_per_allocation=tasks_per_allocation,
        retry=retry,
        allow_duplicate_risk=allow_duplicate_risk,
    )


def _plan(inputs: PlanInputs) -> LoadedPlan:
    try:
        document, scripts = plan_document(inputs)
    except PlanRefused as exc:
        raise InvalidInput(
            f"cannot plan pack {inputs.pack!r}: {exc}",
            hint="see docs/packing.md (Plans) for the selection and capacity rules",
            reference="pack-plan-refused",
        ) from None
    return LoadedPlan(document, scripts, plan_bytes(document))


def make_plan(
    paths: StatePaths,
    name: str,
    profile: PackingProfile,
    *,
    tasks_per_allocation: int | None = None,
    retry: frozenset[str] = frozenset(),
    allow_duplicate_risk: frozenset[str] = frozenset(),
    observe: Callable[[PackDocument], View] | None = None,
) -> LoadedPlan:
    """Plan pack ``name``. ``observe`` gives the view (scheduler evidence and results);
    without it the view is unobserved."""
    pack = load_pack(paths, name)
    view = unobserved_view(pack) if observe is None else observe(pack)
    if view.revision != pack.revision:
        raise Conflict(
            f"pack {name!r} changed while it was being observed",
            hint="plan again",
            reference="pack-view-stale",
        )
    inputs = _inputs(
        pack, pack.attempts, view, profile, tasks_per_allocation, retry, allow_duplicate_risk
    )
    return _plan(inputs)


def write_plan(output: Path, plan: LoadedPlan) -> Path:
    """Publish PLAN.json (0600); an existing path is refused (exit 6) and left alone."""

    def write(stage: Path) -> None:
        os.chmod(stage, 0o600)
        with open(stage, "wb") as handle:
            handle.write(plan.data)

    return publish_file(output, write).path


def _view_from(document: Mapping[str, Any]) -> View:
    raw = document["view"]
    return View(
        revision=int(raw["revision"]),
        observed_at=raw["observed_at"],
        tasks={
            item["key"]: TaskView(item["key"], item["result"], dict(item["scheduler"]))
            for item in raw["tasks"]
        },
    )


def load_plan(paths: StatePaths, plan_path: Path) -> LoadedPlan:
    """Reload PLAN.json: regenerate it from its frozen inputs and require identical bytes."""
    try:
        with open(plan_path, "rb") as handle:
            data = handle.read(MAX_PLAN_BYTES + 1)
    except FileNotFoundError:
        raise NotFound(
            f"{plan_path} does not exist",
            hint="make one with `vq pack plan NAME --output PLAN.json`",
        ) from None
    refused = InvalidInput(
        f"{plan_path} is not a plan vq made, or it was edited",
        hint="make a new plan with `vq pack plan NAME --output NEW.json`",
        reference="pack-plan-altered",
    )
    try:
        document = json.loads(data)
        pack = load_pack(paths, str(document["pack"]))
        profile = PackingProfile.model_validate(
            {
                "name": document["profile"]["label"],
                "target": document["profile"]["target"],
                "resources": document["profile"]["resources"],
            }
        )
        selection = document["selection"]
        view = _view_from(document)
        stored_revision = int(document["revision"])
        stored_pack_id = document["pack_id"]
        stored_attempts = int(document["attempts"])
        genuine = document.pop("plan_sha256") == digest(document)
    except (ValueError, KeyError, TypeError) as exc:
        raise refused from exc
    if not genuine:
        raise refused
    if stored_pack_id != pack.pack_id or stored_revision != pack.revision:
        raise Conflict(
            f"{plan_path} is stale: it was made for revision {stored_revision} of pack "
            f"{pack.name!r}, which is now at revision {pack.revision}",
            hint="make a new plan",
            reference="pack-plan-stale",
        )
    inputs = _inputs(
        pack,
        pack.attempts[:stored_attempts],
        view,
        profile,
        selection["tasks_per_allocation"],
        frozenset(selection["retry"]),
        frozenset(selection["allow_duplicate_risk"]),
    )
    regenerated = _plan(inputs)
    if regenerated.data != data:
        # the plan is vq's own (its digest holds), so the pack's attempts moved on
        raise Conflict(
            f"{plan_path} is stale: the attempts of pack {pack.name!r} changed since it was made",
            hint="make a new plan",
            reference="pack-plan-stale",
        )
    return regenerated
