"""Loop-owned state stays on the loop: other threads read immutable snapshots or ask
the loop with a call that waits for its reply."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vq.config.settings import Settings
from vq.daemon.holds import Holds, LoopCalls
from vq.daemon.supervisor import Supervisor
from vq.domain.admission import Caps
from vq.domain.spec import JobSpec
from vq.executors.local import LocalExecutor
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.services.control import Throttle
from vq.services.lifecycle import Lifecycle


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
