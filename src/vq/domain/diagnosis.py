"""The ``_vq/terminal-diagnosis.json`` sidecar of a fetched tree (§4.6). Pure: no I/O.

The document (``vq.terminal-diagnosis.v1``) carries the JobSpec outcome, its failure
fields and scheduler metadata, plus a structured ``diagnosis``:

* ``category``: ``completed``, ``nonzero_exit``, ``signal`` (exit code 128+N),
  ``oom``, ``time_limit``, ``starved``, ``killed``, ``aborted`` (ABORTED_BY_QUEUE and the
  legacy INTERRUPTED), ``unknown`` (FAILED without an exit code), or for a snapshot of a
  live job ``running`` (RUNNING, SUSPENDED) and ``pending``;
* ``summary``: one human line, ``"<STATE>: <what happened>"``;
* ``signal``: the decoded portable signal name (``SIGKILL``) or null;
* ``hint``: the last non-blank line of ``failure_tail`` or null.

This is fetch metadata, not a crash report: it is derived from the spec alone.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from vq.domain.lifecycle import signal_name
from vq.domain.spec import JobSpec
from vq.domain.states import JobState

__all__ = ["DIAGNOSIS_SCHEMA", "diagnose", "terminal_diagnosis"]

DIAGNOSIS_SCHEMA = "vq.terminal-diagnosis.v1"


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


_FIXED = {
    JobState.PENDING: ("pending", "waiting to run"),
    JobState.KILLED: ("killed", "killed"),
    JobState.OOM_KILLED: ("oom", "killed for exceeding its memory limit"),
    JobState.TIME_EXCEEDED: ("time_limit", "killed at its wall-time limit"),
    JobState.STARVED: ("starved", "starved"),
    JobState.FAILED: ("unknown", "failed; the exit code is unknown"),
}


def _outcome(spec: JobSpec) -> tuple[str, str]:
    code = spec.exit_code
    if spec.state is JobState.RUNNING:
        return "running", f"running since {_iso(spec.started_at)}"
    if spec.state is JobState.SUSPENDED:
        return "running", f"suspended (paused) since {_iso(spec.paused_at)}"
    if spec.state is JobState.COMPLETED:
        return "completed", f"completed with exit code {code or 0}"
    if spec.state is JobState.FAILED and code is not None:
        if 128 < code < 160:
            return "signal", f"killed by {signal_name(code - 128)} (exit code {code})"
        return "nonzero_exit", f"exited with code {code}"
    category, default = _FIXED.get(spec.state, ("aborted", "aborted; the outcome is unknown"))
    return category, spec.failure_reason or default


class Diagnosis(TypedDict):
    """Why a job ended as it did, in one line and a category."""

    category: str
    summary: str
    signal: str | None
    hint: str | None


class TerminalDiagnosis(TypedDict):
    """A ``vq.terminal-diagnosis.v1`` document (``_vq/terminal-diagnosis.json``)."""

    schema: str
    job_id: str
    job_name: str | None
    state: str
    exit_code: int | None
    failure_reason: str | None
    failure_tail: str | None
    scheduler_state: str | None
    scheduler_target: str | None
    scheduler_job_id: str | None
    submitted_at: str | None
    started_at: str | None
    finished_at: str | None
    diagnosis: Diagnosis


def diagnose(spec: JobSpec) -> Diagnosis:
    """The structured diagnosis: ``category``, a one-line ``summary``, the decoded
    ``signal`` (or null) and ``hint``, the last non-blank line of ``failure_tail``."""
    category, text = _outcome(spec)
    code = spec.exit_code
    tail = [line.strip() for line in (spec.failure_tail or "").splitlines() if line.strip()]
    return {
        "category": category,
        "summary": f"{spec.state.value}: {text}",
        "signal": signal_name(code - 128) if code is not None and 128 < code < 160 else None,
        "hint": tail[-1] if tail else None,
    }


def terminal_diagnosis(spec: JobSpec) -> TerminalDiagnosis:
    """The ``vq.terminal-diagnosis.v1`` document of ``spec``."""
    return {
        "schema": DIAGNOSIS_SCHEMA,
        "job_id": spec.id,
        "job_name": spec.job_name,
        "state": spec.state.value,
        "exit_code": spec.exit_code,
        "failure_reason": spec.failure_reason,
        "failure_tail": spec.failure_tail,
        "scheduler_state": spec.scheduler_state,
        "scheduler_target": spec.scheduler_target,
        "scheduler_job_id": spec.scheduler_job_id,
        "submitted_at": _iso(spec.submitted_at),
        "started_at": _iso(spec.started_at),
        "finished_at": _iso(spec.finished_at),
        "diagnosis": diagnose(spec),
    }
