"""One dispatch pass: pick admissible PENDING jobs, claim each, launch it.

Order of durable effects for one job (§1.2 item 3, §4.3):

1. under the spec lock, re-read the spec; if it is still PENDING and due, write RUNNING
   (``started_at``, ``workdir``) — the claim is durable *before* the launch. The jobs
   chosen in one pass are claimed as one group commit (their file fsyncs overlap, one
   directory fsync covers them all) and launched only after it returns;
2. outside the lock, create ``VQ_WORKDIR`` and send the launch to the fork server without
   waiting for its answer; the job holds its budget from here on;
3. when the answer arrives (on the main loop, in order with that job's exit event),
   record ``pid``/``pgid``/``pid_start_time`` under the lock. If a kill landed between 1
   and 3 (the spec is terminal), the fresh group is SIGTERM'd at once and is owed the
   usual grace.

A launch failure — refused before it was sent, refused by the fork server, or a command
the collector could not start (missing working directory or program) — records FAILED
with the reason (a dispatch failure, §4.1 item 3) and never consumes retry budget.

The admission order between passes (which pending jobs are due, in what order, which a
dependency gate holds) is kept by :mod:`vq.daemon.admission_order`.

Every job runs through the executor its spec selects (:mod:`vq.executors.registry`): the
registry partitions the pending specs, this dispatcher runs the local executor's, a
configured scheduler lane dispatches its own, and a spec whose target names no
configured lane is FAILED at dispatch with the registry's reason instead of waiting
forever. Every state change goes through the
lifecycle writer (:mod:`vq.services.lifecycle`).

A job naming a program (§3.4) is re-probed right before step 1, outside any lock (the
probe runs git and the interpreter, each bounded): an unregistered or unavailable
program, or an enforced runtime pin that no longer holds, fails the PENDING job with the
reason; otherwise the claim records the SHA that will run as
``program_runtime_pin.resolved_git_sha`` and the launch exports the ``VQ_PROGRAM*``
variables from that same observation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from vq._fault_points import crash_point
from vq.domain.admission import Request, effective_mem_mb, plan_dispatch
from vq.domain.affinity import choose_cores
from vq.domain.programs import (
    PROGRAM_VARIABLES,
    ProgramStatus,
    dispatch_refusal,
    program_environment,
)
from vq.domain.quotas import Holder, OwnerLoad, load_of
from vq.domain.spec import JobSpec
from vq.errors import StorageError, VqError
from vq.executors.base import JobHandle, LaunchResult
from vq.executors.launch import SERVER_EXITED
from vq.executors.registry import ExecutorRegistry
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle
from vq.services.programs import probe
from vq.services.runtime_generations import Generation, generation_problem
from vq.transport.local import LocalRunner

from .admission_order import AdmissionOrder
from .index import JobIndex
from .multi_user import OwnerQuotas
from .supervisor import Supervisor

__all__ = ["Dispatcher", "job_environment"]

log = logging.getLogger(__name__)


def job_environment(
    base: Mapping[str, str],
    spec: JobSpec,
    workdir: str,
    program: ProgramStatus | None = None,
    after_workspaces: Sequence[str] = (),
) -> dict[str, str]:
    """The command's environment: the daemon's own plus the VQ_* job variables.

    ``program`` is the dispatch-time probe of ``spec.program`` (its paths and SHA);
    ``after_workspaces`` the workspaces of the job's predecessors (``--after``, then
    ``--after-any``), exported newline-separated as ``VQ_AFTER_WORKSPACES``."""
    env = dict(base)
    env.pop("VQ_AFTER_WORKSPACES", None)
    if after_workspaces:
        env["VQ_AFTER_WORKSPACES"] = "\n".join(after_workspaces)
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
    env.pop("VQ_RUNTIME_PAYLOAD", None)
    if spec.runtime_generation is not None:
        bound = spec.runtime_generation
        env["VQ_RUNTIME_PAYLOAD"] = str(Generation(Path(bound.root), bound.digest).payload)
    return env


class Dispatcher:
    """Claims and launches local jobs within the supervisor's budget.

    The pending local jobs, in admission order and with their dependency gates, come
    from :attr:`admission_order`, which the dispatcher tells which pending specs it runs
    (:meth:`_without_executor`) and through which a dependency cascade fails a job
    (:meth:`_fail_pending`)."""

    def __init__(
        self,
        ctx: ServiceContext,
        supervisor: Supervisor,
        executors: ExecutorRegistry,
        index: JobIndex,
        lifecycle: Lifecycle,
        base_env: Mapping[str, str],
        hold: Callable[[], bool] = lambda: False,
        runner: LocalRunner | None = None,
        affinity_cores: Callable[[], frozenset[int] | None] = lambda: None,
        quotas: OwnerQuotas | None = None,
    ) -> None:
        self.ctx = ctx
        self._quotas = quotas
        self.supervisor = supervisor
        self.executors = executors
        self.lifecycle = lifecycle
        self._index = index
        self.admission_order = AdmissionOrder(index, self._without_executor, self._fail_pending)
        self._base_env = dict(base_env)
        self._hold = hold
        self._affinity_cores = affinity_cores
        self._runner = runner or LocalRunner()

    def run_pass(self) -> int:
        """Start every admissible job now; returns how many were launched."""
        if self._hold():
            return 0
        now = self.ctx.now()
        candidates = self.admission_order.candidates(now)
        if not candidates:
            return 0
        self.admission_order.apply_gates()  # cascades happen even while every slot is busy
        usage, caps = self.supervisor.usage(), self.ctx.caps
        if (caps.max_jobs is not None and usage.jobs >= caps.max_jobs) or (
            caps.max_cpus is not None and usage.cpus >= caps.max_cpus
        ):
            return 0  # full: every job needs a slot and at least one CPU
        live = self.admission_order.admissible(candidates)
        # Consumed lazily, in order, only until the free slots are taken: a pass costs
        # about the jobs it looks at, not the length of the queue.
        chosen = plan_dispatch(
            self._limit_quotas(self._limit_groups(live)),
            usage,
            caps,
            now,
            self.ctx.base_caps,
            ordered=True,
        )
        ready: list[tuple[str, ProgramStatus | None]] = []
        for job_id in chosen:
            may_launch, program = self._check_program(job_id)
            if may_launch:
                ready.append((job_id, program))
        claimed, error = self._claim_group(ready)
        launched = 0
        for position, (spec, program) in enumerate(claimed):
            try:
                if self._launch(spec, program):
                    launched += 1
            except StorageError as exc:
                # The state root refuses the launches' files: nothing more is sent this
                # pass, and the claims behind this one go back to the queue with it.
                for unsent, _ in claimed[position + 1 :]:
                    self.supervisor.unsent(
                        unsent, f"not launched ({exc.message}); back in the queue"
                    )
                raise
        if error is not None:
            raise error  # only after every claim that did land was launched
        return launched

    def _after_workspaces(self, spec: JobSpec) -> list[str]:
        """The workspaces of ``spec``'s predecessors, in the order it names them: each
        one's ``jobs/<id>/`` (where a lane job's results are copied back), or, for a
        chain segment that has none of its own, the directory it ran in (the chain's
        first segment's workspace)."""
        out: list[str] = []
        for job_id in dict.fromkeys((*spec.depends_on, *spec.depends_on_any)):
            workspace = self.ctx.paths.workspace(job_id)
            if not workspace.is_dir():
                predecessor = self._index.get(job_id)
                if predecessor is not None and predecessor.cwd:
                    workspace = Path(predecessor.cwd)
            if str(workspace) not in out:
                out.append(str(workspace))
        return out

    def _without_executor(self, pending: list[JobSpec]) -> list[JobSpec]:
        """The pending specs the local executor runs. A spec aimed at a scheduler lane
        that is not configured is FAILED with the registry's reason (a configured lane
        dispatches its own jobs)."""
        placed = self.executors.partition(pending)
        for spec, refusal in placed.unplaced:
            if not refusal.parked:  # a lane a reload removed: its jobs wait for it
                self._fail_pending(spec.id, refusal.message)
        return placed.local

    def _fail_pending(self, job_id: str, reason: str) -> None:
        """PENDING → FAILED (a dependency cascade, a refused program, no executor)."""
        try:
            self.lifecycle.fail_pending(job_id, reason)
        except VqError as exc:
            log.warning("job %s not failed (%s): %s", job_id, reason, exc.message)

    def _limit_groups(self, candidates: Iterator[Request]) -> Iterator[Request]:
        """Skip array elements beyond their group's ``--max-parallel`` allowance (lazily)."""
        groups = self.admission_order.array_groups()
        if not groups:
            yield from candidates
            return
        running: dict[str, int] = {}
        for job_id in self.supervisor.holders:
            spec = self._index.get(job_id)
            if spec is not None and spec.array_group_id:
                running[spec.array_group_id] = running.get(spec.array_group_id, 0) + 1
        for request in candidates:
            group = groups.get(request.job_id)
            if group is not None:
                group_id, limit = group
                if running.get(group_id, 0) >= limit:
                    continue
                running[group_id] = running.get(group_id, 0) + 1
            yield request

    def _limit_quotas(self, candidates: Iterator[Request]) -> Iterator[Request]:
        """Multi-user mode: skip jobs whose owner is at a quota (lazily); a job with no
        trusted owner never starts."""
        quotas = self._quotas
        if quotas is None:
            yield from candidates
            return
        for job_id in [j for j in quotas.waiting if not self._index.is_pending(j)]:
            quotas.waiting.pop(job_id, None)
        holders = []
        for job_id in self.supervisor.holders:
            owner, spec = quotas.owner_of(job_id), self._index.get(job_id)
            if owner is not None:
                holders.append(Holder(owner, job_id, spec.cpus if spec is not None else 1))
        load = load_of(holders)
        for request in candidates:
            owner = quotas.owner_of(request.job_id)
            if owner is None:
                continue
            reason = quotas.policy.blocker(owner, request.cpus, load)
            if reason is not None:
                quotas.waiting[request.job_id] = reason
                continue
            quotas.waiting.pop(request.job_id, None)
            load[owner] = load.get(owner, OwnerLoad()).plus(request.cpus)
            yield request

    def _check_program(self, job_id: str) -> tuple[bool, ProgramStatus | None]:
        """(may launch, dispatch-time probe) for a chosen job; a refusal fails it (§3.4).
        A job bound to a runtime generation that no longer verifies fails too."""
        spec = self._index.get(job_id)
        if spec is not None and spec.runtime_generation is not None:
            bound = spec.runtime_generation
            problem = generation_problem(bound.root, bound.digest)
            if problem is not None:
                self._fail_pending(
                    job_id,
                    f"bound runtime generation {bound.digest[:12]} unavailable: {problem}; "
                    "command not started",
                )
                return False, None
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

    def _cores_for(self, job_id: str, taken: list[tuple[int, ...]]) -> list[int] | None:
        """The cores to pin a job to (disjoint from the running jobs' and from ``taken``,
        the sets this pass already chose, while cores suffice), or None when affinity is
        off."""
        available = self._affinity_cores()
        spec = self._index.get(job_id)
        if not available or spec is None:
            return None
        return choose_cores(spec.cpus, available, [*self.supervisor.cores_in_use(), *taken])

    def _claim_group(
        self, ready: list[tuple[str, ProgramStatus | None]]
    ) -> tuple[list[tuple[JobSpec, ProgramStatus | None]], BaseException | None]:
        """Claim every ready job as one group commit (all durable before any launch):
        the claims that moved, in order, with their programs, and the first error that
        must stop the pass — a StorageError (the loop then holds dispatch until the state
        root takes writes) or an unexpected one; the caller launches what was claimed
        before raising it."""
        taken: list[tuple[int, ...]] = []
        claims = []
        for job_id, program in ready:
            cores = self._cores_for(job_id, taken)
            if cores:
                taken.append(tuple(cores))
            claims.append((job_id, str(self.ctx.paths.workdir(job_id)), program, cores))
        out = []
        error: BaseException | None = None
        for (job_id, program), moved in zip(ready, self.lifecycle.claim_group(claims), strict=True):
            if isinstance(moved, StorageError):
                error = error or moved
            elif isinstance(moved, VqError):
                log.warning("cannot claim job %s: %s", job_id, moved.message)
            elif isinstance(moved, BaseException):
                error = error or moved
            elif moved.changed:
                out.append((moved.spec, program))
        return out, error

    def _launch(self, spec: JobSpec, program: ProgramStatus | None = None) -> bool:
        """Send the launch; the job holds its budget from now on. The answer arrives
        later through the supervisor's queue and is applied by :meth:`apply_launch`."""
        executor = self.executors.local  # candidates are local (partitioned)
        env = job_environment(
            self._base_env,
            spec,
            str(self.ctx.paths.workdir(spec.id)),
            program,
            self._after_workspaces(spec),
        )
        crash_point("dispatch_after_claim")
        try:
            # The answer is queued for the loop, so tracking right after sending is safe.
            executor.launch(
                spec,
                env,
                effective_mem_mb(spec.mem_mb, self.ctx.caps),
                self.supervisor.on_launch_result,
            )
        except StorageError as exc:
            # Nothing was sent: the claim returns to the queue (a write the supervisor
            # retries until the state root takes it) and the loop holds dispatch.
            self.supervisor.unsent(spec, f"not launched ({exc.message}); back in the queue")
            raise
        except VqError as exc:
            self._fail_dispatch(spec.id, f"launch failed: {exc.message}")
            return False
        crash_point("dispatch_after_send")
        self.supervisor.track(spec, None, None, None, orphan=False)
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
        spec = self.lifecycle.record_launch(
            job_id, launched.pid, launched.pgid, launched.start_ticks
        )
        handle = JobHandle(job_id, launched.pgid, launched.start_ticks)
        if spec.is_terminal and self.executors.local.cancel(handle):
            self.supervisor.start_grace(job_id)  # killed while it was being launched

    def _requeue(self, job_id: str, reason: str) -> None:
        """RUNNING → PENDING for a claim whose launch was provably never sent."""
        self.lifecycle.requeue_unlaunched(job_id, reason)
        log.warning("job %s: %s", job_id, reason)

    def _fail_dispatch(self, job_id: str, reason: str) -> None:
        moved = self.lifecycle.fail_dispatch(job_id, reason)
        if moved.changed:
            log.warning("job %s: %s", job_id, reason)
        else:
            log.info("job %s: %s (it was already %s)", job_id, reason, moved.spec.state.value)
