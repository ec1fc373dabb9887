"""The executor seam: "run this claimed job somewhere and tell me what happened".

An executor owns everything that differs in *how* a job runs: starting it, observing it
(its durable outcome, liveness, resource samples), cancelling it (SIGTERM now, a forced
stop after the grace), suspending and resuming it, and recovering it after a restart
(reattach, or classify what is left behind). Everything else — admission, state
transitions, retries, terminal bookkeeping — is shared and lives above this seam.

Two protocols split what the daemon needs of any backend from the local machinery:

* :class:`JobControl`: what the kill, pause, resume and cleanup services ask of the
  executor of ANY job (cancel, suspend, resume, still running, started, check
  pausable). :class:`vq.executors.registry.ExecutorRegistry` selects it by the spec's
  ``scheduler_target``: the local executor, or a scheduler lane's control (which the
  daemon answers from its loop);
* :class:`Executor`: the local executor's own machinery (launch, the collector's exit
  code and spawn failure, OOM verdicts, lost launches, fencing, sampling, leak reaping,
  the recovery census), used only where the daemon deals with local jobs. A scheduler
  lane (``executors/scheduler/``) is not an Executor: it claims, submits, observes and
  recovers its own jobs through the one lifecycle writer.

A remote vq daemon is neither: the remote queue owns its jobs.

Contracts every implementation keeps:

* ``launch`` never blocks on the job; its answer arrives through ``reply`` (possibly on
  another thread) as one :class:`LaunchResult`. An error raised by ``launch`` itself is
  a dispatch failure: nothing ran.
* ``exit_code`` is the durable authority for the command's exit code; ``spawn_failure``
  says the command never started (so its exit code is not the payload's).
* ``cancel``, ``suspend``, ``resume`` and ``force_stop`` act only on a job whose identity
  is proven (never on a reused pid) and report whether they reached it.
* ``still_running`` answers the same identity-proven question for many attempts at
  once, from any process (the liveness a finished job's cleanup checks).
* ``watcher_alive`` says whether the attempt can still report its own end (the local
  collector, which leads the job's group); ``find_lost_launch`` finds an attempt whose
  launch answer was lost; ``fence_unstarted`` proves, once and for good, that an
  attempt's command never started (so its claim may return to the queue).

:class:`HostExecutor` adds what a daemon starts and stops for an executor whose jobs run
on this host (its launcher, the isolation probe, a health check). The daemon talks to
executors only through these two protocols; only its composition root
(``daemon/compose.py``) knows the local executor's class
(``tests/architecture/test_seams.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from vq.domain.spec import JobSpec
from vq.errors import VqError

from .cgroups import CgroupMode
from .launch import Launched
from .sampling import GroupUsage

__all__ = [
    "AdoptingEngine",
    "Engine",
    "Executor",
    "HostExecutor",
    "JobControl",
    "JobHandle",
    "LaunchResult",
    "NoExecutor",
    "Recovered",
    "RecoveryKind",
]


class NoExecutor(VqError):
    """No executor is configured for a spec's execution target. ``parked``: the target
    is a lane a reload removed; a PENDING job waits for it instead of failing."""

    default_reference = "no-executor"

    def __init__(self, message: str, *, hint: str | None = None, parked: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.parked = parked


@dataclass(frozen=True)
class JobHandle:
    """What an executor needs to find a running attempt again: the job and the identity
    of its process group (recorded on the spec once the launch is confirmed)."""

    job_id: str
    pgid: int | None
    start_ticks: int | None

    @classmethod
    def of(cls, spec: JobSpec) -> JobHandle:
        return cls(spec.id, spec.pgid, spec.pid_start_time)


@dataclass(frozen=True)
class LaunchResult:
    """The answer to an asynchronous launch."""

    job_id: str
    launched: Launched | None
    error: str | None
    sent: bool = True  # False: the request never reached the executor (nothing ran)


class RecoveryKind(enum.Enum):
    REATTACHED = "reattached"  # a live attempt that is provably the job's
    ENDED = "ended"  # nothing runs any more; ``exit_code``/``spawn_failure`` say how
    #: The command provably never started, and now never will (the attempt is fenced):
    #: the claim may return to PENDING.
    NEVER_STARTED = "never-started"


@dataclass(frozen=True)
class Recovered:
    """What a restart found for one RUNNING/SUSPENDED spec."""

    kind: RecoveryKind
    handle: JobHandle
    exit_code: int | None = None
    spawn_failure: str | None = None
    #: True when the handle was found without the spec recording it (crash between the
    #: claim and the pid record): the caller records it.
    found_unrecorded: bool = False
    #: The pid a job scope named as its MainPID when that is not the job's (reattach
    #: refused; the group was reaped and the outcome comes from the marker).
    scope_conflict: int | None = None


class JobControl(Protocol):
    """What the kill, pause, resume and cleanup services need of the executor of ANY
    job, local or a scheduler lane's (the daemon answers a lane's from its loop).

    Each call acts only on the job's own attempt and reports whether it reached it; a
    refusal that must reach the user is raised as :class:`~vq.errors.Conflict`.
    """

    @property
    def name(self) -> str: ...

    def cancel(self, handle: JobHandle) -> bool:
        """Stop the attempt (SIGTERM to the local group, ``scancel``/``qdel`` queued for
        a lane's job); True when the request reached it."""
        ...

    def suspend(self, handle: JobHandle) -> bool: ...

    def resume(self, handle: JobHandle) -> bool: ...

    def running(self, handle: JobHandle) -> bool:
        """Whether the attempt is still there (a local group, a lane job still tracked)."""
        ...

    def still_running(self, handles: Iterable[JobHandle]) -> set[str]:
        """The job ids among ``handles`` whose attempt provably still runs, for any
        process, daemon or not (``vq cleanup`` leaves such a finished job's files alone).
        Proven: the local executor counts a live member of the recorded group only when
        the group is the job's (leader start ticks, or ``VQ_JOB_ID`` in a member's
        environment), never a reused pgid; one answer for many handles (one scan)."""
        ...

    def started(self, spec: JobSpec) -> bool:
        """Whether the claimed job has a launched identity to pause (a process group,
        a scheduler job id)."""
        ...

    def check_pausable(self, spec: JobSpec) -> None:
        """Raise :class:`~vq.errors.Conflict` (with a hint) when this job cannot be
        paused now; called before the SUSPENDED intent is written."""
        ...


class Engine(Protocol):
    """What the daemon loop drives of a backend, the same for every one: the local
    dispatcher's engine (claim and launch on this host) and each scheduler lane (claim,
    submit, observe). The loop ticks one list of engines; each engine claims the
    pending jobs aimed at it and moves them through the one lifecycle writer."""

    @property
    def name(self) -> str: ...

    def tick(self) -> None:
        """One pass on the loop: claim what may start, advance due steps, observe."""
        ...

    def next_deadline(self) -> float | None:
        """Seconds until this engine has work again (the loop's wait); None when only
        an outside event (a launch answer, a worker answer) can give it work."""
        ...

    def close(self) -> None:
        """The daemon stops: release the engine's machinery (running jobs go on)."""
        ...


class AdoptingEngine(Engine, Protocol):
    """An engine that takes over its jobs found on disk itself (a scheduler lane); the
    local engine's jobs are taken over spec by spec by the daemon's recovery pass, which
    then asks every adopting engine to :meth:`adopt` its own."""

    def adopt(self) -> None:
        """Track every job of this engine found on disk (once; on the loop)."""
        ...


class Executor(JobControl, Protocol):
    """The local way of running jobs (see the module contracts): the job control every
    executor gives, plus launching and observing this host's process groups."""

    name: str

    # --- launch ------------------------------------------------------------------------
    def launch(
        self,
        spec: JobSpec,
        env: Mapping[str, str],
        mem_mb: int | None,
        reply: Callable[[LaunchResult], None],
    ) -> None: ...

    # --- observe -----------------------------------------------------------------------
    def exit_code(self, job_id: str) -> int | None: ...

    def spawn_failure(self, job_id: str) -> str | None: ...

    def oom_killed(self, job_id: str) -> bool:
        """Whether the attempt's own memory cgroup OOM-killed its command (multi-user
        mode's privilege drop: the kernel's verdict, read from the attempt's receipt)."""
        ...

    def watcher_alive(self, handle: JobHandle) -> bool:
        """Whether the process that supervises the attempt and records its end still
        runs (local: the collector leading the job's group). Once it is gone the attempt
        cannot report its end; the durable marker says whether it had."""
        ...

    def find_lost_launch(self, job_id: str) -> Launched | None:
        """The attempt of a launch whose answer never arrived (the launcher died with
        the request in flight), found by the job's own marks; None when none runs."""
        ...

    def fence_unstarted(self, spec: JobSpec) -> bool:
        """Prove that the claimed attempt's command never started and now never will;
        False when that cannot be proven (the ordinary outcome rules apply then)."""
        ...

    def sample(self, handles: Iterable[JobHandle]) -> dict[str, GroupUsage]: ...

    # --- control -----------------------------------------------------------------------
    def force_stop(self, handle: JobHandle) -> bool: ...

    # --- after a restart -----------------------------------------------------------------
    def begin_recovery(self) -> None: ...

    def end_recovery(self) -> None: ...

    def recover(self, spec: JobSpec) -> Recovered: ...

    def may_have_leaked(self, pgid: int | None) -> bool:
        """False only when :meth:`reap_leak` of a finished job that recorded ``pgid``
        would certainly find nothing (so its spec need not be read to ask)."""
        ...

    def reap_leak(self, spec: JobSpec) -> bool: ...

    def released(self, job_id: str) -> None: ...


class HostExecutor(Executor, Protocol):
    """An executor whose jobs run on this host, with machinery the daemon drives: a
    launcher process started with the daemon, restarted when it dies (its attempts
    become orphans, polled through :meth:`Executor.watcher_alive`) and closed at the
    end (running jobs go on), and the probe that decides how jobs are isolated."""

    def start(self) -> None:
        """Start the launcher (a no-op while it runs)."""
        ...

    def restart_if_dead(self) -> bool:
        """Start a launcher that died; True if it had."""
        ...

    def close(self) -> None:
        """Stop the launcher; running jobs go on."""
        ...

    def probe_scopes(self) -> CgroupMode:
        """Decide once how later launches are isolated (§5.2), and say why."""
        ...

    def launcher_status(self, timeout: float) -> tuple[bool, str]:
        """Whether the launcher answers within ``timeout`` seconds, and a one-line detail."""
        ...
