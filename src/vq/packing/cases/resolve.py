"""Settling an attempt whose acceptance is unknown, and reading what an attempt left.

* :func:`reconcile_attempt` (``vq pack reconcile NAME ALLOC``): one bounded ``sacct`` on the
  intent's target, then one single-job ``squeue`` per job it names; a job still queued or
  running under another comment is someone else's and is dropped. Exactly one remaining
  job of the allocation's identity in its window is adopted as the receipt. None (exit 3)
  or several (exit 10) adopt nothing. Where accounting stores no comments, an ended
  same-name job cannot be told apart: it counts, so two of them adopt nothing.
* :func:`resolve_attempt` (``vq pack resolve``): an operator's word — accepted as job N
  (on cluster C), or not submitted. Only an attempt still awaiting its receipt can be
  resolved; an attempt is never both accepted and not submitted (exit 6).
* :func:`read_log` (``vq pack log``): the last N bytes (1 B–1 MiB) of an accepted
  attempt's allocation log or one task's slot log, one bounded ``tail -c N+1`` over SSH,
  outside the pack lock; never stored.
* :func:`record_bytes` (``vq pack record``): the redacted operational record of one view.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TypedDict

from vq.dialects.slurm_alloc import ObservationError
from vq.errors import Conflict, InvalidInput, NotFound
from vq.packing.cases.inspection import PackView, observation_refused, window_start
from vq.packing.cases.remote import MAX_LOG_BYTES, PackRemote, RunnerFor
from vq.packing.cases.rosters import load_pack, now_utc, update_pack
from vq.packing.planner import digest
from vq.packing.roster import Attempt, PackDocument, roster_digest
from vq.paths import StatePaths

__all__ = [
    "RECORD_SCHEMA",
    "LogSnapshot",
    "read_log",
    "reconcile_attempt",
    "record_bytes",
    "resolve_attempt",
]

RECORD_SCHEMA = "vq.pack-record/1"


def _attempt(pack: PackDocument, alloc: str) -> Attempt:
    for attempt in pack.attempts:
        if attempt.allocation_id == alloc:
            return attempt
    raise NotFound(
        f"pack {pack.name!r} has no allocation {alloc!r}",
        hint=f"`vq pack show {pack.name}` lists its attempts",
    )


def _must_be_unresolved(name: str, attempt: Attempt) -> None:
    if attempt.outcome == "accepted":
        raise Conflict(
            f"allocation {attempt.allocation_id} is already accepted as job {attempt.job_id}",
            hint="an attempt is never both accepted and not submitted",
            reference="pack-attempt-settled",
        )
    if attempt.outcome == "not_submitted":
        raise Conflict(
            f"allocation {attempt.allocation_id} is already resolved as not submitted",
            hint="an attempt is never both accepted and not submitted",
            reference="pack-attempt-settled",
        )


def _settle(
    paths: StatePaths,
    name: str,
    alloc: str,
    *,
    outcome: str,
    how: str,
    job_id: str | None = None,
    cluster: str | None = None,
) -> Attempt:
    def change(pack: PackDocument) -> PackDocument:
        attempts = list(pack.attempts)
        attempt = _attempt(pack, alloc)
        _must_be_unresolved(name, attempt)
        index = attempts.index(attempt)
        attempts[index] = attempt.model_copy(
            update={
                "outcome": outcome,
                "job_id": job_id,
                "cluster": cluster,
                "revision": pack.revision,
                "how": how,
                "decided_at": now_utc(),
            }
        )
        return pack.model_copy(update={"attempts": attempts})

    return _attempt(update_pack(paths, name, change), alloc)


def reconcile_attempt(paths: StatePaths, name: str, alloc: str, runner_for: RunnerFor) -> Attempt:
    """Adopt the one job of this allocation's identity from accounting (see module)."""
    attempt = _attempt(load_pack(paths, name), alloc)
    _must_be_unresolved(name, attempt)
    if attempt.intent is None:
        raise Conflict(f"allocation {alloc} has no recorded route", hint="resolve it by hand")
    remote = PackRemote(runner_for(str(attempt.intent.target["host"])))
    since = window_start(attempt)
    try:
        jobs = remote.allocation_jobs(alloc, since)
    except ObservationError as exc:
        raise observation_refused(exc) from None
    if len(jobs) > 1:
        raise observation_refused(
            ObservationError(f"accounting holds {len(jobs)} jobs of allocation {alloc}")
        )
    if not jobs:
        raise NotFound(
            f"accounting has no job of allocation {alloc} (name vqp-{alloc}) since {since}",
            hint=f"if it was never submitted: `vq pack resolve {name} {alloc} --not-submitted`; "
            "if accounting lags, reconcile again shortly",
        )
    return _settle(paths, name, alloc, outcome="accepted", how="reconcile", job_id=jobs[0])


def resolve_attempt(
    paths: StatePaths,
    name: str,
    alloc: str,
    *,
    job_id: str | None,
    cluster: str | None,
    not_submitted: bool,
) -> Attempt:
    if (job_id is None) == (not not_submitted):
        raise InvalidInput(
            "give exactly one of --job-id N and --not-submitted",
            hint=f"`vq pack resolve {name} {alloc} --job-id 1234` or `... --not-submitted`",
        )
    if cluster is not None and job_id is None:
        raise InvalidInput("--cluster goes with --job-id", hint="drop --cluster")
    if job_id is not None and not (job_id.isascii() and job_id.isdigit() and len(job_id) <= 12):
        raise InvalidInput(
            f"{job_id!r} is not a Slurm job id", hint="give the number sbatch printed"
        )
    if cluster is not None and not (
        0 < len(cluster) <= 64 and all(c.isascii() and (c.isalnum() or c in "._-") for c in cluster)
    ):
        raise InvalidInput(f"{cluster!r} is not a cluster name", hint="letters, digits, '._-'")
    if not_submitted:
        return _settle(paths, name, alloc, outcome="not_submitted", how="resolve")
    return _settle(
        paths, name, alloc, outcome="accepted", how="resolve", job_id=job_id, cluster=cluster
    )


@dataclass(frozen=True)
class LogSnapshot:
    allocation_id: str
    task: str | None
    path: str
    data: bytes
    truncated: bool


def read_log(
    paths: StatePaths,
    name: str,
    alloc: str,
    *,
    task: str | None,
    max_bytes: int,
    runner_for: RunnerFor,
) -> LogSnapshot:
    if not 1 <= max_bytes <= MAX_LOG_BYTES:
        raise InvalidInput(
            f"--bytes {max_bytes} is out of range", hint=f"give 1 to {MAX_LOG_BYTES} bytes"
        )
    attempt = _attempt(load_pack(paths, name), alloc)
    if attempt.outcome != "accepted" or attempt.intent is None or attempt.job_id is None:
        raise Conflict(
            f"allocation {alloc} has no accepted job, so it has no log",
            hint=f"`vq pack inspect {name}` shows its outcome",
        )
    log_root = str(attempt.intent.target["log_root"])
    path = f"{log_root}/{alloc}-{attempt.job_id}.out"
    if task is not None:
        if task not in attempt.task_keys:
            raise NotFound(
                f"task {task!r} is not in allocation {alloc}",
                hint=f"its tasks: {', '.join(attempt.task_keys[:8])}",
            )
        path = f"{log_root}/{alloc}-{attempt.job_id}-{attempt.task_keys.index(task)}.out"
    remote = PackRemote(runner_for(str(attempt.intent.target["host"])))
    try:
        data = remote.tail(path, max_bytes + 1)
    except ObservationError as exc:
        raise observation_refused(exc) from None
    if data is None:
        raise NotFound(
            f"the log {path} does not exist (yet)",
            hint="a queued allocation has no log; a purged one has none left",
        )
    truncated = len(data) > max_bytes
    return LogSnapshot(alloc, task, path, data[-max_bytes:] if truncated else data, truncated)


def _attempt_digest(pack: PackDocument, attempt: Attempt) -> str | None:
    intent = attempt.intent
    if intent is None:
        return None
    return digest(
        {
            "allocation_id": attempt.allocation_id,
            "pack_revision": pack.revision,
            "profile": intent.profile,
            "task_keys": attempt.task_keys,
            "retry_sha256": digest([intent.retry, intent.allow_duplicate_risk]),
            "target_sha256": intent.target_sha256,
            "resources_sha256": intent.resources_sha256,
            "shape": [intent.cpus, intent.memory_mib, intent.gpus, intent.time],
            "plan_sha256": intent.plan_sha256,
            "script_sha256": intent.script_sha256,
        }
    )


class AttemptShape(TypedDict):
    tasks: int
    cpus: int
    memory_mib: int
    gpus: int
    time: str


class RedactedAttempt(TypedDict):
    """One attempt of the redacted pack record: digests and outcomes, no values."""

    allocation_id: str
    profile: str | None
    task_keys: list[str]
    retry: list[str]
    allow_duplicate_risk: list[str]
    retry_sha256: str | None
    target_sha256: str | None
    resources_sha256: str | None
    shape: AttemptShape | None
    attempt_sha256: str | None
    plan_sha256: str | None
    script_sha256: str | None
    outcome: str
    how: str | None
    revision: int
    job_id: str | None
    cluster: str | None
    state: str | None
    exit_code: str | None
    start: str | None
    end: str | None


def record_bytes(view: PackView) -> bytes:
    """Canonical JSON of the redacted record: no arguments, stdin, scripts, target values,
    sbatch arguments, raw scheduler states or logs."""
    pack = view.pack
    attempts: list[RedactedAttempt] = []
    for attempt in pack.attempts:
        intent = attempt.intent
        evidence = view.evidence.get(attempt.allocation_id)
        attempts.append(
            {
                "allocation_id": attempt.allocation_id,
                "profile": intent.profile if intent else None,
                "task_keys": attempt.task_keys,
                "retry": intent.retry if intent else [],
                "allow_duplicate_risk": intent.allow_duplicate_risk if intent else [],
                "retry_sha256": digest([intent.retry, intent.allow_duplicate_risk])
                if intent
                else None,
                "target_sha256": intent.target_sha256 if intent else None,
                "resources_sha256": intent.resources_sha256 if intent else None,
                "shape": {
                    "tasks": len(attempt.task_keys),
                    "cpus": intent.cpus,
                    "memory_mib": intent.memory_mib,
                    "gpus": intent.gpus,
                    "time": intent.time,
                }
                if intent
                else None,
                "attempt_sha256": _attempt_digest(pack, attempt),
                "plan_sha256": intent.plan_sha256 if intent else None,
                "script_sha256": intent.script_sha256 if intent else None,
                "outcome": attempt.outcome,
                "how": attempt.how,
                "revision": attempt.revision,
                "job_id": attempt.job_id,
                "cluster": attempt.cluster,
                "state": evidence.state if evidence else None,
                "exit_code": evidence.exit_code if evidence else None,
                "start": evidence.start if evidence else None,
                "end": evidence.end if evidence else None,
            }
        )
    record = {
        "schema": RECORD_SCHEMA,
        "observed_at": view.observed_at,
        "scheduler": "observed",
        "pack": pack.name,
        "pack_id": pack.pack_id,
        "revision": pack.revision,
        "sealed": pack.sealed,
        "roster_sha256": roster_digest(pack.roster()),
        "task_keys": [task.key for task in pack.tasks],
        "attempts": attempts,
    }
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return text.encode() + b"\n"
