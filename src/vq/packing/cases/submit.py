"""``vq pack validate`` and ``vq pack submit``: a reviewed plan, sent to Slurm durably.

Validate makes one ``sbatch --test-only`` per distinct allocation shape
(``shape_sha256``) and changes nothing.

Submit sends the plan's allocations in order, in windows: the first allocation alone (it
opens the login host's multiplexed SSH connection and proves the command), then up to
:data:`MAX_IN_FLIGHT` at a time. Per window:

1. for a retried task, its earlier accepted attempts are observed again: an active one,
   or an unknown one without ``--allow-duplicate-risk``, stops the run (exit 6);
2. under the pack lock, reread ``pack.json``: the plan must still be current (same
   revision; exit 6). Each allocation, in order, must not be recorded already, and no
   attempt recorded since the plan may hold one of its tasks (eligibility changed: exit
   6). An allocation already accepted is reported and skipped, so a plan submitted twice
   never makes a second allocation; one still awaiting its receipt (exit 12) or a
   refused one ends the window there, and the run stops after the allocations before it;
3. record the intents of the window's new allocations (route, resources, totals, the
   exact ``sbatch`` command, digests) in one synced write, before any of their
   ``sbatch`` runs;
4. ``sbatch --parsable`` of each, the script on stdin, concurrently (one session each
   over the one connection);
5. record every receipt (job id, cluster) the window got, in one synced write. No
   receipt — a transport failure, a timeout, a non-zero status, an unparsable answer, or
   vq killed in between — leaves that intent unresolved and stops the run after the
   window (:class:`~vq.errors.OutcomeUnknown`, exit 12): it is never retried blindly.
   ``vq pack reconcile`` adopts the job from accounting, or ``vq pack resolve`` records
   an operator's word. At most one window's allocations are ever unresolved at once.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from vq.dialects.model import SubmitAccepted
from vq.dialects.slurm_alloc import (
    ObservationError,
    SbatchRefused,
    parse_receipt,
    submit_argv,
)
from vq.errors import Conflict, InvalidInput, OutcomeUnknown, TransportError, VqError
from vq.packing.cases.inspection import observation_refused, observe_attempt
from vq.packing.cases.plans import LoadedPlan, load_plan
from vq.packing.cases.remote import PackRemote, RunnerFor
from vq.packing.cases.rosters import load_pack, now_utc, update_pack
from vq.packing.evidence import ACTIVE, TERMINAL
from vq.packing.planner import AllocationJSON
from vq.packing.roster import Attempt, AttemptIntent, PackDocument
from vq.paths import StatePaths

__all__ = ["submit_plan", "validate_plan"]


class ShapeCheck(TypedDict):
    """One distinct shape's ``sbatch --test-only`` answer (``vq pack validate --json``)."""

    allocation_id: str
    shape_sha256: str
    script_sha256: str
    tasks: int
    start: str
    processors: int
    nodes: str
    partition: str


class SubmitReport(TypedDict):
    """One allocation accepted now (``submitted``) or before (``already``)."""

    allocation_id: str
    job_id: str | None
    action: str


Report = Callable[[SubmitReport], None]
#: At most this many ``sbatch`` calls in flight, each one session of the login host's
#: multiplexed SSH connection (OpenSSH's sshd allows 10 sessions per connection by
#: default; the rest are left to the lane and to other commands of the same user).
MAX_IN_FLIGHT = 4


def _plan_for(paths: StatePaths, name: str, plan_path: Path) -> LoadedPlan:
    plan = load_plan(paths, plan_path)
    if plan.document["pack"] != name:
        raise InvalidInput(
            f"{plan_path} is a plan of pack {plan.document['pack']!r}, not {name!r}",
            hint=f"make a plan with `vq pack plan {name} --output PLAN.json`",
        )
    return plan


def _remote(plan: LoadedPlan, runner_for: RunnerFor) -> PackRemote:
    return PackRemote(runner_for(str(plan.document["profile"]["target"]["host"])))


def validate_plan(
    paths: StatePaths, name: str, plan_path: Path, runner_for: RunnerFor
) -> list[ShapeCheck]:
    """One ``sbatch --test-only`` per distinct shape; the controller's answers."""
    plan = _plan_for(paths, name, plan_path)
    remote = _remote(plan, runner_for)
    answers: list[ShapeCheck] = []
    seen: set[str] = set()
    for allocation in plan.document["allocations"]:
        shape = allocation["shape_sha256"]
        if shape in seen:
            continue
        seen.add(shape)
        alloc = allocation["allocation_id"]
        try:
            answer = remote.test_only(plan.scripts[alloc])
        except SbatchRefused as exc:
            raise InvalidInput(
                f"allocation {alloc}: {exc}",
                hint="the cluster cannot run this shape: check the profile's partitions and "
                "ceilings against the cluster, or lower --tasks-per-allocation",
                reference="pack-shape-refused",
            ) from None
        except ObservationError as exc:
            raise observation_refused(exc) from None
        answers.append(
            {
                "allocation_id": alloc,
                "shape_sha256": shape,
                "script_sha256": allocation["script_sha256"],
                "tasks": allocation["tasks"],
                "start": answer.start,
                "processors": answer.processors,
                "nodes": answer.nodes,
                "partition": answer.partition,
            }
        )
    return answers


def _intent(plan: LoadedPlan, allocation: AllocationJSON) -> AttemptIntent:
    profile = plan.document["profile"]
    selection = plan.document["selection"]
    keys = set(allocation["task_keys"])
    return AttemptIntent(
        recorded_at=now_utc(),
        profile=profile["label"],
        target=profile["target"],
        resources=profile["resources"],
        target_sha256=profile["target_sha256"],
        resources_sha256=profile["resources_sha256"],
        cpus=allocation["cpus"],
        memory_mib=allocation["memory_mib"],
        gpus=allocation["gpus"],
        time=allocation["time"],
        sbatch_command=[*submit_argv(), *allocation["sbatch_args"]],
        plan_sha256=plan.document["plan_sha256"],
        shape_sha256=allocation["shape_sha256"],
        script_sha256=allocation["script_sha256"],
        retry=sorted(keys & set(selection["retry"])),
        allow_duplicate_risk=sorted(keys & set(selection["allow_duplicate_risk"])),
    )


def _refresh_retries(
    pack: PackDocument, plan: LoadedPlan, allocation: AllocationJSON, remote: PackRemote
) -> None:
    """Observe again every earlier accepted attempt of a retried task of ``allocation``."""
    retried = set(allocation["task_keys"]) & set(plan.document["selection"]["retry"])
    risky = set(plan.document["selection"]["allow_duplicate_risk"])
    for attempt in pack.attempts[: int(plan.document["attempts"])]:
        keys = retried & set(attempt.task_keys)
        if not keys or attempt.outcome != "accepted":
            continue
        state = observe_attempt(remote, attempt).state
        if state in ACTIVE or (state not in TERMINAL and not keys <= risky):
            raise Conflict(
                f"task {sorted(keys)[0]}: its attempt in allocation {attempt.allocation_id} "
                f"is now {state}; the plan's eligibility changed",
                hint="inspect the pack and make a new plan",
                reference="pack-eligibility-changed",
            )


@dataclass
class _Window:
    """What recording one window's intents decided, allocation by allocation in order."""

    sent: list[AllocationJSON] = field(default_factory=list)  # intents recorded: to send
    already: dict[str, Attempt] = field(default_factory=dict)  # accepted before: reported
    stop: VqError | None = None  # the refusal met at the end of the window's prefix


def _record_intents(
    paths: StatePaths, name: str, plan: LoadedPlan, window: list[AllocationJSON]
) -> _Window:
    """Record, in one synced write, the intent of every allocation of ``window`` up to
    the first that must stop the run (accepted before: reported instead; an intent
    without a receipt, a resolved one or changed eligibility: ``stop``). A stale plan
    raises before anything is written."""
    base = int(plan.document["attempts"])
    decided = _Window()

    def change(pack: PackDocument) -> PackDocument | None:
        if pack.revision != plan.document["revision"]:
            raise Conflict(
                f"pack {name!r} moved to revision {pack.revision} while this plan "
                f"(revision {plan.document['revision']}) was being submitted",
                hint="inspect the pack and make a new plan for the tasks not yet submitted",
                reference="pack-plan-stale",
            )
        decided.sent.clear()
        decided.already.clear()
        decided.stop = None
        recorded = {attempt.allocation_id: attempt for attempt in pack.attempts}
        later = pack.attempts[base:]
        added: list[Attempt] = []
        for allocation in window:
            decided.stop = _refusal(name, allocation, recorded, later)
            if decided.stop is not None:
                break
            existing = recorded.get(allocation["allocation_id"])
            if existing is not None:
                decided.already[existing.allocation_id] = existing
                continue
            added.append(
                Attempt(
                    allocation_id=allocation["allocation_id"],
                    task_keys=list(allocation["task_keys"]),
                    outcome="intent",
                    revision=pack.revision,
                    intent=_intent(plan, allocation),
                )
            )
            decided.sent.append(allocation)
        if not added:
            return None
        return pack.model_copy(update={"attempts": [*pack.attempts, *added]})

    update_pack(paths, name, change)
    return decided


def _refusal(
    name: str,
    allocation: AllocationJSON,
    recorded: dict[str, Attempt],
    later: list[Attempt],
) -> VqError | None:
    """Why ``allocation`` must not be sent now, or None (new, or accepted before)."""
    alloc = allocation["allocation_id"]
    existing = recorded.get(alloc)
    if existing is not None:
        if existing.outcome == "intent":
            return _ambiguous(
                name, alloc, "an earlier submission recorded its intent but no receipt"
            )
        if existing.outcome == "not_submitted":
            return Conflict(
                f"allocation {alloc} was resolved as not submitted",
                hint=f"make a new plan: `vq pack plan {name} --output NEW.json`",
                reference="pack-plan-stale",
            )
        return None
    keys = set(allocation["task_keys"])
    for attempt in later:
        if keys & set(attempt.task_keys):
            return Conflict(
                f"allocation {attempt.allocation_id}, recorded after this plan was made, "
                f"holds task {sorted(keys & set(attempt.task_keys))[0]}",
                hint="inspect the pack and make a new plan",
                reference="pack-eligibility-changed",
            )
    return None


def _ambiguous(name: str, alloc: str, why: str) -> OutcomeUnknown:
    return OutcomeUnknown(
        f"allocation {alloc}: {why}; whether Slurm accepted it is unknown, so submission stops",
        hint=f"`vq pack reconcile {name} {alloc}` adopts it from accounting; if it is not "
        f"there, `vq pack resolve {name} {alloc} --not-submitted`",
        reference="pack-acceptance-unknown",
    )


def _first_unknown(name: str, unknown: dict[str, OutcomeUnknown]) -> OutcomeUnknown:
    """The error of the first allocation whose acceptance is unknown, naming the others."""
    (first, error), *others = unknown.items()
    if not others:
        return error
    rest = " ".join(alloc for alloc, _ in others)
    return OutcomeUnknown(
        f"{error.message}; the acceptance of {len(others)} more allocation(s) sent with it "
        f"is unknown too ({rest})",
        hint=f"settle each one: `vq pack reconcile {name} ALLOC` adopts it from accounting; "
        f"if it is not there, `vq pack resolve {name} ALLOC --not-submitted` "
        f"(first {first})",
        reference="pack-acceptance-unknown",
    )


def _record_receipts(paths: StatePaths, name: str, receipts: dict[str, SubmitAccepted]) -> None:
    """Record every receipt of ``receipts`` (allocation id → receipt) in one synced write."""
    if not receipts:
        return
    decided = now_utc()

    def change(pack: PackDocument) -> PackDocument:
        attempts = [
            attempt
            if attempt.allocation_id not in receipts
            else attempt.model_copy(
                update={
                    "outcome": "accepted",
                    "job_id": receipts[attempt.allocation_id].scheduler_job_id,
                    "cluster": receipts[attempt.allocation_id].cluster,
                    "revision": pack.revision,
                    "how": "sbatch",
                    "decided_at": decided,
                }
            )
            for attempt in pack.attempts
        ]
        return pack.model_copy(update={"attempts": attempts})

    update_pack(paths, name, change)


def _sbatch(
    name: str, alloc: str, remote: PackRemote, command: list[str], script: bytes
) -> SubmitAccepted | OutcomeUnknown:
    """One allocation's ``sbatch``: its receipt, or why its acceptance is unknown."""
    try:
        result = remote.submit(command, script)
    except TransportError as exc:
        return _ambiguous(name, alloc, f"sbatch did not answer ({exc.message})")
    if result.rc != 0:
        last = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return _ambiguous(
            name, alloc, f"sbatch exited {result.rc} without a receipt ({last[0][:200]})"
        )
    try:
        return parse_receipt(result.stdout.decode("utf-8", "replace"))
    except ObservationError as exc:
        return _ambiguous(name, alloc, str(exc))


def _send(
    name: str, remote: PackRemote, command: list[str], plan: LoadedPlan, sent: list[AllocationJSON]
) -> dict[str, SubmitAccepted | OutcomeUnknown]:
    """``sbatch`` of every allocation of ``sent`` (their intents are on disk), at most
    :data:`MAX_IN_FLIGHT` at once over the login host's one multiplexed connection."""
    ids = [allocation["allocation_id"] for allocation in sent]
    if len(ids) <= 1:
        return {alloc: _sbatch(name, alloc, remote, command, plan.scripts[alloc]) for alloc in ids}
    with ThreadPoolExecutor(max_workers=min(MAX_IN_FLIGHT, len(ids))) as pool:
        answers = pool.map(
            lambda alloc: _sbatch(name, alloc, remote, command, plan.scripts[alloc]), ids
        )
        return dict(zip(ids, answers, strict=True))


def submit_plan(
    paths: StatePaths, name: str, plan_path: Path, runner_for: RunnerFor, report: Report
) -> None:
    """Submit every allocation of the plan (see the module contract); ``report`` gets one
    dict per allocation as it is accepted or found accepted, in plan order."""
    plan = _plan_for(paths, name, plan_path)
    remote = _remote(plan, runner_for)
    target = plan.document["profile"]["target"]
    try:
        command = remote.submit_command(str(target["log_root"]), str(target["work_root"]))
    except ObservationError as exc:
        raise observation_refused(exc) from None
    allocations = plan.document["allocations"]
    done, width = 0, 1  # the first allocation alone: it opens the connection and proves it
    while done < len(allocations):
        window = allocations[done : done + width]
        done, width = done + len(window), MAX_IN_FLIGHT
        if plan.document["selection"]["retry"]:
            pack = load_pack(paths, name)
            for allocation in window:
                _refresh_retries(pack, plan, allocation, remote)
        decided = _record_intents(paths, name, plan, window)
        answers = _send(name, remote, command, plan, decided.sent)
        receipts = {alloc: a for alloc, a in answers.items() if isinstance(a, SubmitAccepted)}
        _record_receipts(paths, name, receipts)
        for allocation in window:
            alloc = allocation["allocation_id"]
            if alloc in decided.already:
                job, action = decided.already[alloc].job_id, "already"
            elif alloc in receipts:
                job, action = receipts[alloc].scheduler_job_id, "submitted"
            else:
                continue
            report({"allocation_id": alloc, "job_id": job, "action": action})
        unknown = {a: e for a, e in answers.items() if isinstance(e, OutcomeUnknown)}
        if unknown:
            raise _first_unknown(name, unknown)
        if decided.stop is not None:
            raise decided.stop
