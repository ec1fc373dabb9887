"""One dispatch pass: pick admissible PENDING jobs, claim each, launch it.

Order of durable effects for one job (§1.2 item 3, §4.3):

1. under the spec lock, re-read the spec; if it is still PENDING and due, write RUNNING
   (``started_at``, ``workdir``) — the claim is durable *before* the launch;
2. outside the lock, create ``VQ_WORKDIR`` and send the launch to the fork server without
   waiting for its answer; the job holds its budget from here on;
3. when the answer arrives (on the main loop, in order with that job's exit event),
   record ``pid``/``pgid``/``pid_start_time`` under the lock. If a kill landed between 1
   and 3 (the spec is terminal), the fresh group is SIGTERM'd at once and is owed the
   usual grace.

A launch failure records FAILED with the reason (a dispatch failure, §4.1 item 3).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from vq.domain.admission import Request, order_key, plan_dispatch
from vq.domain.events import make_event
from vq.domain.lifecycle import apply_transition
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import VqError
from vq.executors.forkserver_client import ForkServer, LaunchRequest
from vq.services.context import ServiceContext
from vq.services.kill import terminate_group
from vq.services.query import request_of
from vq.store.events import append_event

from .index import JobIndex
from .supervisor import LaunchResult, Supervisor

__all__ = ["Dispatcher", "job_environment"]

log = logging.getLogger(__name__)


def job_environment(base: Mapping[str, str], spec: JobSpec, workdir: str) -> dict[str, str]:
    """The command's environment: the daemon's own plus the VQ_* job variables."""
    env = dict(base)
    env["VQ_JOB_ID"] = spec.id
    env["VQ_WORKDIR"] = workdir
    env["VQ_CPUS"] = str(spec.cpus)
    if spec.mem_mb is not None:
        env["VQ_MEM_MB"] = str(spec.mem_mb)
    else:
        env.pop("VQ_MEM_MB", None)
    if spec.job_name:
        env["VQ_JOB_NAME"] = spec.job_name
    return env


class Dispatcher:
    """Claims and launches local jobs within the supervisor's budget."""

    def __init__(
        self,
        ctx: ServiceContext,
        supervisor: Supervisor,
        forkserver: ForkServer,
        index: JobIndex,
        on_change: Callable[[JobSpec], None],
        base_env: Mapping[str, str],
        hold: Callable[[], bool] = lambda: False,
        command_prefix: Callable[[JobSpec], list[str]] = lambda spec: [],
    ) -> None:
        self.ctx = ctx
        self.supervisor = supervisor
        self.forkserver = forkserver
        self._index = index
        self._order: list[Request] = []
        self._order_generation = -1
        self._on_change = on_change
        self._base_env = dict(base_env)
        self._hold = hold
        self._prefix = command_prefix

    def run_pass(self) -> int:
        """Start every admissible job now; returns how many were launched."""
        if self._hold():
            return 0
        usage, caps = self.supervisor.usage(), self.ctx.caps
        if (caps.max_jobs is not None and usage.jobs >= caps.max_jobs) or (
            caps.max_cpus is not None and usage.cpus >= caps.max_cpus
        ):
            return 0  # full: every job needs a slot and at least one CPU
        candidates = self._candidates()
        if not candidates:
            return 0
        chosen = plan_dispatch(candidates, usage, caps, self.ctx.now())
        launched = 0
        for job_id in chosen:
            spec = self._claim(job_id)
            if spec is not None and self._launch(spec):
                launched += 1
        return launched

    def _candidates(self) -> list[Request]:
        """Pending local jobs in admission order; re-sorted only when a job became pending."""
        if self._index.pending_generation != self._order_generation:
            self._order_generation = self._index.pending_generation
            self._order = sorted(
                (request_of(s) for s in self._index.pending() if s.scheduler_target is None),
                key=order_key,
            )
        self._order = [r for r in self._order if self._index.is_pending(r.job_id)]
        return self._order

    def _claim(self, job_id: str) -> JobSpec | None:
        now = self.ctx.now()
        workdir = str(self.ctx.paths.workdir(job_id))
        claimed: list[bool] = []

        def mutate(spec: JobSpec) -> JobSpec | None:
            if spec.state is not JobState.PENDING:
                return None
            if spec.not_before is not None and spec.not_before > now:
                return None
            spec.workdir = workdir
            claimed.append(True)
            return apply_transition(spec, JobState.RUNNING, now)

        try:
            spec = self.ctx.store.update(job_id, mutate)
        except VqError as exc:
            log.warning("cannot claim job %s: %s", job_id, exc.message)
            return None
        self._on_change(spec)
        if not claimed:
            return None
        append_event(
            self.ctx.paths,
            make_event("state_transition", job_id, now, to="RUNNING", **{"from": "PENDING"}),
        )
        return spec

    def _launch(self, spec: JobSpec) -> bool:
        """Send the launch; the job holds its budget from now on. The answer arrives
        later through the supervisor's queue and is applied by :meth:`apply_launch`."""
        paths = self.ctx.paths
        job_id = spec.id
        for stale in (paths.exit_code(job_id), paths.resource_usage(job_id)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)  # a previous attempt's marker must never be read as ours
        workspace = paths.workspace(job_id)
        try:
            paths.workdir(job_id).mkdir(parents=True, exist_ok=True)
            paths.meta_dir(job_id).mkdir(parents=True, exist_ok=True)
            request = LaunchRequest(
                job_id=job_id,
                argv=[*self._prefix(spec), *spec.command],
                cwd=Path(spec.cwd) if spec.cwd else workspace,
                env=job_environment(self._base_env, spec, str(paths.workdir(job_id))),
                stdout=workspace / spec.stdout_path,
                stderr=workspace / spec.stderr_path,
                exit_code_path=paths.exit_code(job_id),
                usage_path=paths.resource_usage(job_id),
            )
        except (ValueError, OSError) as exc:
            self._fail_dispatch(job_id, f"launch failed: {exc}")
            return False
        self.supervisor.track(spec, None, None, None, orphan=False)
        self.forkserver.launch_async(request, self.supervisor.on_launch_result)
        return True

    def apply_launch(self, result: LaunchResult) -> None:
        """Record the collector's identity (or the launch failure) on the loop."""
        job_id = result.job_id
        launched = result.launched
        if launched is None:
            self.supervisor.release(job_id)
            self._fail_dispatch(job_id, f"launch failed: {result.error}")
            return
        if self.supervisor.set_launched(launched) is None:
            log.warning("launch answer for untracked job %s ignored", job_id)
            return

        def record(current: JobSpec) -> JobSpec:
            current.pid = launched.pid
            current.pgid = launched.pgid
            current.pid_start_time = launched.start_ticks
            return current

        # Not fsync'd: after a power loss no process survives anyway, and recovery finds a
        # live group through its VQ_JOB_ID environment when the pid is missing.
        spec = self.ctx.store.update(job_id, record, durable=False)
        self._on_change(spec)
        append_event(
            self.ctx.paths,
            make_event(
                "dispatched",
                job_id,
                self.ctx.now(),
                pid=launched.pid,
                pgid=launched.pgid,
                cpus=spec.cpus,
                mem_mb=spec.mem_mb,
            ),
        )
        if spec.is_terminal and terminate_group(job_id, launched.pgid, launched.start_ticks):
            self.supervisor.start_grace(job_id)  # killed while it was being launched

    def _fail_dispatch(self, job_id: str, reason: str) -> None:
        now = self.ctx.now()

        def mutate(spec: JobSpec) -> JobSpec | None:
            if spec.is_terminal:
                return None
            return apply_transition(spec, JobState.FAILED, now, reason=reason)

        spec = self.ctx.store.update(job_id, mutate)
        self._on_change(spec)
        append_event(
            self.ctx.paths,
            make_event(
                "state_transition",
                job_id,
                now,
                to=spec.state.value,
                reason=reason,
                **{"from": "RUNNING"},
            ),
        )
        log.warning("job %s: %s", job_id, reason)
