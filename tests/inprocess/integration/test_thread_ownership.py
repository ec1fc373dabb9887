"""Loop-owned state stays on the loop: other threads read immutable snapshots or ask
the loop with a call that waits for its reply."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tests.conftest import wait_until
from vq.config.hosts import HostSettings
from vq.config.settings import Settings
from vq.daemon.holds import Holds, LoopCalls
from vq.daemon.lane_controls import LaneControls
from vq.daemon.supervisor import Supervisor
from vq.domain.admission import Caps
from vq.domain.spec import JobSpec
from vq.errors import Conflict, TransportError
from vq.executors.base import JobHandle
from vq.executors.local import LocalExecutor
from vq.executors.registry import ExecutorRegistry
from vq.executors.scheduler import LaneContext, LaneSet, SchedulerLane, WrongThread
from vq.executors.scheduler.jobs import LaneJob
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.services.control import Throttle
from vq.services.lifecycle import Lifecycle
from vq.transport.runner import RunResult


def _context(tmp_path: Path) -> ServiceContext:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    return ServiceContext(paths, Caps())


def _spec(job_id: str, **fields: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "id": job_id,
            "submitted_at": "2026-01-01T00:00:00+00:00",
            "command": ["true"],
            "cpus": 1,
            **fields,
        }
    )


class Loop:
    """A stand-in main loop: one thread running what ``call_soon`` queued."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self.loop_calls = LoopCalls(self.calls.put)
        self.thread = threading.Thread(target=self._run, name="test-loop")

    def _run(self) -> None:
        self.loop_calls.loop_started()
        while (fn := self.calls.get()) is not None:
            fn()


@pytest.fixture
def loop() -> Iterator[Loop]:
    running = Loop()
    running.thread.start()
    yield running
    running.calls.put(None)
    running.thread.join(timeout=10)


def test_a_loop_call_runs_on_the_loop_and_returns_its_reply(loop: Loop) -> None:
    wait_until_started = threading.Event()
    loop.calls.put(wait_until_started.set)
    assert wait_until_started.wait(10)
    assert loop.loop_calls.run(lambda: threading.current_thread().name) == "test-loop"

    def boom() -> None:
        raise ValueError("refused on the loop")

    with pytest.raises(ValueError, match="refused on the loop"):
        loop.loop_calls.run(boom)


def test_before_the_loop_starts_a_call_runs_inline() -> None:
    calls = LoopCalls(lambda fn: pytest.fail("queued although no loop runs"))
    assert calls.run(lambda: threading.current_thread().name) == threading.current_thread().name


class RecordingContext(ServiceContext):
    """Records the thread of every replacement of ``caps``."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "caps" and "caps" in self.__dict__:
            self.__dict__.setdefault("caps_writers", []).append(threading.current_thread().name)
        super().__setattr__(name, value)


def test_throttle_and_reload_replace_the_caps_on_the_loop(tmp_path: Path, loop: Loop) -> None:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    ctx = RecordingContext(paths, Caps(max_jobs=8, max_cpus=8))
    holds = Holds(ctx, Settings(), None, list, loop.loop_calls)
    started = threading.Event()
    loop.calls.put(started.set)
    assert started.wait(10)
    results: list[Any] = []

    def rpc() -> None:  # an RPC thread
        results.append(holds.set_throttle(Throttle(max_jobs=2)))
        results.append(holds.set_throttle(Throttle()))

    thread = threading.Thread(target=rpc, name="test-rpc")
    thread.start()
    thread.join(timeout=30)
    assert [caps.max_jobs for caps in results] == [2, Settings().daemon.caps().max_jobs]
    writers = ctx.__dict__.get("caps_writers", [])
    assert writers and set(writers) <= {"MainThread", "test-loop"}  # MainThread: __init__
    assert "test-rpc" not in writers


# --- thread ownership of the supervisor's budget ------------------------------------------


def test_usage_can_be_read_from_threads_while_the_loop_tracks_and_releases(
    tmp_path: Path,
) -> None:
    ctx = _context(tmp_path)
    supervisor = Supervisor(ctx, Lifecycle(ctx), LocalExecutor(ctx.paths))
    specs = [_spec(f"{n:012x}", cpus=1 + n % 3) for n in range(200)]
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        try:
            while not stop.is_set():
                usage = supervisor.usage()
                assert usage.jobs >= 0 and usage.cpus >= usage.jobs
                reads[0] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(20):  # the loop: jobs start and finish
            for spec in specs:
                supervisor.track(spec, None, None, None, orphan=False)
            for spec in specs:
                supervisor.release(spec.id)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert reads[0] > 0
    assert supervisor.usage().jobs == 0


# --- scheduler lanes: their state only on the loop, their SSH only on their worker ----------
class ThreadRecordingRunner:
    """A lane's runner: each call answered with the next result (an error is raised),
    and the thread each ran on kept."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.threads: list[str] = []

    def run(self, argv: Any, **_: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self) -> None:
        pass


class LaneSpecs:
    """The lane's spec reader: one job of lane ``a``, submitted as scheduler job 7."""

    def __init__(self) -> None:
        self.spec = _spec("a1b2c3d4e5f6", scheduler_target="a", scheduler_job_id="7")

    def read(self, job_id: str) -> JobSpec:
        return self.spec

    def list_ids(self) -> list[str]:
        return [self.spec.id]


class ThreadRecordingLifecycle:
    """The lane's lifecycle port: the thread of each scheduler-field write."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def record_scheduler(self, job_id: str, fields: dict[str, Any], **_: Any) -> None:
        self.threads.append(threading.current_thread().name)


def _lanes_on(loop: Loop, tmp_path: Path, runner: Any, lifecycle: Any) -> LaneSet:
    """A lane set with lane ``a``, built on the loop thread (as the daemon builds it)."""
    hosts = {
        "a": HostSettings.model_validate(
            {"ssh": "login", "scheduler_dialect": "slurm", "scratch_root": str(tmp_path)}
        )
    }
    ctx = LaneContext(StatePaths(tmp_path / "state"), LaneSpecs(), lambda: _spec("x").submitted_at)

    def build() -> LaneSet:
        def make(settings: Any) -> SchedulerLane:
            return SchedulerLane(
                settings, ctx, lifecycle, runner, pending=lambda name: [], call_soon=loop.calls.put
            )

        return LaneSet(make, hosts)

    return loop.loop_calls.run(build)


def test_lane_state_touched_off_the_loop_fails_loudly(tmp_path: Path, loop: Loop) -> None:

    lanes = _lanes_on(loop, tmp_path, ThreadRecordingRunner(), ThreadRecordingLifecycle())
    lane = loop.loop_calls.run(lambda: lanes["a"])
    for touch in (
        lambda: lanes["a"],
        lambda: list(lanes),
        lambda: lanes.reconfigure({}),
        lambda: lanes.settle(),
        lambda: lane.cancel("a1b2c3d4e5f6"),
        lambda: lane.tick(),
        lambda: lane.jobs.track(LaneJob("a1b2c3d4e5f6", "queued", "7")),
        lambda: lane.control.forget_observation("a1b2c3d4e5f6"),
    ):
        with pytest.raises(WrongThread, match="owned by the loop thread 'test-loop'"):
            touch()
    assert sorted(lanes.published.settings) == ["a"]  # the snapshot is for any thread
    loop.loop_calls.run(lambda: lane.close())


def test_a_hold_asked_on_an_rpc_thread_runs_ssh_on_the_worker_and_writes_on_the_loop(
    tmp_path: Path, loop: Loop
) -> None:

    runner = ThreadRecordingRunner(RunResult(0, b"", b""))
    lifecycle = ThreadRecordingLifecycle()
    lanes = _lanes_on(loop, tmp_path, runner, lifecycle)
    controls = LaneControls(lanes, loop.loop_calls)
    registry = ExecutorRegistry(cast(Any, object()), controls, parked=controls.parked)
    spec = LaneSpecs().spec
    control = registry.select(spec)  # on this (RPC) thread: the published snapshot
    assert control.suspend(JobHandle.of(spec)) is True
    assert runner.threads == ["vq-lane-a"]  # scontrol hold ran on the lane's worker
    assert lifecycle.threads == ["test-loop"]  # "held" was written on the loop
    loop.loop_calls.run(lambda: lanes.close())


def test_a_pausable_check_on_an_rpc_thread_gets_the_schedulers_refusal_there(
    tmp_path: Path, loop: Loop
) -> None:

    lost = TransportError("ssh: connection reset", transient=True)
    runner = ThreadRecordingRunner(lost)
    lanes = _lanes_on(loop, tmp_path, runner, ThreadRecordingLifecycle())
    control = LaneControls(lanes, loop.loop_calls)["a"]
    with pytest.raises(Conflict, match="did not answer") as refused:
        control.check_pausable(LaneSpecs().spec)
    assert refused.value.hint == "try again later; nothing was changed"
    assert runner.threads == ["vq-lane-a"]  # the squeue ran on the worker, never here
    loop.loop_calls.run(lambda: lanes.close())


def test_a_kill_on_an_rpc_thread_queues_the_cancel_for_the_loop(tmp_path: Path, loop: Loop) -> None:
    runner = ThreadRecordingRunner(RunResult(0, b"", b""))
    lanes = _lanes_on(loop, tmp_path, runner, ThreadRecordingLifecycle())
    lane = loop.loop_calls.run(lambda: lanes["a"])
    job = LaneJob("a1b2c3d4e5f6", "queued", "7")
    loop.loop_calls.run(lambda: lane.jobs.track(job))
    control = LaneControls(lanes, loop.loop_calls)["a"]
    assert control.cancel(JobHandle.of(LaneSpecs().spec)) is True  # queued, not awaited
    wait_until(lambda: loop.loop_calls.run(lambda: not job.cancel_wanted), 10)
    assert runner.threads == ["vq-lane-a"]  # scancel ran on the lane's worker
    assert control.still_running([JobHandle.of(LaneSpecs().spec)]) == {"a1b2c3d4e5f6"}
    loop.loop_calls.run(lambda: lanes.close())
