"""A chaos driver for the local queue: "nothing acknowledged is lost; no job runs twice".

Plain functions and classes (no pytest in here), driving the real ``vq`` executable and
the real daemon against one private state root:

* a submitter thread feeds ``N`` jobs in random batches, keeping a bounded backlog so the
  queue stays busy for the whole run; every id the CLI printed is *acknowledged*;
* the chaos thread (the caller's) fires a shuffled list of actions at random points of
  the job stream: ``kill -9`` of the daemon (sometimes also of its fork server, sometimes
  while the daemon is still starting, sometimes with a few submissions while it is down),
  ``kill -9`` of a running job's collector under a live daemon, and a graceful
  ``vq daemon stop`` + start; opt-in, ``kill -9`` of the fork server alone under a live
  daemon (off by default: it trips the known "launch failed" bug pinned by
  ``test_forkserver_death.py``);
* each job appends ``<id> start`` and ``<id> end`` to a ledger outside the state root, so
  the ledger tells how often each job really ran;
* at the end every spec must be terminal; :func:`verify` turns the ledger, the specs and
  the exit markers into a list of violated invariants plus a summary of counts.

Everything is reproducible from ``ChaosPlan.seed`` as far as the random choices go
(sleep lengths, batch sizes, action order and moments); the OS interleaving is not.
Liveness is read from ``/proc/<pid>/stat`` and a zombie counts as gone (PID 1 reaps
orphans slowly on the test machines). Nothing here sleeps to hide a race: waits poll a
condition against a deadline; the only unconditional pauses are the chaos timing itself.

This module holds the entry points (:func:`run_chaos`, :func:`run_checked`) and re-exports
the parts, one concern each: :mod:`tests.chaos.plan` (the plan, the result, the CLI it
needs), :mod:`tests.chaos.procs` (``/proc`` reads and polling), :mod:`tests.chaos.ledger`
(the jobs and their ledger), :mod:`tests.chaos.driver` (submitter, moments, drain) with
:mod:`tests.chaos.actions` (the daemon's lifecycle and the kills), and
:mod:`tests.chaos.verdict` (the invariants and the report).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.chaos.driver import Driver
from tests.chaos.ledger import job_command, parse_ledger
from tests.chaos.plan import (
    ChaosAborted,
    ChaosPlan,
    ChaosResult,
    Cli,
    seed_from_env,
    size_from_env,
)
from tests.chaos.procs import live_pids_with_env, poll
from tests.chaos.verdict import format_report, read_marker, recovery_totals, verify

__all__ = [
    "ChaosAborted",
    "ChaosPlan",
    "ChaosResult",
    "Cli",
    "format_report",
    "job_command",
    "live_pids_with_env",
    "parse_ledger",
    "recovery_totals",
    "run_chaos",
    "run_checked",
    "seed_from_env",
    "size_from_env",
    "verify",
]


def run_chaos(cli: Cli, ledger: Path, plan: ChaosPlan, log_path: Path | None = None) -> ChaosResult:
    """Drive one chaos run to its end and collect the evidence (see :func:`verify`).

    ``ledger`` must lie outside the state root. Raises :class:`ChaosAborted` (naming the
    seed) if the run cannot be driven to completion.
    """
    root = Path(cli.root)
    if root in ledger.resolve().parents:
        raise ValueError("the ledger must live outside the state root")
    driver = Driver(cli, ledger, plan, log_path or ledger.with_name("chaos.log"))
    try:
        driver.run()
        marker = f"VQ_STATE_DIR={root}"
        stray = poll(lambda: not live_pids_with_env(marker), 15)
        stray_pids = [] if stray else live_pids_with_env(marker)
        ids = driver.all_spec_ids()
        specs = {job_id: spec for job_id in ids if (spec := driver.read_spec(job_id))}
        for job_id in driver.acknowledged:
            if job_id not in specs and (spec := driver.read_spec(job_id)) is not None:
                specs[job_id] = spec
        markers = {job_id: read_marker(root, job_id) for job_id in set(ids) | set(specs)}
        ledger_counts, garbage = parse_ledger(ledger)
        return ChaosResult(
            recovery=recovery_totals(root / "daemon.log"),
            plan=plan,
            acknowledged=list(driver.acknowledged),
            collector_killed=set(driver.collector_killed),
            counts=Counter(driver.counts),
            specs=specs,
            markers=markers,
            ledger=ledger_counts,
            ledger_garbage=garbage,
            stray_pids=stray_pids,
            anomalies=list(driver.anomalies),
            elapsed=time.monotonic() - driver.started,
        )
    finally:
        driver.stopping.set()
        if driver.submitter_thread is not None:
            driver.submitter_thread.join(timeout=120)
        driver.close()


def run_checked(cli: Cli, workdir: Path, plan: ChaosPlan) -> dict[str, Any]:
    """One chaos run as a test wants it: driven (ledger and log under ``workdir``, which
    must lie outside the state root), verified, and its summary returned.

    Raises AssertionError (the seed and the log paths in its notes) when an invariant is
    violated, when fewer than ``plan.jobs * plan.array_size`` jobs were acknowledged, or
    when fewer daemon kills than planned landed.
    """
    print(f"chaos: {plan.describe()} — reproduce with VQ_CHAOS_SEED={plan.seed}", flush=True)
    log_path = workdir / "chaos.log"
    try:
        result = verify(run_chaos(cli, workdir / "ledger", plan, log_path))
    except Exception as exc:
        exc.add_note(f"chaos run {plan.describe()}: reproduce with VQ_CHAOS_SEED={plan.seed}")
        exc.add_note(f"chaos log: {log_path}; daemon log: {Path(cli.root) / 'daemon.log'}")
        raise
    print("chaos summary: " + json.dumps(result.summary, indent=1), flush=True)
    tail = log_path.read_text().splitlines()[-40:] if log_path.exists() else []
    if result.problems:  # stray processes of the state root are among them
        raise AssertionError(format_report(result, tail))
    summary = result.summary
    if summary["submitted"] != plan.jobs * plan.array_size:
        raise AssertionError(format_report(result, tail) + "\nnot every job was submitted")
    if summary["daemon_kills"] < plan.daemon_kills:
        raise AssertionError(format_report(result, tail) + "\nfewer daemon kills than planned")
    return summary
