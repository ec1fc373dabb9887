"""CPU affinity for local jobs (issue: declared CPUs hold without cgroups).

Pure rules, no I/O: which cores a job is pinned to, and the thread-count variables a
local job gets. The daemon owns the allocation (the cores of its running jobs) and
calls :func:`choose_cores` at dispatch; the collector applies the result with
``sched_setaffinity`` before the command starts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

__all__ = [
    "THREAD_VARIABLES",
    "choose_cores",
    "format_cores",
    "thread_defaults",
]

#: Set to the job's CPU count unless the job's own environment already sets them, so
#: threaded libraries (OpenMP, MKL, OpenBLAS, numexpr) do not oversubscribe the host.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def thread_defaults(cpus: int) -> dict[str, str]:
    """The thread-count defaults of a job declaring ``cpus`` CPUs."""
    return {name: str(cpus) for name in THREAD_VARIABLES}


def choose_cores(cpus: int, available: Iterable[int], in_use: Iterable[Iterable[int]]) -> list[int]:
    """The ``cpus`` cores a new job is pinned to, sorted.

    ``available``: the cores the daemon may use; ``in_use``: the core sets of the jobs
    that run now. While enough cores are free the answer is disjoint from every running
    job's set (lowest-numbered free cores first). When they do not suffice (an
    oversubscribed or throttled-up host) the least-loaded cores are taken, ties broken
    by core number, so overlap is spread evenly. A job declaring more CPUs than there
    are cores gets every core.
    """
    usable = set(available)
    cores = sorted(usable)
    if not cores:
        return []
    load: Counter[int] = Counter()
    for used in in_use:
        load.update(core for core in used if core in usable)
    ranked = sorted(cores, key=lambda core: (load[core], core))
    return sorted(ranked[: max(1, min(cpus, len(cores)))])


def format_cores(cores: Iterable[int]) -> str:
    """Cores as a Linux cpu list (``0-3,6``), as ``taskset -c`` and cpusets write them."""
    ordered = sorted(set(cores))
    parts: list[str] = []
    start = prev = None
    for core in [*ordered, None]:
        if start is not None and (core is None or prev is None or core != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if core is not None and start is None:
            start = core
        prev = core
    return ",".join(parts)
