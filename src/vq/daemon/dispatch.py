"""One dispatch pass: pick admissible PENDING jobs, claim each, launch it.

Order of durable effects for one job (§1.2 item 3, §4.3):

1. under the spec lock, re-read the spec; if it is still PENDING and due, write RUNNING
   (``started_at``, ``workdir``) — the claim is durable *before* the launch;
2. outside the lock, create ``VQ_WORKDIR`` and launch through the fork server;
3. under the lock again, record ``pid``/``pgid``/``pid_start_time``. If a kill landed
   between 1 and 3 (the spec is terminal), the fresh group is SIGTERM'd at once and is
   owed the usual grace.

A launch failure records FAILED with the reason (a dispatch failure, §4.1 item 3).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from vq.domain.admission import plan_dispatch
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

from .supervisor import Supervisor

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
        pending: Callable[[], list[JobSpec]],
        on_change: Callable[[JobSpec], None],
        base_env: Mapping[str, str],
        hold: Callable[[], bool] = lambda: False,
    ) -> None:
        self.ctx = ctx
        self.supervisor = supervisor
        self.forkserver = forkserver
        self._pending = pending
        self._on_change = on_change
        self._base_env = dict(base_env)
        self._hold = hold

    def run_pass(self) -> int:
        """Start every admissible job now; returns how many were launched."""
        if self._hold():
            return 0
        now = self.ctx.now()
        candidates = [request_of(spec) for spec in self._pending() if spec.scheduler_target is None]
        if not candidates:
            return 0
        chosen = plan_dispatch(candidates, self.supervisor.usage(), self.ctx.caps, now)
        launched = 0
        for job_id in chosen:
            spec = self._claim(job_id)
            if spec is not None and self._launch(spec):
                launched += 1
        return launched

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
        paths = self.ctx.paths
        job_id = spec.id
        for stale in (paths.exit_code(job_id), paths.resource_usage(job_id)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)  # a previous attempt's marker must never be read as ours
        workspace = paths.workspace(job_id)
        try:
            paths.workdir(job_id).mkdir(parents=True, exist_ok=True)
            paths.meta_dir(job_id).mkdir(parents=True, exist_ok=True)
            launched = self.forkserver.launch(
                LaunchRequest(
                    job_id=job_id,
                    argv=list(spec.command),
                    cwd=Path(spec.cwd) if spec.cwd else workspace,
                    env=job_environment(self._base_env, spec, str(paths.workdir(job_id))),
                    stdout=workspace / spec.stdout_path,
                    stderr=workspace / spec.stderr_path,
                    exit_code_path=paths.exit_code(job_id),
                    usage_path=paths.resource_usage(job_id),
                )
            )
        except (VqError, OSError) as exc:
            message = exc.message if isinstance(exc, VqError) else str(exc)
            self._fail_dispatch(job_id, f"launch failed: {message}")
            return False
        self.supervisor.track(spec, launched.pid, launched.pgid, launched.start_ticks, orphan=False)

        def record(current: JobSpec) -> JobSpec:
            current.pid = launched.pid
            current.pgid = launched.pgid
            current.pid_start_time = launched.start_ticks
            return current

        spec = self.ctx.store.update(job_id, record)
        self._on_change(spec)
        append_event(
            paths,
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
        return True

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
