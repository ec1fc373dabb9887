"""``vq pack inspect`` and ``vq pack record``: one revision-bound view of a pack's attempts.

Per accepted attempt, in recorded order: one single-job ``squeue``, one
``sacct --duplicates --name=vqp-<alloc>`` from the attempt's window (its intent time less
:data:`WINDOW_SLACK`, for clock skew between this machine and the cluster) and one read of
its slot markers — all on the target host the intent recorded. Any failed command,
overflow or untrustworthy row aborts the whole view (exit 10, or 11 for the transport);
a pack whose file changed while it was observed aborts it too (exit 6).

The view (:class:`PackView`) is transient: nothing is stored. A task's *result* is
``valid`` when the latest accepted attempt holding it wrote exit marker 0 for its slot;
``results_ready`` means the pack is sealed and every task's result is valid;
``quiescent`` means no attempt awaits resolution and every accepted attempt is terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, TypedDict

from vq.dialects.slurm_alloc import ObservationError
from vq.errors import Conflict, ProtocolError
from vq.packing.cases.remote import PackRemote, RunnerFor
from vq.packing.cases.rosters import load_pack, now_utc
from vq.packing.evidence import TERMINAL, AttemptEvidence, attempt_evidence
from vq.packing.planner import SchedulerState, TaskView, View
from vq.packing.roster import Attempt, PackDocument
from vq.paths import StatePaths

__all__ = [
    "WINDOW_SLACK",
    "PackView",
    "inspect_pack",
    "observation_refused",
    "observe_attempt",
    "window_start",
]

WINDOW_SLACK = timedelta(minutes=10)


def window_start(attempt: Attempt) -> str:
    """The earliest submit time accounting may show for this attempt."""
    if attempt.intent is None:
        return "2000-01-01T00:00:00"
    recorded = datetime.strptime(attempt.intent.recorded_at, "%Y-%m-%dT%H:%M:%S")
    return (recorded - WINDOW_SLACK).strftime("%Y-%m-%dT%H:%M:%S")


def observation_refused(exc: ObservationError) -> ProtocolError:
    return ProtocolError(
        f"the scheduler's answer cannot be trusted: {exc}",
        hint="nothing was changed; look at the job with squeue/sacct on the login host",
        reference="pack-observation-refused",
    )


def _remote(runner_for: RunnerFor, attempt: Attempt, cache: dict[str, PackRemote]) -> PackRemote:
    if attempt.intent is None:
        raise Conflict(
            f"allocation {attempt.allocation_id} has no recorded route",
            hint="this attempt cannot be observed by vq; check it by hand",
        )
    host = str(attempt.intent.target["host"])
    if host not in cache:
        cache[host] = PackRemote(runner_for(host))
    return cache[host]


def observe_attempt(remote: PackRemote, attempt: Attempt) -> AttemptEvidence:
    """The scheduler evidence of one accepted attempt (three bounded commands)."""
    assert attempt.job_id is not None and attempt.intent is not None
    alloc = attempt.allocation_id
    try:
        row = remote.queue_row(attempt.job_id, alloc)
        records = remote.accounting(alloc, window_start(attempt))
        work = f"{attempt.intent.target['work_root']}/{alloc}"
        markers = remote.markers(work)
        return attempt_evidence(alloc, attempt.job_id, attempt.task_keys, row, records, markers)
    except ObservationError as exc:
        raise observation_refused(exc) from None


class TaskRow(TypedDict):
    """One task of ``vq pack inspect --json``: its latest attempt's outcome."""

    key: str
    allocation_id: str | None
    state: str | None
    exit_code: int | None
    result: Literal["valid", "missing", "unobserved"]


class AttemptRow(TypedDict):
    """One attempt of ``vq pack inspect --json`` and its scheduler evidence."""

    allocation_id: str
    outcome: str
    how: str | None
    revision: int
    job_id: str | None
    cluster: str | None
    task_keys: list[str]
    state: str | None
    exit_code: str | None
    submit: str | None
    start: str | None
    end: str | None
    incarnations: int
    unattributed_jobs: list[str]


class PackViewJSON(TypedDict):
    """``vq pack inspect --json``."""

    name: str
    revision: int
    sealed: bool
    observed_at: str
    scheduler: str
    results_ready: bool
    quiescent: bool
    attempts: list[AttemptRow]
    tasks: list[TaskRow]


@dataclass(frozen=True)
class PackView:
    """One observation of a pack (see the module contract)."""

    pack: PackDocument
    observed_at: str
    evidence: dict[str, AttemptEvidence]

    def latest(self) -> dict[str, tuple[Attempt, AttemptEvidence | None]]:
        """Per task key: its latest attempt that is accepted or awaits resolution."""
        out: dict[str, tuple[Attempt, AttemptEvidence | None]] = {}
        for attempt in self.pack.attempts:
            if attempt.outcome == "not_submitted":
                continue
            for key in attempt.task_keys:
                out[key] = (attempt, self.evidence.get(attempt.allocation_id))
        return out

    def task_rows(self) -> list[TaskRow]:
        latest = self.latest()
        rows: list[TaskRow] = []
        for task in self.pack.tasks:
            found = latest.get(task.key)
            row: TaskRow = {
                "key": task.key,
                "allocation_id": None,
                "state": None,
                "exit_code": None,
                "result": "missing",
            }
            if found is not None:
                attempt, evidence = found
                row["allocation_id"] = attempt.allocation_id
                if evidence is None:
                    row["state"] = "UNKNOWN"  # acceptance unresolved: it dominates
                else:
                    outcome = evidence.tasks[attempt.task_keys.index(task.key)]
                    row["state"], row["exit_code"] = outcome.state, outcome.exit_code
                    if outcome.state == "SUCCEEDED":
                        row["result"] = "valid"
            rows.append(row)
        return rows

    def planner_view(self) -> View:
        """What the planner needs: results and per-attempt scheduler states."""
        results = {row["key"]: row["result"] for row in self.task_rows()}
        scheduler: dict[str, dict[str, SchedulerState | None]] = {
            task.key: {} for task in self.pack.tasks
        }
        for attempt in self.pack.attempts:
            evidence = self.evidence.get(attempt.allocation_id)
            if evidence is not None:
                for key in attempt.task_keys:
                    scheduler[key][attempt.allocation_id] = evidence.state
        return View(
            revision=self.pack.revision,
            observed_at=self.observed_at,
            tasks={
                task.key: TaskView(task.key, results[task.key], scheduler[task.key])
                for task in self.pack.tasks
            },
        )

    def as_dict(self) -> PackViewJSON:
        tasks = self.task_rows()
        attempts: list[AttemptRow] = []
        for attempt in self.pack.attempts:
            evidence = self.evidence.get(attempt.allocation_id)
            attempts.append(
                {
                    "allocation_id": attempt.allocation_id,
                    "outcome": attempt.outcome,
                    "how": attempt.how,
                    "revision": attempt.revision,
                    "job_id": attempt.job_id,
                    "cluster": attempt.cluster,
                    "task_keys": list(attempt.task_keys),
                    "state": evidence.state if evidence else None,
                    "exit_code": evidence.exit_code if evidence else None,
                    "submit": evidence.submit if evidence else None,
                    "start": evidence.start if evidence else None,
                    "end": evidence.end if evidence else None,
                    "incarnations": evidence.incarnations if evidence else 0,
                    "unattributed_jobs": list(evidence.unattributed) if evidence else [],
                }
            )
        unresolved = any(a.outcome == "intent" for a in self.pack.attempts)
        return {
            "name": self.pack.name,
            "revision": self.pack.revision,
            "sealed": self.pack.sealed,
            "observed_at": self.observed_at,
            "scheduler": "observed",
            "results_ready": self.pack.sealed and all(t["result"] == "valid" for t in tasks),
            "quiescent": not unresolved
            and all(e.state in TERMINAL for e in self.evidence.values()),
            "attempts": attempts,
            "tasks": tasks,
        }


def inspect_pack(
    paths: StatePaths, name: str, runner_for: RunnerFor, clock: Callable[[], str] = now_utc
) -> PackView:
    """Observe every accepted attempt; a pack that changed meanwhile aborts the view."""
    pack = load_pack(paths, name)
    observed_at = clock()
    remotes: dict[str, PackRemote] = {}
    evidence = {
        attempt.allocation_id: observe_attempt(_remote(runner_for, attempt, remotes), attempt)
        for attempt in pack.attempts
        if attempt.outcome == "accepted"
    }
    again = load_pack(paths, name)
    if again.to_bytes() != pack.to_bytes():
        raise Conflict(
            f"pack {name!r} changed while it was being inspected",
            hint="inspect it again",
            reference="pack-view-stale",
        )
    return PackView(pack, observed_at, evidence)
