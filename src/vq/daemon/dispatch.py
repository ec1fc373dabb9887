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

A job naming a program (§3.4) is re-probed right before step 1, outside any lock (the
probe runs git and the interpreter, each bounded): an unregistered or unavailable
program, or an enforced runtime pin that no longer holds, fails the PENDING job with the
reason; otherwise the claim records the SHA that will run as
``program_runtime_pin.resolved_git_sha`` and the launch exports the ``VQ_PROGRAM*``
variables from that same observation.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from vq.domain.admission import Request, order_key, plan_dispatch
from vq.domain.dependencies import evaluate
from vq.domain.events import make_event, transition_event
from vq.domain.lifecycle import apply_transition
from vq.domain.programs import (
    PROGRAM_VARIABLES,
    ProgramStatus,
    dispatch_refusal,
    program_environment,
    resolved_pin,
)
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import VqError
from vq.executors.forkserver_client import SERVER_EXITED, ForkServer, LaunchRequest
from vq.services.context import ServiceContext
from vq.services.kill import terminate_group
from vq.services.programs import probe
from vq.services.query import request_of
from vq.store.events import append_event
from vq.transport.local import LocalRunner

from .index import JobIndex
from .supervisor import LaunchResult, Supervisor

__all__ = ["Dispatcher", "job_environment"]

log = logging.getLogger(__name__)


def job_environment(
    base: Mapping[str, str], spec: JobSpec, workdir: str, program: ProgramStatus | None = None
) -> dict[str, str]:
    """The command's environment: the daemon's own plus the VQ_* job variables.

    ``program`` is the dispatch-time probe of ``spec.program`` (its paths and SHA)."""
    env = dict(base)
    for name in PROGRAM_VARIABLES:
        env.pop(name, None)  # never inherit another job's program identity
    if spec.program:
        env.update(program_environment(spec.program, program))
    env["VQ_JOB_ID"] = spec.id
    env["VQ_WORKDIR"] = workdir
    env["VQ_CPUS"] = str(spec.cpus)
    if spec.mem_mb is not None:
        env["VQ_MEM_MB"] = str(spec.mem_mb)
    else:
        env.pop("VQ_MEM_MB", None)
    if spec.job_name:
        env["VQ_JOB_NAME"] = spec.job_name
    if spec.array_index is not None:
        env["VQ_ARRAY_INDEX"] = str(spec.array_index)
        env["VQ_ARRAY_TOTAL"] = str(spec.array_total)
        env["VQ_ARRAY_GROUP"] = str(spec.array_group_id)
        if spec.array_value is not None:
            env["VQ_ARRAY_VALUE"] = spec.array_value
    if spec.chain_index is not None:
        env["VQ_CHAIN_INDEX"] = str(spec.chain_index)
        env["VQ_CHAIN_TOTAL"] = str(spec.chain_total)
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
        on_ended: Callable[[JobSpec], None] = lambda spec: None,
        runner: LocalRunner | None = None,
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
        self._on_ended = on_ended
        self._runner = runner or LocalRunner()
        self._gated: dict[str, JobSpec] = {}  # pending specs with predecessors
        self._groups: dict[str, tuple[str, int]] = {}  # job -> (array group, max parallel)
        self._dependents: dict[str, set[str]] = {}  # predecessor -> gated dependents
        self._blocked: set[str] = set()
        self._gates_fresh = False  # False: every gated job must be (re)evaluated

    def run_pass(self) -> int:
        """Start every admissible job now; returns how many were launched."""
        if self._hold():
            return 0
        candidates = self._candidates()
        if not candidates:
            return 0
        self._apply_gates()  # cascades happen even while every slot is busy
        usage, caps = self.supervisor.usage(), self.ctx.caps
        if (caps.max_jobs is not None and usage.jobs >= caps.max_jobs) or (
            caps.max_cpus is not None and usage.cpus >= caps.max_cpus
        ):
            return 0  # full: every job needs a slot and at least one CPU
        candidates = self._limit_groups([r for r in candidates if r.job_id not in self._blocked])
        if not candidates:
            return 0
        chosen = plan_dispatch(candidates, usage, caps, self.ctx.now(), self.ctx.base_caps)
        launched = 0
        for job_id in chosen:
            ready, program = self._check_program(job_id)
            if not ready:
                continue
            spec = self._claim(job_id, program)
            if spec is not None and self._launch(spec, program):
                launched += 1
        return launched

    def _candidates(self) -> list[Request]:
        """Pending local jobs in admission order; re-sorted only when a job became pending."""
        if self._index.pending_generation != self._order_generation:
            self._order_generation = self._index.pending_generation
            pending = [s for s in self._index.pending() if s.scheduler_target is None]
            self._order = sorted((request_of(s) for s in pending), key=order_key)
            self._gated = {s.id: s for s in pending if s.depends_on or s.depends_on_any}
            self._dependents = {}
            for spec in self._gated.values():
                for predecessor in (*spec.depends_on, *spec.depends_on_any):
                    self._dependents.setdefault(predecessor, set()).add(spec.id)
            self._groups = {
                s.id: (s.array_group_id, s.array_max_parallel)
                for s in pending
                if s.array_group_id and s.array_max_parallel
            }
            self._gates_fresh = False
        self._order = [r for r in self._order if self._index.is_pending(r.job_id)]
        return self._order

    def _apply_gates(self) -> None:
        """Re-evaluate the dependency gates that can have changed; cascade failures.

        Only the dependents of jobs whose state changed since the last pass are checked
        (all gated jobs after the pending set was rebuilt), so the work follows the
        graph's edges, not its size squared. Runs to a fixed point so a failure
        propagates through a whole chain at once.
        """
        changes = self._index.take_state_changes()
        if not self._gates_fresh:
            self._gates_fresh = True
            to_check = set(self._gated)
        else:
            to_check = set()
            for job_id in changes:
                to_check |= self._dependents.get(job_id, set())
        while to_check:
            for job_id in to_check:
                spec = self._gated.get(job_id)
                if spec is None or not self._index.is_pending(job_id):
                    self._gated.pop(job_id, None)
                    self._blocked.discard(job_id)
                    continue
                gate = evaluate(spec.depends_on, spec.depends_on_any, self._index.dependency_state)
                if gate.cascade:
                    del self._gated[job_id]
                    self._blocked.discard(job_id)
                    self._fail_pending(job_id, gate.reason or "a dependency failed")
                elif gate.ready:
                    self._blocked.discard(job_id)
                else:
                    self._blocked.add(job_id)
            to_check = set()
            for job_id in self._index.take_state_changes():  # cascades just written
                to_check |= self._dependents.get(job_id, set())

    def _fail_pending(self, job_id: str, reason: str) -> None:
        """PENDING → FAILED (a dependency cascade, or a refused program at dispatch)."""
        now = self.ctx.now()

        def mutate(spec: JobSpec) -> JobSpec | None:
            if spec.state is not JobState.PENDING:
                return None
            return apply_transition(spec, JobState.FAILED, now, reason=reason)

        spec = self.ctx.store.update(job_id, mutate)
        self._on_change(spec)
        if spec.state is JobState.FAILED and spec.failure_reason == reason:
            append_event(
                self.ctx.paths,
                transition_event(job_id, now, "PENDING", "FAILED", reason=reason),
            )
            self._on_ended(spec)

    def _limit_groups(self, candidates: list[Request]) -> list[Request]:
        """Drop array elements beyond their group's ``--max-parallel`` allowance."""
        if not self._groups:
            return candidates
        running: dict[str, int] = {}
        for job_id in self.supervisor.holders:
            spec = self._index.get(job_id)
            if spec is not None and spec.array_group_id:
                running[spec.array_group_id] = running.get(spec.array_group_id, 0) + 1
        kept = []
        for request in candidates:
            group = self._groups.get(request.job_id)
            if group is not None:
                group_id, limit = group
                if running.get(group_id, 0) >= limit:
                    continue
                running[group_id] = running.get(group_id, 0) + 1
            kept.append(request)
        return kept

    def _check_program(self, job_id: str) -> tuple[bool, ProgramStatus | None]:
        """(may launch, dispatch-time probe) for a chosen job; a refusal fails it (§3.4)."""
        spec = self._index.get(job_id)
        if spec is None or spec.program is None:
            return True, None
        settings = self.ctx.programs.get(spec.program)
        status = None
        if settings is not None:
            status = probe(spec.program, settings, self._runner, pins=False)
        reason = dispatch_refusal(spec.program, spec.program_runtime_pin, status)
        if reason is not None:
            self._fail_pending(job_id, reason)
            return False, None
        return True, status

    def _claim(self, job_id: str, program: ProgramStatus | None = None) -> JobSpec | None:
        now = self.ctx.now()
        workdir = str(self.ctx.paths.workdir(job_id))
        claimed: list[bool] = []

        def mutate(spec: JobSpec) -> JobSpec | None:
            if spec.state is not JobState.PENDING:
                return None
            if spec.not_before is not None and spec.not_before > now:
                return None
            spec.workdir = workdir
            if program is not None:  # the SHA that will actually run, never the submit one
                spec.program_runtime_pin = resolved_pin(program, spec.program_runtime_pin)
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
            transition_event(job_id, now, "PENDING", "RUNNING"),
        )
        return spec

    def _launch(self, spec: JobSpec, program: ProgramStatus | None = None) -> bool:
        """Send the launch; the job holds its budget from now on. The answer arrives
        later through the supervisor's queue and is applied by :meth:`apply_launch`."""
        paths = self.ctx.paths
        job_id = spec.id
        for stale in (
            paths.exit_code(job_id),
            paths.resource_usage(job_id),
            paths.collector_pid(job_id),
        ):
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
                env=job_environment(self._base_env, spec, str(paths.workdir(job_id)), program),
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
            if not result.sent:  # the request never left: nothing ran, run it later
                self.supervisor.release(job_id)
                self._requeue(job_id, f"not launched ({result.error}); back in the queue")
            elif result.error == SERVER_EXITED:  # it may be running: find out, never guess
                self.supervisor.launch_unresolved(job_id)
            else:  # the server answered that it could not launch
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

    def _requeue(self, job_id: str, reason: str) -> None:
        """RUNNING → PENDING for a claim whose launch was provably never sent."""
        now = self.ctx.now()

        def mutate(spec: JobSpec) -> JobSpec | None:
            if spec.state is not JobState.RUNNING or spec.pid is not None:
                return None
            spec.started_at = None
            return apply_transition(spec, JobState.PENDING, now, reason=reason)

        spec = self.ctx.store.update(job_id, mutate)
        self._on_change(spec)
        log.warning("job %s: %s", job_id, reason)

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
            transition_event(job_id, now, "RUNNING", spec.state.value, reason=reason),
        )
        log.warning("job %s: %s", job_id, reason)
