"""The queue ETA's replay of admission (vq.domain.eta): running jobs' remaining time, the
capacity the job needs, and "unknown" with the reason when nothing says when it frees."""

from __future__ import annotations

import pytest

from vq.domain.admission import Caps
from vq.domain.eta import HISTORY, WALL, Queued, Running, estimate_start, remaining_from_history

TWO_CORES = Caps(max_cpus=2)


def _job(cpus: int = 1, mem_mb: int | None = None) -> Queued:
    return Queued("job", cpus, mem_mb, None)


def test_a_job_that_fits_now_starts_now() -> None:
    running = [Running("r", 1, None, 300.0, WALL)]
    estimate = estimate_start(running, [], _job(1), TWO_CORES)
    assert estimate.seconds == 0 and estimate.sources == frozenset()


def test_a_job_needing_both_cores_waits_for_the_running_jobs_wall_time() -> None:
    running = [Running("r", 1, None, 300.0, WALL)]
    estimate = estimate_start(running, [], _job(2), TWO_CORES)
    assert estimate.seconds == 300 and estimate.sources == {WALL}


def test_jobs_ahead_take_their_turn_and_their_duration() -> None:
    running = [Running("r", 2, None, 100.0, WALL)]
    ahead = [Queued("a", 2, None, 50.0, HISTORY)]
    estimate = estimate_start(running, ahead, _job(1), TWO_CORES)
    assert estimate.seconds == 150 and estimate.sources == {WALL, HISTORY}


def test_a_smaller_job_starts_beside_a_job_ahead_that_does_not_fit() -> None:
    running = [Running("r", 1, None, 100.0, WALL)]
    ahead = [Queued("a", 2, None, 50.0, HISTORY)]
    assert estimate_start(running, ahead, _job(1), TWO_CORES).seconds == 0


def test_memory_and_the_job_cap_count_like_cpus() -> None:
    caps = Caps(max_mem_mb=4000)
    running = [Running("r", 1, 2000, 60.0, HISTORY)]
    assert estimate_start(running, [], _job(1, 3000), caps).seconds == 60
    assert estimate_start(running, [], _job(1, 2000), caps).seconds == 0
    single = Caps(max_jobs=1)
    assert estimate_start(running, [], _job(1), single).seconds == 60


def test_unknown_when_the_capacity_it_needs_is_held_without_an_end() -> None:
    why = "running job r declares no wall time and has run longer than any finished job"
    running = [Running("r", 1, None, None, None, why)]
    estimate = estimate_start(running, [], _job(2), TWO_CORES)
    assert estimate.seconds is None and estimate.why_unknown == why
    # ... but not when the job fits beside it
    assert estimate_start(running, [], _job(1), TWO_CORES).seconds == 0


def test_unknown_behind_a_job_ahead_with_no_known_duration() -> None:
    ahead = [Queued("a", 2, None, None, None, "job a ahead has no wall time and no history")]
    estimate = estimate_start([], ahead, _job(1), TWO_CORES)
    assert estimate.seconds is None
    assert estimate.why_unknown == "job a ahead has no wall time and no history"


def test_a_known_end_behind_an_unknown_one_still_counts() -> None:
    running = [
        Running("forever", 1, None, None, None, "no end"),
        Running("soon", 1, None, 30.0, WALL),
    ]
    assert estimate_start(running, [], _job(1), TWO_CORES).seconds == 30


@pytest.mark.parametrize(
    ("elapsed", "runs", "expected"),
    [(5.0, [3.0, 10.0, 20.0], 10.0), (0.0, [4.0], 4.0), (50.0, [3.0, 10.0, 20.0], None)],
)
def test_remaining_from_history(elapsed: float, runs: list[float], expected: float | None) -> None:
    assert remaining_from_history(elapsed, runs) == expected
