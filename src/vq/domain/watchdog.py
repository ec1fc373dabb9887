"""Watchdog verdicts (§4.4). Pure: numbers in, a verdict (or None) out.

* Memory: the sampled RSS of the whole process group over the job's effective memory
  (declared ``mem_mb``, else the configured default) → OOM_KILLED.
* Wall time: active seconds (monotonic time since the attempt's epoch minus the pause
  time accumulated since that epoch) over ``wall_time_seconds`` → TIME_EXCEEDED.
* Starvation: over the last ``starved_window_seconds`` the group used less than
  ``starved_cpu_percent`` of one CPU → STARVED. Needs a full window of samples, so a
  job is never judged on less evidence than the window asks for.

A SUSPENDED job is never judged (the caller does not ask).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from vq.domain.states import JobState

__all__ = [
    "CpuPoint",
    "Evidence",
    "StarvationPolicy",
    "Verdict",
    "check_memory",
    "check_starved",
    "check_wall",
]


class Evidence(TypedDict, total=False):
    """What a verdict saw (the ``watchdog_kill`` event carries it): the measure and its
    limit of the check that fired, or the exit code of a kernel OOM kill."""

    rss_mb: float
    limit_mb: int
    active_seconds: float
    limit_seconds: int
    cpu_percent: float
    window_seconds: float
    exit_code: int | None
    source: str


@dataclass(frozen=True)
class Verdict:
    state: JobState
    reason: str
    evidence: Evidence = field(default_factory=Evidence)


@dataclass(frozen=True)
class StarvationPolicy:
    cpu_percent: float = 1.0
    window_seconds: float | None = 3600.0


@dataclass(frozen=True)
class CpuPoint:
    """Cumulative CPU seconds of a group at a monotonic instant."""

    at: float
    cpu_seconds: float


def check_memory(rss_mb: float | None, limit_mb: int | None) -> Verdict | None:
    if rss_mb is None or not limit_mb or rss_mb <= limit_mb:
        return None
    return Verdict(
        JobState.OOM_KILLED,
        f"watchdog: rss {rss_mb:.0f} MB exceeded the {limit_mb} MB limit",
        {"rss_mb": round(rss_mb, 1), "limit_mb": limit_mb},
    )


def check_wall(active_seconds: float, limit_seconds: int | None) -> Verdict | None:
    if not limit_seconds or active_seconds <= limit_seconds:
        return None
    return Verdict(
        JobState.TIME_EXCEEDED,
        f"watchdog: ran {active_seconds:.1f}s of active wall time, limit {limit_seconds}s",
        {"active_seconds": round(active_seconds, 2), "limit_seconds": limit_seconds},
    )


def check_starved(
    points: Sequence[CpuPoint], now: float, policy: StarvationPolicy
) -> Verdict | None:
    """STARVED when the CPU used over the trailing window is below the threshold."""
    window = policy.window_seconds
    if not window or not points or now - points[0].at < window:
        return None
    # The latest point at least a full window old is the baseline.
    baseline = points[0]
    for point in points:
        if now - point.at >= window:
            baseline = point
        else:
            break
    latest = points[-1]
    span = latest.at - baseline.at
    if span <= 0:
        return None
    percent = 100.0 * (latest.cpu_seconds - baseline.cpu_seconds) / span
    if percent >= policy.cpu_percent:
        return None
    return Verdict(
        JobState.STARVED,
        f"watchdog: {percent:.2f}% CPU over the last {span:.0f}s (threshold {policy.cpu_percent}%)",
        {"cpu_percent": round(percent, 3), "window_seconds": round(span, 1)},
    )
