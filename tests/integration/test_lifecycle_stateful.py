"""A Hypothesis state machine over the job lifecycle: the real store, real processes.

The daemon's components are driven *in process* (no ``vq daemon`` subprocess, no RPC,
no signal handlers), wired exactly as :class:`vq.daemon.app.Daemon` wires them: a
:class:`ServiceContext`, a :class:`JobIndex`, a :class:`Supervisor`, a real
:class:`ForkServer` whose collectors run real commands, a :class:`Watchdog` with the
default settings and a :class:`Dispatcher`. One iteration of the daemon loop is the
``tick`` rule. The RPC handlers' bookkeeping (index upserts, ``start_grace`` after a
signalled kill) is reproduced by the kill/pause/resume rules.

``daemon_restart`` simulates ``kill -9`` of the daemon: the fork server is closed (its
collectors keep running, exactly as after a daemon crash), every in-memory object is
dropped and rebuilt, and the startup recovery pass (§4.7) runs before the index loads.

Invariants, checked after every rule from what is on disk and in ``/proc``:

1. terminal states are sticky (first-seen terminal state and its attempt never change);
2. every RUNNING/SUSPENDED spec is held by the current supervisor with the same pid/pgid
   (both still None while the launch answer is in flight: launches are asynchronous,
   but the holder exists from the claim on), and no such holder is in a kill grace;
3. the reservations equal the sum over holders and stay within the caps; right after a
   ``tick``, every holder is justified: its job is RUNNING/SUSPENDED on disk, or it is
   terminal and its group is still alive and owed a running grace. Collector exits and
   launch answers reach the loop asynchronously, so an unjustified holder fails the
   test only when a tick that started :data:`LAG_SECONDS` after it was first seen has
   not resolved it;
4. every spec file parses, and every line of every ``events.jsonl`` parses;
5. a job never has two live process groups (non-zombie processes whose environment
   carries ``VQ_JOB_ID=<id>``, grouped by pgid);
6. outcome oracle: each job's command has a known natural exit code, so COMPLETED only
   for commands that exit 0, FAILED only with that exit code (or none when the test
   killed the collector), KILLED only for jobs the test killed, TIME_EXCEEDED only with
   a wall-time limit that really elapsed, ABORTED_BY_QUEUE only for a job whose
   collector the test killed and only after a restart; retry counts stay within budget
   and never decrease; and after a tick no RUNNING job is over its wall-time limit
   (active time since launch or reattachment, minus the pauses the test made);
7. every live job process group is held by the current supervisor; one that is not
   (leaked by recovery, or left behind by a release) fails the test once it has been
   seen for :data:`LAG_SECONDS` (a group SIGKILLed a moment ago is still dying).

Operator conflicts are checked too: kill, pause and resume may only be refused
(``Conflict``) when the state on disk justifies it.

Time: this runs real processes in real time, so ``wait_a_bit`` sleeps (≤ 0.2 s) to let
them progress; no check waits for anything. The spec datetime clock is the real clock
plus an offset that ``advance_clock`` moves forward, so a retry's 30 s backoff can elapse
within one example (watchdog wall time is monotonic and not affected).

The kill grace is 10 s in production. Here the supervisor gets :data:`GRACE_SECONDS`
(0.5 s) so that a SIGTERM-ignoring job is escalated to SIGKILL and its reservation
released within an example of a few seconds; otherwise almost no example would ever see
the end of a grace, and the grace-expiry path (§4.4) would go unexercised.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from vq.config.settings import WatchdogSettings
from vq.daemon.dispatch import Dispatcher
from vq.daemon.index import JobIndex
from vq.daemon.recovery import recover
from vq.daemon.supervisor import Holder, Supervisor
from vq.daemon.watchdog import Watchdog
from vq.domain.admission import Caps
from vq.domain.spec import JobSpec, utcnow
from vq.domain.states import ACTIVE, JobState
from vq.errors import Conflict
from vq.executors import procs
from vq.executors.identity import group_is_job
from vq.executors.local import LocalExecutor
from vq.executors.registry import ExecutorRegistry
from vq.paths import StatePaths
from vq.protocol.messages import SubmitParams
from vq.services.context import ServiceContext
from vq.services.kill import kill_job
from vq.services.lifecycle import Lifecycle
from vq.services.pause import pause_job, resume_job
from vq.services.submit import submit

CAPS = Caps(max_jobs=3, max_cpus=8, max_mem_mb=4096)
#: The kill grace used here instead of the 10 s production default (see module docstring).
GRACE_SECONDS = 0.5
#: Slack for comparing spec timestamps (datetime clock) with watchdog time (monotonic).
CLOCK_SLACK_SECONDS = 0.05
#: How long an asynchronous effect may take to show: a collector exit or launch answer to
#: reach the loop, a SIGKILLed process to die. Far above what they take; far below a leak.
LAG_SECONDS = 1.0


@dataclass(frozen=True)
class Kind:
    """A job command with a known natural exit code."""

    name: str
    argv: tuple[str, ...]
    natural_exit: int


KINDS = (
    Kind("quick", ("sleep", "0.05"), 0),
    Kind("short", ("sleep", "0.3"), 0),
    Kind("fail", ("sh", "-c", "exit 3"), 3),
    Kind("long", ("sleep", "30"), 0),
    # Ignores SIGTERM (the ignored disposition is inherited by sleep): only the SIGKILL
    # at the end of the grace ends it, after its collector died to the SIGTERM.
    Kind("stubborn", ("sh", "-c", "trap '' TERM; sleep 30"), 0),
)


@dataclass(frozen=True)
class Submitted:
    kind: Kind
    wall_time_seconds: int | None
    retry_max: int


JobArgs = tuple[Kind, int | None, int, int, int | None]
JOB_ARGS: st.SearchStrategy[JobArgs] = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from([None, 1]),  # wall_time_seconds
    st.sampled_from([0, 1]),  # retry_max
    st.sampled_from([1, 2, 4]),  # cpus
    st.sampled_from([None, 1024, 2048]),  # mem_mb
)


class InProcessDaemon:
    """The components of one daemon instance, wired as ``Daemon.__init__`` wires them.

    Left out on purpose: the RPC server and signal handlers (the rules call the services
    directly), the host memory-pressure guard (it would pause jobs depending on what
    else runs on the machine), operator holds (drain, throttle: none is set here),
    cgroup scopes (direct mode, which is also what the daemon
    falls back to without a user systemd), and the ``job_ended`` listeners
    (notifications and reruns; no job here asks for them).
    """

    def __init__(self, root: Path, now: Callable[[], datetime]) -> None:
        self.ctx = ServiceContext(StatePaths(root), CAPS, now=now)
        self.index = JobIndex(self.ctx.store)
        self.lifecycle = Lifecycle(self.ctx, on_change=self.index.upsert)
        self.executor = LocalExecutor(self.ctx.paths)
        self.supervisor = Supervisor(
            self.ctx, self.lifecycle, self.executor, grace_seconds=GRACE_SECONDS
        )
        self.forkserver = self.executor.attach_fork_server(self.supervisor.on_collector_exit)
        self.watchdog = Watchdog(self.ctx, self.supervisor, self.index.get, WatchdogSettings())
        self.dispatcher = Dispatcher(
            self.ctx,
            self.supervisor,
            ExecutorRegistry(self.executor),
            self.index,
            self.lifecycle,
            dict(os.environ),
        )
        # Launches are asynchronous: their answers reach the loop through the supervisor.
        self.supervisor.launch_handler = self.dispatcher.apply_launch

    def start(self) -> None:
        """``Daemon.run`` up to the loop: fork server, recovery pass, index load."""
        self.forkserver.start()
        self.report = recover(self.ctx, self.supervisor, threading.Event())
        self.index.load(self.report.untouched)

    def tick(self) -> None:
        """One iteration of ``Daemon._loop`` (minus RPC calls, holds, pressure, rescans)."""
        if not self.forkserver.alive():
            self.supervisor.orphan_all()
            self.forkserver.start()
        self.supervisor.process()
        self.watchdog.check()
        self.dispatcher.run_pass()


def live_job_groups(job_ids: set[str]) -> dict[str, set[int]]:
    """For each job id: pgids of live (non-zombie) processes whose environ names it."""
    wanted = {f"VQ_JOB_ID={job_id}".encode(): job_id for job_id in job_ids}
    groups: dict[str, set[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                env = handle.read().split(b"\0")
        except OSError:
            continue
        hits = [wanted[item] for item in env if item in wanted]
        if not hits:
            continue
        stat = procs.read_stat(int(entry))
        if stat is None or not stat.alive:
            continue
        for job_id in hits:
            groups.setdefault(job_id, set()).add(stat.pgid)
    return groups


class LifecycleMachine(RuleBasedStateMachine):
    jobs = Bundle("jobs")

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="vq-lifecycle-"))
        self.clock_offset = timedelta(0)
        self.daemon = InProcessDaemon(self.root, self._now)
        try:
            self.daemon.start()
        except BaseException:  # no teardown() follows a failed __init__
            self.daemon.forkserver.close()
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.submitted: dict[str, Submitted] = {}
        self.first_terminal: dict[str, tuple[JobState, datetime | None]] = {}
        self.retry_counts: dict[str, int] = {}
        self.killed: set[str] = set()
        self.collector_killed: set[str] = set()
        self.restarts = 0
        #: Monotonic start of the daemon tick the last rule ended with; None if it was no tick.
        self.tick_started: float | None = None
        #: Operator pauses per job: [start, end] in monotonic seconds; end None while paused.
        self.pauses: dict[str, list[list[float | None]]] = {}
        #: Holders found unjustified at tick checks: job id -> (first problem, first seen).
        self.unjustified: dict[str, tuple[str, float]] = {}
        #: Live job groups no supervisor holds: (job id, pgid) -> first seen (monotonic).
        self.untracked_since: dict[tuple[str, int], float] = {}
        #: What happened, for failure messages: a failure here usually depends on timing,
        #: so Hypothesis's replay may not reproduce it (it then reports a Flaky error).
        self.history: list[str] = []
        self.last_states = ""
        self.started = time.monotonic()

    def _log(self, line: str) -> None:
        self.history.append(f"{time.monotonic() - self.started:7.3f}s {line}")

    def _now(self) -> datetime:
        return utcnow() + self.clock_offset

    @property
    def ctx(self) -> ServiceContext:
        return self.daemon.ctx

    def _read(self, job_id: str) -> JobSpec:
        return self.ctx.store.read(job_id)

    # --- rules ---------------------------------------------------------------------------
    @initialize(target=jobs, batch=st.lists(JOB_ARGS, min_size=1, max_size=3))
    def submit_some(self, batch: list[JobArgs]) -> MultipleResults[str]:
        """Start every example with work queued (rules are drawn uniformly otherwise)."""
        return multiple(*(self._submit(*args) for args in batch))

    @rule(target=jobs, args=JOB_ARGS)
    def submit(self, args: JobArgs) -> str:
        return self._submit(*args)

    def _submit(
        self, kind: Kind, wall: int | None, retry_max: int, cpus: int, mem_mb: int | None
    ) -> str:
        self.tick_started = None
        result = submit(
            self.ctx,
            SubmitParams(
                command=list(kind.argv),
                cpus=cpus,
                mem_mb=mem_mb,
                wall_time_seconds=wall,
                retry_max=retry_max,
            ),
        )
        self.daemon.index.upsert(result.spec)  # what the RPC handler's remember() does
        assert result.spec.state is JobState.PENDING
        assert not result.capacity_warnings
        self.submitted[result.spec.id] = Submitted(kind, wall, retry_max)
        self._log(
            f"submit {result.spec.id}: {kind.name} wall={wall} retry_max={retry_max} "
            f"cpus={cpus} mem_mb={mem_mb}"
        )
        return result.spec.id

    @rule(job=jobs)
    def kill(self, job: str) -> None:
        self.tick_started = None
        try:
            outcome = kill_job(self.ctx, job)
        except Conflict:
            self._log(f"kill {job}: Conflict")
            state = self._read(job).state
            assert state.is_terminal and state is not JobState.KILLED, (
                f"kill of {job} refused with Conflict while it is {state.value}"
            )
            return
        self.killed.add(job)
        self._log(f"kill {job}: from {outcome.previous.value}, signaled={outcome.signaled}")
        self.daemon.index.upsert(outcome.spec)
        assert outcome.spec.state is JobState.KILLED
        if outcome.signaled:  # the handler's call_soon(start_grace), run right away
            self.daemon.supervisor.start_grace(job)
        event(f"kill from {outcome.previous.value}")

    @rule(job=jobs)
    def pause(self, job: str) -> None:
        self.tick_started = None
        try:
            outcome = pause_job(self.ctx, job)
        except Conflict:
            self._log(f"pause {job}: Conflict")
            spec = self._read(job)
            starting = spec.state is JobState.RUNNING and spec.pgid is None  # launch in flight
            assert spec.state not in ACTIVE or starting, (
                f"pause of {job} refused while {spec.state.value} (pgid {spec.pgid})"
            )
            return
        self._log(f"pause {job}: changed={outcome.changed} signaled={outcome.signaled}")
        self.daemon.index.upsert(outcome.spec)
        assert outcome.spec.state is JobState.SUSPENDED
        if outcome.changed:
            started = outcome.spec.paused_monotonic_at
            assert started is not None
            self.pauses.setdefault(job, []).append([started, None])
            event("paused")

    @rule(job=jobs)
    def resume(self, job: str) -> None:
        self.tick_started = None
        try:
            outcome = resume_job(self.ctx, job)
        except Conflict:
            self._log(f"resume {job}: Conflict")
            spec = self._read(job)
            assert spec.state not in ACTIVE, f"resume of {job} refused while {spec.state.value}"
            return
        self._log(f"resume {job}: changed={outcome.changed} signaled={outcome.signaled}")
        self.daemon.index.upsert(outcome.spec)
        assert outcome.spec.state is JobState.RUNNING
        if outcome.changed:
            self._close_pause(job)  # a little late: overstates the pause, never understates
            event("resumed")

    @rule(job=jobs)
    def kill_collector(self, job: str) -> None:
        """``kill -9`` of the pid ``vq status`` shows (the collector), §4.4."""
        self.tick_started = None
        spec = self._read(job)
        if spec.state not in ACTIVE or spec.pid is None:
            return
        if not procs.matches_identity(spec.pid, spec.pid_start_time):
            return
        os.kill(spec.pid, signal.SIGKILL)
        self.collector_killed.add(job)
        self._log(f"kill -9 collector {spec.pid} of {job} ({spec.state.value})")
        event("collector killed")

    @rule(times=st.integers(min_value=1, max_value=4))
    def tick(self, times: int) -> None:
        for _ in range(times):
            self.tick_started = time.monotonic()
            self.daemon.tick()
        self._log(f"tick x{times}")

    @rule(seconds=st.floats(min_value=0.0, max_value=0.2))
    def wait_a_bit(self, seconds: float) -> None:
        self.tick_started = None
        time.sleep(seconds)
        self._log(f"wait {seconds:.3f}s")

    @rule(seconds=st.floats(min_value=0.0, max_value=0.2))
    def wait_then_tick(self, seconds: float) -> None:
        time.sleep(seconds)
        self.tick_started = time.monotonic()
        self.daemon.tick()
        self._log(f"wait {seconds:.3f}s, tick")

    @rule()
    def advance_clock(self) -> None:
        """Jump the datetime clock past the first retry backoff (30 s)."""
        self.tick_started = None
        self.clock_offset += timedelta(seconds=61)
        self._log("clock +61s")

    @rule()
    def daemon_restart(self) -> None:
        """kill -9 of the daemon, then a fresh start with the recovery pass."""
        self.tick_started = None
        self.daemon.forkserver.close()  # collectors keep running, as after a crash
        self.daemon = InProcessDaemon(self.root, self._now)
        self.daemon.start()
        self.restarts += 1
        self.unjustified.clear()  # a new supervisor: lag bookkeeping starts over
        report = self.daemon.report
        self._log(
            f"daemon restart: reattached {report.reattached}, finished {report.finished}, "
            f"aborted {report.aborted}, reaped leaks {report.reaped_leaks}"
        )
        event("daemon restarted")

    def _close_pause(self, job_id: str) -> None:
        intervals = self.pauses.get(job_id)
        if intervals and intervals[-1][1] is None:
            intervals[-1][1] = time.monotonic()

    def _paused_within(self, job_id: str, start: float, end: float) -> float:
        """Seconds of operator pause that overlap [start, end]."""
        total = 0.0
        for began, ended in self.pauses.get(job_id, []):
            assert began is not None
            stop = end if ended is None else min(ended, end)
            total += max(0.0, stop - max(began, start))
        return total

    # --- invariants ----------------------------------------------------------------------
    @invariant()
    def lifecycle_invariants(self) -> None:
        try:
            self._check_all()
        except AssertionError as exc:
            steps = "\n".join(self.history[-80:])
            raise AssertionError(f"{exc}\n--- what happened (last 80 entries):\n{steps}") from None

    def _check_all(self) -> None:
        scan = self.ctx.store.scan()
        assert not scan.quarantined, f"unreadable specs: {scan.quarantined}"  # 4
        specs = scan.specs
        assert set(self.submitted) <= set(specs), "a submitted spec disappeared"
        for job_id, spec in specs.items():
            if spec.state is not JobState.SUSPENDED:
                self._close_pause(job_id)
            self._check_sticky(spec)  # 1
            self._check_oracle(spec)  # 6
            self._check_events(job_id)  # 4
        self._check_held(specs)  # 2
        self._check_budget()  # 3 (always)
        if self.tick_started is not None:
            self._check_holders(specs, self.tick_started)  # 3 (after a tick)
            self._check_wall_time_enforced(specs, self.tick_started)  # 6 (after a tick)
        self._check_processes(specs)  # 5, 7
        states = " ".join(
            f"{job_id}={spec.state.value}" + (f"/pg{spec.pgid}" if spec.pgid else "")
            for job_id, spec in sorted(specs.items())
        )
        if states != self.last_states:
            self.last_states = states
            self._log(f"  now: {states}")

    def _check_sticky(self, spec: JobSpec) -> None:
        first = self.first_terminal.get(spec.id)
        if first is None:
            if spec.state.is_terminal:
                self.first_terminal[spec.id] = (spec.state, spec.started_at)
                event(f"terminal {spec.state.value}")
            return
        state, started_at = first
        assert spec.state is state, (
            f"job {spec.id} was {state.value} and is now {spec.state.value}: "
            "terminal states must be sticky"
        )
        assert spec.started_at == started_at, f"terminal job {spec.id} was started again"

    def _check_oracle(self, spec: JobSpec) -> None:
        sub = self.submitted[spec.id]
        natural = sub.kind.natural_exit
        job = f"job {spec.id} ({sub.kind.name}, wall={sub.wall_time_seconds})"
        previous = self.retry_counts.get(spec.id, 0)
        assert previous <= spec.retry_count <= spec.retry_max, (
            f"{job}: retry_count {previous} -> {spec.retry_count} (retry_max {spec.retry_max})"
        )
        self.retry_counts[spec.id] = spec.retry_count
        if spec.retry_count > previous:
            event("attempt retried")
        if spec.state is JobState.PENDING and spec.retry_count:
            assert spec.not_before is not None, f"{job}: retried without a backoff"
        if spec.state in ACTIVE and spec.retry_count:
            event("retry running")
        state = spec.state
        if state is JobState.COMPLETED:
            assert natural == 0 and spec.exit_code == 0, f"{job} COMPLETED: {spec.exit_code}"
        elif state is JobState.FAILED:
            if spec.exit_code is None:
                assert spec.id in self.collector_killed, (
                    f"{job} FAILED without an exit code: {spec.failure_reason}"
                )
            else:
                assert spec.exit_code == natural != 0, (
                    f"{job} FAILED with exit code {spec.exit_code}: {spec.failure_reason}"
                )
        elif state is JobState.KILLED:
            assert spec.id in self.killed, f"{job} KILLED but never killed"
        elif state is JobState.TIME_EXCEEDED:
            wall = sub.wall_time_seconds
            assert wall is not None, f"{job} TIME_EXCEEDED without a limit"
            assert spec.started_at is not None and spec.finished_at is not None
            elapsed = (spec.finished_at - spec.started_at).total_seconds()
            if spec.retry_count == 0:  # pauses of an earlier attempt would not count
                elapsed -= spec.paused_seconds_total
            assert elapsed >= wall - CLOCK_SLACK_SECONDS, (
                f"{job} TIME_EXCEEDED after {elapsed:.2f}s of active time"
            )
        elif state is JobState.ABORTED_BY_QUEUE:
            assert spec.id in self.collector_killed and self.restarts, (
                f"{job} ABORTED_BY_QUEUE: {spec.failure_reason}"
            )
        else:
            assert not state.is_terminal, f"{job} ended {state.value}: {spec.failure_reason}"

    def _check_wall_time_enforced(self, specs: dict[str, JobSpec], tick_started: float) -> None:
        """Wall time is enforced on time: after a tick, no RUNNING job is over its limit.

        The tick's watchdog pass ran after ``tick_started``; a job it left RUNNING had at
        most ``wall_time_seconds`` of active time then (attempt epoch — launch or
        reattachment — minus the operator pauses since, as this test timed them).
        """
        for job_id, holder in self.daemon.supervisor.holders.items():
            spec = specs.get(job_id)
            if spec is None or spec.state is not JobState.RUNNING or not spec.wall_time_seconds:
                continue
            if holder.collector_done or holder.grace_deadline is not None:
                continue
            paused = self._paused_within(job_id, holder.epoch, tick_started)
            active = tick_started - holder.epoch - paused
            assert active <= spec.wall_time_seconds + CLOCK_SLACK_SECONDS, (
                f"job {job_id} is still RUNNING after {active:.2f}s of active wall time "
                f"(limit {spec.wall_time_seconds}s; {paused:.2f}s paused since its epoch; "
                f"paused_seconds_total {spec.paused_seconds_total:.2f}, "
                f"holder paused_base {holder.paused_base:.2f}, restarts {self.restarts})"
            )

    def _check_events(self, job_id: str) -> None:
        path = self.ctx.paths.events(job_id)
        try:
            lines = path.read_bytes().splitlines()
        except FileNotFoundError:
            return
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise AssertionError(f"{path}:{number}: torn or corrupt line {line!r}") from exc
            assert isinstance(record, dict) and record.get("jobid") == job_id, (
                f"{path}:{number}: {line!r}"
            )

    def _check_held(self, specs: dict[str, JobSpec]) -> None:
        holders = self.daemon.supervisor.holders
        for job_id, spec in specs.items():
            if spec.state not in ACTIVE:
                continue
            holder = holders.get(job_id)
            assert holder is not None, (
                f"job {job_id} is {spec.state.value} on disk but no supervisor holds it "
                f"(restarts so far: {self.restarts})"
            )
            assert (holder.pid, holder.pgid) == (spec.pid, spec.pgid), (
                f"job {job_id}: holder pid/pgid {holder.pid}/{holder.pgid}, "
                f"spec {spec.pid}/{spec.pgid}"
            )
            assert holder.grace_deadline is None and not holder.collector_done, (
                f"job {job_id} is {spec.state.value} but its holder is ending: {holder}"
            )

    def _check_budget(self) -> None:
        supervisor = self.daemon.supervisor
        usage = supervisor.usage()
        holders = list(supervisor.holders.values())
        assert usage.jobs == len(holders)
        assert usage.cpus == sum(h.cpus for h in holders) >= 0
        assert usage.mem_mb == sum(h.mem_mb for h in holders) >= 0
        assert CAPS.max_jobs is not None and CAPS.max_cpus is not None
        assert CAPS.max_mem_mb is not None
        assert usage.jobs <= CAPS.max_jobs, f"{usage} exceeds {CAPS}"
        assert usage.cpus <= CAPS.max_cpus, f"{usage} exceeds {CAPS}"
        assert usage.mem_mb <= CAPS.max_mem_mb, f"{usage} exceeds {CAPS}"

    def _holder_problem(self, holder: Holder, spec: JobSpec | None, now: float) -> str | None:
        if spec is None:
            return "its spec is gone"
        if holder.pgid is None:  # the launch answer has not been applied yet
            if now - holder.epoch < LAG_SECONDS:
                return None
            return f"{spec.state.value}, its launch answer never arrived"
        if spec.state in ACTIVE:
            return None
        if not spec.state.is_terminal:
            return f"its job is {spec.state.value}"
        alive = bool(procs.live_group_members(holder.pgid))
        grace = holder.grace_deadline
        if grace is not None and now >= grace:
            return f"{spec.state.value}, grace expired {now - grace:.2f}s ago, group alive={alive}"
        if not alive and grace is None:
            return f"{spec.state.value}, its group is gone and it is owed no grace"
        if alive and grace is None:
            return f"{spec.state.value}, its group lives but no grace runs"
        return None

    def _check_holders(self, specs: dict[str, JobSpec], tick_started: float) -> None:
        """Invariant 3 after a tick. Collector exits and launch answers reach the loop
        asynchronously, so a problem fails the test only if it is still there after a
        tick that started :data:`LAG_SECONDS` after the problem was first seen."""
        now = time.monotonic()
        seen: dict[str, tuple[str, float]] = {}
        for job_id, holder in self.daemon.supervisor.holders.items():
            if holder.grace_deadline is not None:
                event("holder in a kill grace after a tick")
            problem = self._holder_problem(holder, specs.get(job_id), now)
            if problem is None:
                continue
            first_problem, first_seen = self.unjustified.get(job_id, (problem, now))
            assert tick_started - first_seen < LAG_SECONDS, (
                f"job {job_id}: supervisor holder unjustified for {now - first_seen:.2f}s "
                f"across ticks: first {first_problem!r}, now {problem!r}; {holder}"
            )
            seen[job_id] = (first_problem, first_seen)
        self.unjustified = seen

    def _check_processes(self, specs: dict[str, JobSpec]) -> None:
        """Invariants 5 and 7: one live group per job, and every live group accounted for.

        A live group is accounted for when the current supervisor holds its job (with that
        pgid, or with the launch answer still pending). Anything else — a group of an
        ended job nobody holds, or one recovery did not reattach — may only be a group
        SIGKILLed a moment ago, so it fails the test once seen for :data:`LAG_SECONDS`.
        """
        now = time.monotonic()
        holders = self.daemon.supervisor.holders
        untracked: dict[tuple[str, int], float] = {}
        for job_id, pgids in live_job_groups(set(self.submitted)).items():
            assert len(pgids) <= 1, f"job {job_id} has live process groups {sorted(pgids)}"
            holder = holders.get(job_id)
            for pgid in pgids:
                if holder is not None and holder.pgid in (None, pgid):
                    continue
                key = (job_id, pgid)
                first_seen = self.untracked_since.get(key, now)
                spec = specs.get(job_id)
                assert now - first_seen < LAG_SECONDS, (
                    f"job {job_id} ({spec.state.value if spec else '?'}): its live process "
                    f"group {pgid} has not been held by the supervisor for "
                    f"{now - first_seen:.2f}s (holder: {holder}; restarts {self.restarts})"
                )
                untracked[key] = first_seen
        self.untracked_since = untracked

    # --- cleanup -------------------------------------------------------------------------
    def teardown(self) -> None:
        """SIGKILL every group of every job of this example, then remove the state root.

        Each step is guarded on its own: a failing step must never skip the kills (a
        paused job left behind would stay stopped forever). Groups are found three ways:
        live processes carrying ``VQ_JOB_ID`` (also an untracked group recovery missed),
        the supervisor's holders, and the specs (a stopped collector whose command
        already ended carries no ``VQ_JOB_ID``).
        """
        groups: set[int] = set()
        steps: list[Callable[[], object]] = [
            self.daemon.forkserver.close,
            self.daemon.supervisor.process,  # applies launch answers that were in flight
            lambda: groups.update(
                pgid for found in live_job_groups(set(self.submitted)).values() for pgid in found
            ),
            lambda: groups.update(
                h.pgid for h in self.daemon.supervisor.holders.values() if h.pgid is not None
            ),
            lambda: groups.update(
                spec.pgid
                for spec in self.ctx.store.scan().specs.values()
                if spec.pgid is not None and group_is_job(spec.id, spec.pgid, spec.pid_start_time)
            ),
        ]
        errors: list[BaseException] = []
        for step in steps:
            try:
                step()
            except Exception as exc:
                errors.append(exc)
        own_group = os.getpgid(0)
        for pgid in groups - {own_group}:
            if pgid > 1:
                procs.signal_group(pgid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)
        if errors:
            raise errors[0]


def _settings(examples: int, steps: int) -> settings:
    # No shrinking: a failure here depends on timing, so replays rarely reproduce it and
    # shrinking could burn minutes for nothing; the assertion message carries the
    # example's own timeline instead.
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )


def test_lifecycle_state_machine() -> None:
    """Bounded for ``make test``: about 10 s on two cores."""
    run_state_machine_as_test(LifecycleMachine, settings=_settings(15, 25))


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_lifecycle_state_machine_soak() -> None:
    """For ``make soak``: longer examples reach wall-time limits, graces and retries."""
    run_state_machine_as_test(LifecycleMachine, settings=_settings(200, 60))
