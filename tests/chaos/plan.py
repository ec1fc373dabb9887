"""What one chaos run is (:class:`ChaosPlan`), what it gathered (:class:`ChaosResult`),
and what it needs of the CLI (:class:`Cli`); sizes and seeds from the environment."""

from __future__ import annotations

import os
import random
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = ["ChaosAborted", "ChaosPlan", "ChaosResult", "Cli", "seed_from_env", "size_from_env"]


class Cli(Protocol):
    """What the harness needs of ``tests.conftest.Vq``."""

    root: Path
    env: dict[str, str]

    def run(
        self, *args: str, check: bool = True, timeout: float = 120.0, input: str | None = None
    ) -> subprocess.CompletedProcess[str]: ...


class ChaosAborted(AssertionError):
    """The run could not be driven to its end (a deadline passed); carries the seed."""


@dataclass(frozen=True)
class ChaosPlan:
    """One chaos run. ``seed`` reproduces every random choice the harness makes."""

    jobs: int
    daemon_kills: int
    seed: int
    collector_kills: int = 6
    graceful_restarts: int = 3
    #: kill -9 of the fork server alone, under a live daemon (which must respawn it).
    #: Off by default: a launch in flight then ends FAILED although it ran (known bug).
    forkserver_only_kills: int = 0
    max_jobs: int = 4
    max_sleep: float = 0.3
    #: A share of jobs sleeps up to ``long_sleep`` instead, so that some are still running
    #: across a restart and the reattach path of recovery (§4.7) is exercised too.
    long_share: float = 0.1
    long_sleep: float = 2.0
    #: Of the daemon kills: the share that also kills the fork server.
    forkserver_chance: float = 0.35
    #: Of the daemon kills: the share aimed at a daemon that is still starting up.
    startup_chance: float = 0.15
    #: Of the daemon kills: the share followed by a few submissions while it is down.
    down_submit_chance: float = 0.4
    #: Acknowledged but unfinished jobs the submitter allows before it waits.
    backlog: int = 16
    #: Seconds allowed for the queue to drain at the end: fixed part + per job.
    drain_base: float = 60.0
    drain_per_job: float = 0.25
    #: Above 1, every submission is a swarm: ``--array 1-N --max-parallel max_jobs`` of
    #: the same command (each element one job of the ledger; ``jobs`` counts arrays).
    array_size: int = 1

    def describe(self) -> str:
        return (
            f"ChaosPlan(jobs={self.jobs}, daemon_kills={self.daemon_kills}, seed={self.seed}, "
            f"collector_kills={self.collector_kills}, graceful_restarts="
            f"{self.graceful_restarts}, forkserver_only_kills={self.forkserver_only_kills}, "
            f"max_jobs={self.max_jobs}, long_share={self.long_share}, "
            f"max_sleep={self.max_sleep}, array_size={self.array_size})"
        )


@dataclass
class ChaosResult:
    plan: ChaosPlan
    acknowledged: list[str]
    collector_killed: set[str]
    counts: Counter[str]
    specs: dict[str, dict[str, Any]]
    markers: dict[str, str | None]
    ledger: dict[str, Counter[str]]
    ledger_garbage: list[str]
    stray_pids: list[int]
    anomalies: list[str]
    recovery: Counter[str]
    elapsed: float
    problems: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def seed_from_env(fixed: int | None = None) -> int:
    """``VQ_CHAOS_SEED`` when set (to reproduce a run); else ``fixed``, the seed of a bounded
    run in ``make test`` (the same random choices on every run, so a landing never depends on
    which were drawn); else (a soak run in ``make soak``) a fresh random seed, printed by
    :func:`tests.chaos.harness.run_checked`."""
    text = os.environ.get("VQ_CHAOS_SEED")
    if text:
        return int(text)
    return fixed if fixed is not None else random.SystemRandom().randrange(2**32)


def size_from_env(name: str, default: int) -> int:
    """An integer override of a run's size (``VQ_CHAOS_JOBS``, ``VQ_CHAOS_KILLS``)."""
    text = os.environ.get(name)
    return int(text) if text else default
