"""What a scheduler lane needs from the layers above it, as protocols.

The lane sits in the executor layer, below the services: it reaches the one lifecycle
writer (:class:`vq.services.lifecycle.Lifecycle`) and the spec store only through these
shapes, which the daemon fills in with the real objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from vq.dialects.submit_guard import GuardState
from vq.domain.events import EventKind
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.packing.slurm_rounds import RoundAnswer, Watched
from vq.paths import StatePaths
from vq.transport.runner import Runner

__all__ = [
    "LaneContext",
    "LaneLifecycle",
    "Moved",
    "PackRemoteFor",
    "PackRemotePort",
    "SpecReader",
]


class Moved(Protocol):
    """A lifecycle writer's answer: the spec on disk and whether its state moved."""

    @property
    def spec(self) -> JobSpec: ...

    @property
    def changed(self) -> bool: ...


class LaneLifecycle(Protocol):
    """The transitions a lane writes (all through the one lifecycle writer)."""

    def claim(self, job_id: str, *, workdir: str) -> Moved: ...

    def record_scheduler(
        self,
        job_id: str,
        fields: dict[str, Any],
        *,
        durable: bool = ...,
        event: EventKind | None = ...,
    ) -> JobSpec: ...

    def finish_attempt(self, job_id: str, exit_code: int | None) -> Moved: ...

    def scheduler_verdict(
        self, job_id: str, state: JobState, reason: str, exit_code: int | None
    ) -> Moved: ...

    def fail_dispatch(self, job_id: str, reason: str) -> Moved: ...

    def fail_pending(self, job_id: str, reason: str) -> Moved: ...

    def requeue_unlaunched(self, job_id: str, reason: str) -> Moved: ...

    def ended(self, spec_or_id: JobSpec | str) -> JobSpec | None: ...

    def pause(self, job_id: str, by: str, *, started: Callable[[JobSpec], bool] = ...) -> Moved: ...

    def resume(self, job_id: str, *, only_paused_by: str | None = ...) -> Moved: ...


class SpecReader(Protocol):
    def read(self, job_id: str) -> JobSpec: ...

    def list_ids(self) -> list[str]: ...


@dataclass(frozen=True)
class LaneContext:
    """The state root, its specs and its clock, as the lane sees them."""

    paths: StatePaths
    store: SpecReader
    now: Callable[[], datetime]


class PackRemotePort(Protocol):
    """The bounded Slurm reads and writes of packed allocations
    (:class:`vq.packing.cases.remote.PackRemote`), as a lane uses them."""

    #: The login host's runner (the live mirror of running slots' logs reads through it).
    runner: Runner

    def stage_submit_command(
        self,
        log_root: str,
        allocation_work: str,
        records: str,
        token: str,
        supersede: str | None = None,
    ) -> list[str]: ...

    def submit_guarded(self, command: list[str], stdin: bytes) -> GuardState: ...

    def submit_state(self, records: str) -> GuardState: ...

    def observe_round(self, watched: Sequence[Watched], since: str) -> list[RoundAnswer]: ...

    def allocation_jobs(self, allocation_id: str, since: str) -> list[str]: ...

    def cancel(self, job_id: str, step_id: str | None = None) -> Literal["sent", "gone"]: ...

    def cancel_slot(
        self, job_id: str, allocation_id: str, slot: int
    ) -> Literal["sent", "gone", "not_running"]: ...

    def collect(
        self,
        allocation_work: str,
        log_prefix: str,
        slots: Sequence[int],
        log_bytes: int,
        checks: Mapping[int, tuple[int, int]] | None = None,
    ) -> bytes: ...


#: How a lane reaches its login host for packed allocations: its runner → the reads.
PackRemoteFor = Callable[[Runner], PackRemotePort]
