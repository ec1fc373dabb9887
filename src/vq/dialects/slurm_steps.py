"""Step-level control of a packed allocation (pure, the Slurm dialect's): find a slot's
step, cancel it.

Slurm numbers the steps of an allocation in launch order, and the slots' background
``srun`` calls start in any order, so a slot's step id is found by its name
(``vqp-<alloc>-<slot>``) in the live step list, never computed from the slot number:

* :func:`squeue_steps_argv` / :func:`parse_squeue_steps`: ``squeue --steps`` of one job,
  ``JOBID.STEP|NAME`` rows; the answer maps each *running* slot to its step id. Rows of
  another job, or two steps for one slot, abort (:class:`ObservationError`); the batch
  and extern steps and unrelated names are ignored. No rows: nothing runs (the job is
  queued, ended or unknown).
* :func:`scancel_argv` / :func:`parse_scancel`: ``scancel JOBID`` (the whole allocation)
  or ``scancel JOBID.STEP`` (one slot). ``sent`` when scancel exited 0, ``gone`` when
  Slurm said the step or job is unknown or already ending; anything else aborts. 22.05
  exits 0 for a whole job that already ended (or never existed), so ``sent`` is a request
  taken, not proof: the caller confirms the end by observation.

Every command runs under :func:`~vq.dialects.slurm_alloc.bounded`.
"""

from __future__ import annotations

import re
from typing import Literal

from vq.dialects.slurm_alloc import ObservationError, bounded, job_name

__all__ = ["parse_scancel", "parse_squeue_steps", "scancel_argv", "squeue_steps_argv"]

_JOB_ID = re.compile(r"[0-9]{1,12}")
_STEP_ID = re.compile(r"[0-9]{1,12}\.[0-9]{1,9}")
_MAX_ROWS = 512


def squeue_steps_argv(job_id: str) -> list[str]:
    if not _JOB_ID.fullmatch(job_id):
        raise ObservationError(f"{job_id!r} is not a job id")
    return bounded(["squeue", "--noheader", "--steps", f"--jobs={job_id}", "--format=%i|%j"])


def parse_squeue_steps(rc: int, stdout: str, job_id: str, allocation_id: str) -> dict[int, str]:
    """Each running slot of ``allocation_id`` (job ``job_id``) → its step id."""
    if rc != 0:
        raise ObservationError(f"squeue --steps failed (exit status {rc})")
    rows = [row for row in stdout.split("\n") if row]
    if len(rows) > _MAX_ROWS:
        raise ObservationError(f"squeue --steps: more than {_MAX_ROWS} rows")
    prefix = f"{job_name(allocation_id)}-"
    slots: dict[int, str] = {}
    for row in rows:
        step, sep, name = row.partition("|")
        if not sep or step.partition(".")[0] != job_id:
            raise ObservationError(f"squeue --steps: a row not of job {job_id}")
        slot = name.removeprefix(prefix)
        if slot == name or not slot.isdigit() or len(slot) > 6:
            continue  # the batch or extern step, or a step vq did not start
        if not _STEP_ID.fullmatch(step):
            raise ObservationError("squeue --steps: a malformed step id")
        if int(slot) in slots:
            raise ObservationError(f"squeue --steps: two steps for slot {slot}")
        slots[int(slot)] = step
    return slots


def scancel_argv(job_id: str, step_id: str | None = None) -> list[str]:
    """``scancel`` of the whole allocation, or of one step (``JOBID.STEP``) of it."""
    if not _JOB_ID.fullmatch(job_id):
        raise ObservationError(f"{job_id!r} is not a job id")
    if step_id is None:
        return bounded(["scancel", job_id])
    if not _STEP_ID.fullmatch(step_id) or step_id.partition(".")[0] != job_id:
        raise ObservationError(f"{step_id!r} is not a step of job {job_id}")
    return bounded(["scancel", step_id])


def parse_scancel(rc: int, stderr: str) -> Literal["sent", "gone"]:
    if rc == 0:
        return "sent"
    if "Invalid job id specified" in stderr or "Job/step already completing" in stderr:
        return "gone"
    raise ObservationError(f"scancel failed (exit status {rc})")
