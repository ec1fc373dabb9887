"""``vq pack validate`` and ``vq pack submit``: a reviewed plan, sent to Slurm durably.

Validate makes one ``sbatch --test-only`` per distinct allocation shape
(``shape_sha256``) and changes nothing.

Submit, per allocation of the plan, in order:

1. under the pack lock, reread ``pack.json``: the plan must still be current (same
   revision), the allocation must not be recorded already, and no attempt recorded since
   the plan may hold one of its tasks (eligibility changed: stop, exit 6). An allocation
   already accepted is reported and skipped, so a plan submitted twice never makes a
   second allocation; one still awaiting its receipt stops the run (exit 12);
2. for a retried task, its earlier accepted attempts are observed again: an active one,
   or an unknown one without ``--allow-duplicate-risk``, stops the run (exit 6);
3. record the intent (route, resources, totals, the exact ``sbatch`` command, digests),
   synced, before ``sbatch`` is run;
4. ``sbatch --parsable`` with the script on stdin;
5. record the receipt (job id, cluster). No receipt — a transport failure, a timeout, a
   non-zero status, an unparsable answer — leaves the intent unresolved and stops the run
   (:class:`~vq.errors.OutcomeUnknown`, exit 12): it is never retried blindly.
   ``vq pack reconcile`` adopts the job from accounting, or ``vq pack resolve`` records an
   operator's word.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from vq.errors import Conflict, InvalidInput, OutcomeUnknown, TransportError
from vq.packing.evidence import ACTIVE, TERMINAL
from vq.packing.roster import Attempt, AttemptIntent, PackDocument
from vq.packing.slurm_text import ObservationError, SbatchRefused, parse_parsable, submit_argv
from vq.paths import StatePaths
from vq.services.pack_inspect import observation_refused, observe_attempt
from vq.services.pack_plan import LoadedPlan, load_plan
from vq.services.pack_remote import PackRemote, RunnerFor
from vq.services.pack_roster import load_pack, now_utc, update_pack

__all__ = ["submit_plan", "validate_plan"]

Report = Callable[[dict[str, Any]], None]


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
) -> list[dict[str, Any]]:
    """One ``sbatch --test-only`` per distinct shape; the controller's answers."""
    plan = _plan_for(paths, name, plan_path)
    remote = _remote(plan, runner_for)
    answers: list[dict[str, Any]] = []
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


def _intent(plan: LoadedPlan, allocation: dict[str, Any]) -> AttemptIntent:
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
    pack: PackDocument, plan: LoadedPlan, allocation: dict[str, Any], remote: PackRemote
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


def _record_intent(
    paths: StatePaths, name: str, plan: LoadedPlan, allocation: dict[str, Any]
) -> Attempt | None:
    """Record the intent and return None; or the attempt, when it was accepted before."""
    alloc = allocation["allocation_id"]
    base = int(plan.document["attempts"])
    found: list[Attempt] = []

    def change(pack: PackDocument) -> PackDocument | None:
        if pack.revision != plan.document["revision"]:
            raise Conflict(
                f"pack {name!r} moved to revision {pack.revision} while this plan "
                f"(revision {plan.document['revision']}) was being submitted",
                hint="inspect the pack and make a new plan for the tasks not yet submitted",
                reference="pack-plan-stale",
            )
        for attempt in pack.attempts:
            if attempt.allocation_id == alloc:
                found.append(attempt)
                return None
        keys = set(allocation["task_keys"])
        for attempt in pack.attempts[base:]:
            if keys & set(attempt.task_keys):
                raise Conflict(
                    f"allocation {attempt.allocation_id}, recorded after this plan was made, "
                    f"holds task {sorted(keys & set(attempt.task_keys))[0]}",
                    hint="inspect the pack and make a new plan",
                    reference="pack-eligibility-changed",
                )
        attempt = Attempt(
            allocation_id=alloc,
            task_keys=list(allocation["task_keys"]),
            outcome="intent",
            revision=pack.revision,
            intent=_intent(plan, allocation),
        )
        return pack.model_copy(update={"attempts": [*pack.attempts, attempt]})

    update_pack(paths, name, change)
    if not found:
        return None
    existing = found[0]
    if existing.outcome == "intent":
        raise _ambiguous(name, alloc, "an earlier submission recorded its intent but no receipt")
    if existing.outcome == "not_submitted":
        raise Conflict(
            f"allocation {alloc} was resolved as not submitted",
            hint=f"make a new plan: `vq pack plan {name} --output NEW.json`",
            reference="pack-plan-stale",
        )
    return existing


def _ambiguous(name: str, alloc: str, why: str) -> OutcomeUnknown:
    return OutcomeUnknown(
        f"allocation {alloc}: {why}; whether Slurm accepted it is unknown, so submission stops",
        hint=f"`vq pack reconcile {name} {alloc}` adopts it from accounting; if it is not "
        f"there, `vq pack resolve {name} {alloc} --not-submitted`",
        reference="pack-acceptance-unknown",
    )


def _record_receipt(
    paths: StatePaths, name: str, alloc: str, job_id: str, cluster: str | None
) -> Attempt:
    def change(pack: PackDocument) -> PackDocument:
        attempts = list(pack.attempts)
        index = next(i for i, a in enumerate(attempts) if a.allocation_id == alloc)
        attempts[index] = attempts[index].model_copy(
            update={
                "outcome": "accepted",
                "job_id": job_id,
                "cluster": cluster,
                "revision": pack.revision,
                "how": "sbatch",
                "decided_at": now_utc(),
            }
        )
        return pack.model_copy(update={"attempts": attempts})

    pack = update_pack(paths, name, change)
    return next(a for a in pack.attempts if a.allocation_id == alloc)


def submit_plan(
    paths: StatePaths, name: str, plan_path: Path, runner_for: RunnerFor, report: Report
) -> None:
    """Submit every allocation of the plan (see the module contract); ``report`` gets one
    dict per allocation as it is accepted or found accepted."""
    plan = _plan_for(paths, name, plan_path)
    remote = _remote(plan, runner_for)
    target = plan.document["profile"]["target"]
    try:
        command = remote.submit_command(str(target["log_root"]), str(target["work_root"]))
    except ObservationError as exc:
        raise observation_refused(exc) from None
    for allocation in plan.document["allocations"]:
        alloc = allocation["allocation_id"]
        _refresh_retries(load_pack(paths, name), plan, allocation, remote)
        existing = _record_intent(paths, name, plan, allocation)
        if existing is not None:
            report({"allocation_id": alloc, "job_id": existing.job_id, "action": "already"})
            continue
        try:
            result = remote.submit(command, plan.scripts[alloc])
        except TransportError as exc:
            raise _ambiguous(name, alloc, f"sbatch did not answer ({exc.message})") from None
        if result.rc != 0:
            last = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            raise _ambiguous(
                name, alloc, f"sbatch exited {result.rc} without a receipt ({last[0][:200]})"
            )
        try:
            receipt = parse_parsable(result.stdout.decode("utf-8", "replace"))
        except ObservationError as exc:
            raise _ambiguous(name, alloc, str(exc)) from None
        accepted = _record_receipt(paths, name, alloc, receipt.job_id, receipt.cluster)
        report({"allocation_id": alloc, "job_id": accepted.job_id, "action": "submitted"})
