"""The grace a killed job gets without a daemon: wait for it through the executor's
protocol, force-stop only what outlives the grace."""

from __future__ import annotations

from vq.executors.base import JobHandle
from vq.services.kill import stop_after_grace

HANDLE = JobHandle("j1", 4242, 17)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Attempt:
    """An executor's running/force_stop for one attempt that ends at ``ends_at``."""

    def __init__(self, clock: FakeClock, ends_at: float | None) -> None:
        self.clock, self.ends_at = clock, ends_at
        self.forced: list[JobHandle] = []

    def running(self, handle: JobHandle) -> bool:
        return self.ends_at is None or self.clock.now < self.ends_at

    def force_stop(self, handle: JobHandle) -> bool:
        self.forced.append(handle)
        return True


def test_an_attempt_that_ends_within_the_grace_is_not_forced() -> None:
    clock = FakeClock()
    attempt = Attempt(clock, ends_at=102.0)
    forced = stop_after_grace(
        attempt,  # type: ignore[arg-type]
        HANDLE,
        10.0,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )
    assert forced is False
    assert attempt.forced == []
    assert 102.0 <= clock.now < 110.0


def test_an_attempt_outliving_the_grace_is_force_stopped_once_after_it() -> None:
    clock = FakeClock()
    attempt = Attempt(clock, ends_at=None)
    forced = stop_after_grace(
        attempt,  # type: ignore[arg-type]
        HANDLE,
        10.0,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )
    assert forced is True
    assert attempt.forced == [HANDLE]
    assert clock.now >= 110.0
