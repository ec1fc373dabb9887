"""The pure CPU-affinity rules: core choice and the thread-count defaults."""

from __future__ import annotations

from vq.domain.affinity import choose_cores, format_cores, thread_defaults
from vq.executors._collector import _with_thread_defaults


def test_cores_are_disjoint_while_they_suffice() -> None:
    assert choose_cores(1, {0, 1, 2, 3}, []) == [0]
    assert choose_cores(2, {0, 1, 2, 3}, [(0,)]) == [1, 2]
    assert choose_cores(1, {0, 1, 2, 3}, [(0,), (1, 2)]) == [3]


def test_overlap_is_spread_over_the_least_loaded_cores() -> None:
    assert choose_cores(2, {0, 1, 2, 3}, [(0,), (1, 2)]) == [0, 3]
    assert choose_cores(1, {0, 1}, [(0,), (1,), (0,)]) == [1]


def test_more_cpus_than_cores_gets_every_core_and_cores_outside_are_ignored() -> None:
    assert choose_cores(8, {0, 1}, []) == [0, 1]
    assert choose_cores(1, {2, 3}, [(0, 1, 2)]) == [3]
    assert choose_cores(1, set(), []) == []


def test_thread_defaults_never_override_the_jobs_own_values() -> None:
    env = _with_thread_defaults(
        {"env": {"MKL_NUM_THREADS": "5", "X": "1"}, "thread_defaults": thread_defaults(2)}
    )
    assert env == {
        "X": "1",
        "MKL_NUM_THREADS": "5",
        "OMP_NUM_THREADS": "2",
        "OPENBLAS_NUM_THREADS": "2",
        "NUMEXPR_NUM_THREADS": "2",
    }


def test_format_cores() -> None:
    assert format_cores([3, 0, 1, 2, 6]) == "0-3,6"
    assert format_cores([1]) == "1"
    assert format_cores([]) == ""
