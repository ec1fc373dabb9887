"""Single-job submission on a scheduler lane (a part of :class:`~.lane.SchedulerLane`;
every method runs on the daemon loop, every cluster call on the lane's worker; the lane's
state is its :class:`~.lane_jobs.LaneJobs`).

* **intent**: a runtime pin made for another target or a named Python payload with no
  launcher fails the job (:mod:`.outcome`); the batch script is rendered (a render error fails
  the job: FAILED, ``failure_reason``), then ``_vq/scheduler-intent.json`` (nonce, tag,
  script sha256) is written and fsynced and ``scheduler_state = "submitting"`` recorded,
  before anything reaches the cluster;
* **stage and submit** in one SSH call under the attempt's submit guard
  (:mod:`vq.dialects.submit_guard`, its records directory named in the intent): the
  workspace plus the script unpacked (tar, idempotent), then ``sbatch --parsable`` /
  ``qsub``, which runs at most once per attempt however often and by whomever the guard
  is called; the id is persisted with ``queued`` (:meth:`Submission.adopt`);
* a staging failure the remote side reports or the scheduler's refusal fails the job; a
  controller the submit command could not reach (slurmctld down) is retried with backoff
  (``submit_retry``, superseding exactly that call); an earlier call still in flight
  (``busy``) is waited for; an ambiguous answer never resubmits blindly: the guard's
  records, then the job's tag decide (:mod:`.recovery`);
* an operator's decision for a job in doubt (:meth:`Submission.resolve_single`).

Packed array elements never take this path (:mod:`.packed`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
from pathlib import Path
from typing import Any

from vq import _fault_points
from vq._safe_open import atomic_write_beneath, open_beneath, read_regular_beneath
from vq.dialects import SubmitAccepted, UnsafeSchedulerValue
from vq.dialects.submit_guard import GuardState, records_dir
from vq.domain.spec import JobSpec
from vq.errors import Conflict, InvalidInput, TransportError
from vq.protocol.answers import SchedulerResolveAnswer

from .control import Control
from .forwarded import UnreadableEnvironment, forwarded_variables
from .jobs import LaneJob, not_started, submit_verdict
from .lane_jobs import LaneJobs
from .outcome import (
    SHEBANG_LIMIT,
    launcher_refusal,
    pin_refusal,
    script_request,
    staged_script_path,
    unreached_retry,
)
from .remote import LaneRemote, stage_archive
from .worker import Worker

__all__ = ["INTENT_NAME", "Submission"]

log = logging.getLogger(__name__)

#: The driver-side intent record, next to the spec's other files in ``_vq/``.
INTENT_NAME = "scheduler-intent.json"


class Submission:
    """Intent, stage and submit one job (see the module docstring)."""

    def __init__(
        self, jobs: LaneJobs, remote: LaneRemote, worker: Worker, control: Control
    ) -> None:
        self._jobs = jobs
        self._remote = remote
        self._worker = worker
        self._control = control
        self._basis = jobs.basis

    # --- intent, then stage and submit in one call ------------------------------------------
    def stage(self, job: LaneJob, spec: JobSpec) -> None:
        """A fresh attempt: a new nonce, the intent made durable, then stage + submit."""
        self._jobs.guard.assert_on_loop()
        if spec.is_terminal:  # killed before anything was submitted
            self._jobs.drop(job)
            return
        job.nonce = secrets.token_hex(8)
        script = self._render(job, spec)
        if script is None:
            return
        if job.records is None:
            job.records = self._records_of(job, spec)
        self._write_intent(job, script)
        _fault_points.crash_point("after_intent")
        self._send(job, script)

    def _records_of(self, job: LaneJob, spec: JobSpec) -> str:
        """The submit guard's records directory of this attempt (its claim's token)."""
        attempt = spec.launch_attempt or job.nonce or secrets.token_hex(8)
        return records_dir(self._basis.settings.scratch_root, f"{job.job_id}.{attempt}")

    def _render(self, job: LaneJob, spec: JobSpec) -> str | None:
        """The batch script for ``job.nonce``; a named Python payload with no launcher or a
        render error fails the job (None)."""
        refusal = pin_refusal(spec, self._basis.settings) or launcher_refusal(
            spec, self._basis.settings, self._script_head(job.job_id, spec)
        )
        if refusal is not None:
            self._jobs.fail(job, refusal)
            return None
        try:
            forwarded = forwarded_variables(self._basis.ctx.paths, job.job_id)
        except UnreadableEnvironment as exc:
            self._jobs.fail(job, f"the batch script could not be rendered: {exc}")
            return None
        try:
            return self._remote.dialect.render_script(
                script_request(spec, self._basis.settings, job.nonce or "", forwarded)
            )
        except (UnsafeSchedulerValue, ValueError) as exc:
            self._jobs.fail(job, f"the batch script could not be rendered: {exc}")
            return None

    def _script_head(self, job_id: str, spec: JobSpec) -> bytes | None:
        """The first :data:`SHEBANG_LIMIT` bytes of the staged file the command starts
        with, when it is a regular file in the job's workspace (opened below the job's
        tree without following a link, never a FIFO or device); None otherwise."""
        if spec.program is None:
            return None
        relative = staged_script_path(spec.command)
        if relative is None:
            return None
        tree = self._basis.ctx.paths.tree_of(job_id)
        try:
            fd = open_beneath(tree, self._basis.ctx.paths.workspace(job_id) / relative, os.O_RDONLY)
        except OSError:  # missing, a link, a FIFO, a directory: no staged script
            return None
        try:
            return os.read(fd, SHEBANG_LIMIT)
        except OSError:
            return None
        finally:
            os.close(fd)

    def _write_intent(self, job: LaneJob, script: str) -> None:
        job.submitted_at = self._basis.ctx.now()
        intent = {
            "lane": self._basis.name,
            "nonce": job.nonce,
            "tag": f"vq-{job.job_id}",
            "script_sha256": hashlib.sha256(script.encode()).hexdigest(),
            "written_at": job.submitted_at.isoformat(),
            "submit_records": job.records,
        }
        path = self.intent_path(job.job_id)
        # Below the job's tree, whose owner may plant links (multi-user): never followed.
        tree = self._basis.ctx.paths.tree_of(job.job_id)
        atomic_write_beneath(tree, path, json.dumps(intent).encode(), parents=True)
        job.phase = "submitting"
        # The fsynced intent is the durable record recovery reads (either it or this
        # state sends a job to the lookup by tag), so this write needs no second fsync.
        self._jobs.record(job, {"scheduler_state": "submitting"}, durable=False)

    def resolve_single(self, job_id: str, scheduler_job_id: str | None) -> SchedulerResolveAnswer:
        """An operator's decision for a job whose submission is in doubt (on the loop):
        ``scheduler_job_id`` is its scheduler job (adopted), None means it was never
        submitted (it is submitted now, under the same tag)."""
        self._jobs.guard.assert_on_loop()
        job = self._jobs.get(job_id)
        if job is None or job.scheduler_job_id is not None or job.busy:
            raise Conflict(
                f"job {job_id} is not waiting for a decision on lane {self._basis.name}",
                hint="only a job in scheduler_state reattach_failed or submitting can be "
                "resolved; `vq status ID` shows its state",
            )
        if scheduler_job_id is not None:
            if not re.fullmatch(r"[0-9]+(?:_[0-9]+)?(?:\.[A-Za-z0-9.-]+)?", scheduler_job_id):
                raise InvalidInput(
                    f"{scheduler_job_id!r} is not a scheduler job id",
                    hint="give the number sbatch/qsub printed, e.g. --job-id 1234",
                )
            self.adopt(job, scheduler_job_id)
        else:
            job.phase = "submitting"
            self._jobs.record(job, {"scheduler_state": "submitting"})
            self.submit(job, supersede=job.in_doubt)
        return {"id": job_id, "scheduler_job_id": scheduler_job_id, "lane": self._basis.name}

    def forget_attempt(self, job_id: str) -> None:
        """Before a retry is claimed: drop the previous attempt's intent and id, so
        recovery never takes the old scheduler job for the new attempt."""
        self._jobs.guard.assert_on_loop()
        self.intent_path(job_id).unlink(missing_ok=True)
        fields = {"scheduler_job_id": None, "scheduler_state": None}
        self._basis.lifecycle.record_scheduler(job_id, fields)

    def intent_path(self, job_id: str) -> Path:
        return self._basis.ctx.paths.meta_dir(job_id) / INTENT_NAME

    def read_intent(self, job_id: str) -> dict[str, Any] | None:
        try:
            tree = self._basis.ctx.paths.tree_of(job_id)
            data = json.loads(read_regular_beneath(tree, self.intent_path(job_id), 4096))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def submit(self, job: LaneJob, supersede: str | None = None) -> None:
        """Submit a ``submitting`` job again under its intent's tag and nonce (the guard
        holds no submission of this attempt, the call ``supersede`` was proved never
        submitted, the controller was unreachable, or an operator said so): stage +
        submit anew, under the same guard."""
        self._jobs.guard.assert_on_loop()
        spec = self._basis.ctx.store.read(job.job_id)
        if spec.is_terminal:
            self._jobs.drop(job)
            return
        if job.nonce is None:
            job.nonce = secrets.token_hex(8)
        script = self._render(job, spec)
        if script is None:
            return
        if job.records is None:  # an intent from before the guard: guarded from now on
            job.records = self._records_of(job, spec)
            self._write_intent(job, script)
        elif job.phase != "submitting":
            job.phase = "submitting"
            self._jobs.record(job, {"scheduler_state": "submitting"}, durable=False)
        self._send(job, script, supersede)

    def _send(self, job: LaneJob, script: str, supersede: str | None = None) -> None:
        """One SSH call on the worker: under the attempt's submit guard, unpack the
        workspace and script, then ``sbatch --parsable`` / ``qsub``
        (:meth:`.remote.LaneRemote.stage_and_submit`)."""
        job.busy = True
        workspace, records = self._basis.ctx.paths.workspace(job.job_id), job.records
        assert records is not None, "the intent names the guard's records first"
        token = secrets.token_hex(8)

        def work() -> GuardState:
            archive = stage_archive(workspace, script)
            return self._remote.stage_and_submit(job.job_id, archive, records, token, supersede)

        self._worker.submit(work, lambda result: self._submitted(job, result))

    def _submitted(self, job: LaneJob, result: object) -> None:
        job.busy = False
        if isinstance(result, GuardState):
            self.answered(job, result)
            return
        if isinstance(result, OSError):  # the local workspace could not be archived
            self._jobs.fail(job, f"the workspace could not be read for staging: {result}")
            return
        if isinstance(result, TransportError) and not_started(result):
            self._not_started(job, result)
            return
        # Ambiguous: it may have been submitted. Never resubmit blindly: look it up.
        if isinstance(result, TransportError):
            self._jobs.host_failed(result)
        log.warning("lane %s: submit of %s is ambiguous (%s)", self._basis.name, job.job_id, result)
        job.due = self._basis.monotonic() + self._basis.settings.absent_recheck_seconds

    def answered(self, job: LaneJob, state: GuardState) -> None:
        """What the submit guard said, from a submit call or a look-up's probe (on the
        loop). The submit command's own answer decides when there is one; otherwise the
        job stays ``submitting`` and is looked up again (busy, in doubt, unreadable)."""
        self._jobs.guard.assert_on_loop()
        recheck = self._basis.monotonic() + self._basis.settings.absent_recheck_seconds
        if state.kind == "answer":
            self._read_answer(job, state)
        elif state.kind == "stage_failed":
            said = state.stderr.strip().splitlines()
            detail = said[-1] if said else "no reason given"
            self._jobs.fail(job, f"staging the workspace on {self._basis.name} failed: {detail}")
        elif state.kind == "no_lock":
            self._jobs.fail(
                job,
                f"the login host of lane {self._basis.name} cannot lock files below its "
                f"scratch_root with flock(1), and vq submits only under that lock; "
                f"nothing was submitted ({job.records})",
            )
        elif state.kind == "busy":
            log.info(
                "lane %s: an earlier submission of %s is still running on the login host; "
                "waiting for its answer",
                self._basis.name,
                job.job_id,
            )
            job.absent_checks, job.due = 0, recheck
        else:
            if state.kind == "in_doubt":
                job.in_doubt = state.token
            log.warning(
                "lane %s: submission of %s is in doubt (%s); looking it up",
                self._basis.name,
                job.job_id,
                state.kind,
            )
            job.due = recheck

    def _read_answer(self, job: LaneJob, state: GuardState) -> None:
        answer = self._remote.parse_submit(job.job_id, state)
        verdict = submit_verdict(answer)
        if isinstance(answer, SubmitAccepted):
            _fault_points.crash_point("after_sbatch")
            job.in_doubt = job.supersede = None
            self.adopt(job, answer.scheduler_job_id)
        elif verdict == "unreached":
            self._unreached(job, state.token, answer.detail)
        elif verdict == "ambiguous":
            job.in_doubt = state.token
            log.warning(
                "lane %s: the submit answer for %s is ambiguous (%s); looking it up",
                self._basis.name,
                job.job_id,
                answer.detail,
            )
            job.due = self._basis.monotonic() + self._basis.settings.absent_recheck_seconds
        else:
            self._jobs.fail(job, f"the scheduler refused the job: {answer.detail}")

    def _unreached(self, job: LaneJob, token: str | None, detail: str) -> None:
        """The submit command never reached the controller: nothing was submitted. The
        job submits again after a growing delay (``poll_interval`` doubled per try, at
        most ``backoff_seconds``), superseding exactly that call; it never fails for it."""
        job.supersede, job.unreached = token, job.unreached + 1
        delay, reason = unreached_retry(self._basis.settings, job.unreached, detail)
        job.phase, job.due = "submit_retry", self._basis.monotonic() + delay
        self._jobs.record(
            job,
            {"scheduler_state": "submit_retry", "scheduler_queued_reason": reason},
            durable=False,
        )
        log.warning(
            "lane %s: %s for %s; submitting again in %.0f s",
            self._basis.name,
            detail,
            job.job_id,
            delay,
        )

    def _not_started(self, job: LaneJob, exc: TransportError) -> None:
        """The SSH call never reached the login host: nothing was staged or submitted. A
        transient cause stages again after ``poll_interval`` (``stage_retry``, a fresh
        intent then); credentials or host keys that must be fixed fail the job."""
        if not exc.transient:
            self._jobs.fail(
                job, f"staging the workspace on {self._basis.name} failed: {exc.message}"
            )
            return
        self._jobs.host_failed(exc)
        self.intent_path(job.job_id).unlink(missing_ok=True)  # nothing was submitted
        job.phase, job.due = (
            "stage_retry",
            self._basis.monotonic() + self._basis.settings.poll_interval,
        )
        self._jobs.record(job, {"scheduler_state": "stage_retry"}, durable=False)

    def adopt(self, job: LaneJob, scheduler_job_id: str) -> None:
        """Persist the scheduler job id (durable): from here the job is observed."""
        self._jobs.guard.assert_on_loop()
        job.scheduler_job_id, job.phase, job.absent_checks = scheduler_job_id, "queued", 0
        self._jobs.record(
            job,
            {
                "scheduler_job_id": scheduler_job_id,
                "scheduler_state": "queued",
                "scheduler_queued_reason": None,
            },
            event="dispatched",
        )
        if self._basis.ctx.store.read(job.job_id).is_terminal:
            job.cancel_wanted = True  # killed while it was being submitted
            self._control.send_cancel(job)
