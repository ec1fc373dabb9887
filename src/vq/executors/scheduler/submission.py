"""Single-job submission on a scheduler lane (a mixin of :class:`~.lane.SchedulerLane`;
every method runs on the daemon loop, every cluster call on the lane's worker).

* **intent**: a runtime pin made for another target or a named Python payload with no
  launcher fails the job (:mod:`.outcome`); the batch script is rendered (a render error fails
  the job: FAILED, ``failure_reason``), then ``_vq/scheduler-intent.json`` (nonce, tag,
  script sha256) is written and fsynced and ``scheduler_state = "submitting"`` recorded,
  before anything reaches the cluster;
* **stage and submit** in one SSH call: the workspace plus the script unpacked (tar,
  idempotent), then ``sbatch --parsable`` / ``qsub``; the id is persisted with
  ``queued`` (:meth:`SubmittingLane.adopt`);
* a staging failure the remote side reports or a refusal fails the job; an ambiguous
  answer never resubmits blindly: the job is looked up by its tag (:mod:`.recovery`);
* an operator's decision for a job in doubt (:meth:`SubmittingLane.resolve_single`).

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
from vq.dialects import ParseFailure, SubmitAccepted, UnsafeSchedulerValue
from vq.domain.spec import JobSpec
from vq.errors import Conflict, InvalidInput, TransportError

from .forwarded import UnreadableEnvironment, forwarded_variables
from .jobs import LaneJob, ambiguous, not_started
from .observe import ObservingLane
from .outcome import (
    SHEBANG_LIMIT,
    launcher_refusal,
    pin_refusal,
    script_request,
    staged_script_path,
)
from .remote import StageFailed, stage_archive

__all__ = ["INTENT_NAME", "SubmittingLane"]

log = logging.getLogger(__name__)

#: The driver-side intent record, next to the spec's other files in ``_vq/``.
INTENT_NAME = "scheduler-intent.json"


class SubmittingLane(ObservingLane):
    """Intent, stage and submit one job (see the module docstring)."""

    # --- intent, then stage and submit in one call ------------------------------------------
    def _stage(self, job: LaneJob, spec: JobSpec) -> None:
        """A fresh attempt: a new nonce, the intent made durable, then stage + submit."""
        if spec.is_terminal:  # killed before anything was submitted
            self._drop(job)
            return
        job.nonce = secrets.token_hex(8)
        script = self._render(job, spec)
        if script is None:
            return
        self._write_intent(job, script)
        _fault_points.crash_point("after_intent")
        self._send(job, script)

    def _render(self, job: LaneJob, spec: JobSpec) -> str | None:
        """The batch script for ``job.nonce``; a named Python payload with no launcher or a
        render error fails the job (None)."""
        refusal = pin_refusal(spec, self.settings) or launcher_refusal(
            spec, self.settings, self._script_head(job.job_id, spec)
        )
        if refusal is not None:
            self._fail(job, refusal)
            return None
        try:
            forwarded = forwarded_variables(self.ctx.paths, job.job_id)
        except UnreadableEnvironment as exc:
            self._fail(job, f"the batch script could not be rendered: {exc}")
            return None
        try:
            return self.remote.dialect.render_script(
                script_request(spec, self.settings, job.nonce or "", forwarded)
            )
        except (UnsafeSchedulerValue, ValueError) as exc:
            self._fail(job, f"the batch script could not be rendered: {exc}")
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
        tree = self.ctx.paths.tree_of(job_id)
        try:
            fd = open_beneath(tree, self.ctx.paths.workspace(job_id) / relative, os.O_RDONLY)
        except OSError:  # missing, a link, a FIFO, a directory: no staged script
            return None
        try:
            return os.read(fd, SHEBANG_LIMIT)
        except OSError:
            return None
        finally:
            os.close(fd)

    def _write_intent(self, job: LaneJob, script: str) -> None:
        job.submitted_at = self.ctx.now()
        intent = {
            "lane": self.name,
            "nonce": job.nonce,
            "tag": f"vq-{job.job_id}",
            "script_sha256": hashlib.sha256(script.encode()).hexdigest(),
            "written_at": job.submitted_at.isoformat(),
        }
        path = self.intent_path(job.job_id)
        # Below the job's tree, whose owner may plant links (multi-user): never followed.
        tree = self.ctx.paths.tree_of(job.job_id)
        atomic_write_beneath(tree, path, json.dumps(intent).encode(), parents=True)
        job.phase = "submitting"
        # The fsynced intent is the durable record recovery reads (either it or this
        # state sends a job to the lookup by tag), so this write needs no second fsync.
        self._record(job, {"scheduler_state": "submitting"}, durable=False)

    def resolve_single(self, job_id: str, scheduler_job_id: str | None) -> dict[str, Any]:
        """An operator's decision for a job whose submission is in doubt (on the loop):
        ``scheduler_job_id`` is its scheduler job (adopted), None means it was never
        submitted (it is submitted now, under the same tag)."""
        job = self._jobs.get(job_id)
        if job is None or job.scheduler_job_id is not None or job.busy:
            raise Conflict(
                f"job {job_id} is not waiting for a decision on lane {self.name}",
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
            self._record(job, {"scheduler_state": "submitting"})
            self._submit(job)
        return {"id": job_id, "scheduler_job_id": scheduler_job_id, "lane": self.name}

    def _forget_attempt(self, job_id: str) -> None:
        """Before a retry is claimed: drop the previous attempt's intent and id, so
        recovery never takes the old scheduler job for the new attempt."""
        self.intent_path(job_id).unlink(missing_ok=True)
        fields = {"scheduler_job_id": None, "scheduler_state": None}
        self.lifecycle.record_scheduler(job_id, fields)

    def intent_path(self, job_id: str) -> Path:
        return self.ctx.paths.meta_dir(job_id) / INTENT_NAME

    def read_intent(self, job_id: str) -> dict[str, Any] | None:
        try:
            tree = self.ctx.paths.tree_of(job_id)
            data = json.loads(read_regular_beneath(tree, self.intent_path(job_id), 4096))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _submit(self, job: LaneJob) -> None:
        """Submit a ``submitting`` job again under its intent's tag and nonce (recovery
        found it never submitted, or an operator said so): stage + submit anew."""
        spec = self.ctx.store.read(job.job_id)
        if spec.is_terminal:
            self._drop(job)
            return
        if job.nonce is None:
            job.nonce = secrets.token_hex(8)
        script = self._render(job, spec)
        if script is not None:
            self._send(job, script)

    def _send(self, job: LaneJob, script: str) -> None:
        """One SSH call on the worker: unpack the workspace and script, then ``sbatch
        --parsable`` / ``qsub`` (:meth:`.remote.LaneRemote.stage_and_submit`)."""
        job.busy = True
        workspace = self.ctx.paths.workspace(job.job_id)

        def work() -> SubmitAccepted | ParseFailure:
            return self.remote.stage_and_submit(job.job_id, stage_archive(workspace, script))

        self._worker.submit(work, lambda result: self._submitted(job, result))

    def _submitted(self, job: LaneJob, result: object) -> None:
        job.busy = False
        if isinstance(result, SubmitAccepted):
            _fault_points.crash_point("after_sbatch")
            self.adopt(job, result.scheduler_job_id)
            return
        if isinstance(result, ParseFailure) and not ambiguous(result.detail):
            self._fail(job, f"the scheduler refused the job: {result.detail}")
            return
        if isinstance(result, StageFailed):  # definite: the submit command never ran
            self._fail(job, f"staging the workspace on {self.name} failed: {result.detail}")
            return
        if isinstance(result, OSError):  # the local workspace could not be archived
            self._fail(job, f"the workspace could not be read for staging: {result}")
            return
        if isinstance(result, TransportError) and not_started(result):
            self._not_started(job, result)
            return
        # Ambiguous: it may have been submitted. Never resubmit blindly: look it up.
        if isinstance(result, TransportError):
            self._host_failed(result)
        log.warning("lane %s: submit of %s is ambiguous (%s)", self.name, job.job_id, result)
        job.due = self._monotonic() + self.settings.absent_recheck_seconds

    def _not_started(self, job: LaneJob, exc: TransportError) -> None:
        """The SSH call never reached the login host: nothing was staged or submitted. A
        transient cause stages again after ``poll_interval`` (``stage_retry``, a fresh
        intent then); credentials or host keys that must be fixed fail the job."""
        if not exc.transient:
            self._fail(job, f"staging the workspace on {self.name} failed: {exc.message}")
            return
        self._host_failed(exc)
        self.intent_path(job.job_id).unlink(missing_ok=True)  # nothing was submitted
        job.phase, job.due = "stage_retry", self._monotonic() + self.settings.poll_interval
        self._record(job, {"scheduler_state": "stage_retry"}, durable=False)

    def adopt(self, job: LaneJob, scheduler_job_id: str) -> None:
        """Persist the scheduler job id (durable): from here the job is observed."""
        job.scheduler_job_id, job.phase, job.absent_checks = scheduler_job_id, "queued", 0
        self._record(
            job,
            {"scheduler_job_id": scheduler_job_id, "scheduler_state": "queued"},
            event="dispatched",
        )
        if self.ctx.store.read(job.job_id).is_terminal:
            job.cancel_wanted = True  # killed while it was being submitted
            self._send_cancel(job)
