"""The scheduler lanes' job control as the kill, pause and resume services see it, from
any thread.

The lanes belong to the daemon loop (:mod:`vq.executors.scheduler.lane_set`). The
executor registry, used on RPC threads, sees them through :class:`LaneControls`: which
lanes exist is read from the immutable snapshot the loop publishes
(:attr:`~vq.executors.scheduler.LaneSet.published`), and every control call is queued to
the loop (:class:`~vq.daemon.holds.LoopCalls`), which looks the lane up there and calls
it. A call that needs the scheduler's answer (check pausable, hold, release) waits for
the reply the lane gives once its worker has the answer: SSH never runs on the caller's
thread, and the caller sees the same answers and errors as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from vq.domain.spec import JobSpec
from vq.errors import Conflict
from vq.executors.base import JobControl, JobHandle
from vq.executors.scheduler import LaneSet, SchedulerLane

from .holds import LoopCalls

__all__ = ["REPLY_SECONDS", "LaneControls"]

#: How long a pause or resume waits for the scheduler's answer: the lane's worker may
#: first finish the calls queued before it (each bounded by the SSH deadline).
REPLY_SECONDS = 300.0

_Reply = Callable[[object], None]


class LaneControl:
    """One lane's :class:`~vq.executors.base.JobControl`, answered on the loop."""

    def __init__(self, name: str, lanes: LaneSet, loop: LoopCalls) -> None:
        self._name = name
        self._lanes = lanes
        self._loop = loop

    @property
    def name(self) -> str:
        return self._name

    def _lane(self) -> SchedulerLane | None:
        """On the loop: the lane by this name now (a reload may have removed it)."""
        return self._lanes.get(self._name)

    def _ask(self, call: Callable[[SchedulerLane, _Reply], None]) -> object:
        def start(reply: _Reply) -> None:
            lane = self._lane()
            if lane is None:
                reply(
                    Conflict(
                        f"the scheduler lane {self._name!r} is not driven by this daemon now",
                        hint="`vq daemon reload` applied a [hosts] change; try again",
                    )
                )
                return
            call(lane, reply)

        try:
            return self._loop.ask(start, REPLY_SECONDS)
        except TimeoutError:
            raise Conflict(
                f"the scheduler on {self._name} did not answer within {REPLY_SECONDS:.0f} s",
                hint="`vq status ID` shows the job's scheduler_state once it does",
            ) from None

    def cancel(self, handle: JobHandle) -> bool:
        """Queue the scheduler cancel on the loop (KILLED is already written)."""

        def on_loop() -> None:
            lane = self._lane()
            if lane is not None:
                lane.cancel(handle.job_id)

        self._loop.post(on_loop)  # never waits: a kill of many jobs queues them all
        return True

    def suspend(self, handle: JobHandle) -> bool:
        return bool(self._ask(lambda lane, reply: lane.suspend(handle.job_id, reply)))

    def resume(self, handle: JobHandle) -> bool:
        return bool(self._ask(lambda lane, reply: lane.resume(handle.job_id, reply)))

    def check_pausable(self, spec: JobSpec) -> None:
        self._ask(lambda lane, reply: lane.check_pausable(spec, reply))

    def started(self, spec: JobSpec) -> bool:
        return SchedulerLane.started(spec)

    def running(self, handle: JobHandle) -> bool:
        return handle.job_id in self.still_running([handle])

    def still_running(self, handles: Iterable[JobHandle]) -> set[str]:
        """The jobs this lane still tracks (submitted, polled, or copying back)."""
        ids = [handle.job_id for handle in handles]

        def on_loop() -> set[str]:
            lane = self._lane()
            return {job_id for job_id in ids if lane is not None and lane.tracks(job_id)}

        return self._loop.run(on_loop)


class LaneControls(Mapping[str, JobControl]):
    """Lane name → its control, for the executor registry on any thread (see the module
    docstring); the names are the loop's last published snapshot."""

    def __init__(self, lanes: LaneSet, loop: LoopCalls) -> None:
        self._lanes = lanes
        self._loop = loop

    def __getitem__(self, name: str) -> JobControl:
        if name not in self._lanes.published.settings:
            raise KeyError(name)
        return LaneControl(name, self._lanes, self._loop)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._lanes.published.settings))

    def __len__(self) -> int:
        return len(self._lanes.published.settings)

    def parked(self, name: str) -> bool:
        return self._lanes.published.is_parked(name)
