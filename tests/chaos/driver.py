"""The chaos driver: a submitter thread feeding jobs with a bounded backlog, the chaos
actions fired at their moments (:mod:`tests.chaos.actions`), and the final drain until
every spec is terminal. Reproducible from ``ChaosPlan.seed`` as far as random choices go.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.chaos.actions import ChaosActions
from tests.chaos.ledger import job_command
from tests.chaos.plan import ChaosAborted, ChaosPlan, Cli
from tests.chaos.procs import POLL_SECONDS, alive, poll
from vq.domain.states import TERMINAL_NAMES

__all__ = ["Driver"]

TERMINAL = TERMINAL_NAMES
_SPEC_NAME = re.compile(r"^([0-9a-f]{12})\.json$")


class Driver(ChaosActions):
    """One chaos run against one state root (see :func:`tests.chaos.harness.run_chaos`)."""

    def __init__(self, cli: Cli, ledger: Path, plan: ChaosPlan, log_path: Path) -> None:
        self.cli = cli
        self.root = Path(cli.root)
        self.ledger = ledger
        self.plan = plan
        self.rng = random.Random(plan.seed)
        self.sleeps = [
            round(
                self.rng.uniform(plan.max_sleep, plan.long_sleep)
                if self.rng.random() < plan.long_share
                else self.rng.uniform(0.0, plan.max_sleep),
                2,
            )
            for _ in range(plan.jobs)
        ]
        self.lock = threading.Lock()
        self.next_job = 0
        self.acknowledged: list[str] = []
        self.outstanding: set[str] = set()  # acknowledged, not yet seen terminal
        self.collector_killed: set[str] = set()
        self.counts: Counter[str] = Counter()
        self.anomalies: list[str] = []
        self.log_path = log_path
        self._log = open(log_path, "a", buffering=1)
        self._log_lock = threading.Lock()
        self.started = time.monotonic()
        self.submitter_error: BaseException | None = None
        self.stopping = threading.Event()  # set when the run ends early: stop submitting
        self.submitter_thread: threading.Thread | None = None

    # --- bookkeeping ---------------------------------------------------------------------
    def log(self, message: str) -> None:
        with self._log_lock:
            if self._log.closed:  # a late line from a submitter that outlived the run
                return
            self._log.write(f"{time.monotonic() - self.started:9.3f} {message}\n")

    def anomaly(self, message: str) -> None:
        self.log(f"ANOMALY {message}")
        with self.lock:
            self.anomalies.append(message)

    def bump(self, key: str, by: int = 1) -> None:
        with self.lock:
            self.counts[key] += by

    def close(self) -> None:
        with self._log_lock:
            self._log.close()

    def fail(self, message: str) -> ChaosAborted:
        self.log(f"ABORT {message}")
        return ChaosAborted(f"seed={self.plan.seed}: {message} (chaos log: {self.log_path})")

    # --- specs ----------------------------------------------------------------------------
    def spec_path(self, job_id: str) -> Path:
        return self.root / "queue" / f"{job_id}.json"

    def read_spec(self, job_id: str) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self.spec_path(job_id).read_text())
        except (OSError, ValueError):
            return None
        return data

    def all_spec_ids(self) -> list[str]:
        try:
            names = os.listdir(self.root / "queue")
        except FileNotFoundError:
            return []
        return sorted(m.group(1) for m in map(_SPEC_NAME.match, names) if m)

    def refresh_outstanding(self) -> int:
        with self.lock:
            ids = list(self.outstanding)
        done = []
        for job_id in ids:
            spec = self.read_spec(job_id)
            if spec is not None and spec.get("state") in TERMINAL:
                done.append(job_id)
        with self.lock:
            self.outstanding.difference_update(done)
            return len(self.outstanding)

    # --- submitting -----------------------------------------------------------------------
    def take_job(self) -> int | None:
        with self.lock:
            if self.next_job >= self.plan.jobs or self.stopping.is_set():
                return None
            self.next_job += 1
            return self.next_job - 1

    def submit(self, index: int, origin: str) -> None:
        """Submit job ``index`` until the CLI acknowledges it (prints an id)."""
        argv = job_command(self.ledger, self.sleeps[index])
        size = self.plan.array_size
        swarm = ["--array", f"1-{size}", "--max-parallel", str(self.plan.max_jobs)]
        deadline = time.monotonic() + 120
        while True:
            options = swarm if size > 1 else []
            proc = self.cli.run("submit", *options, "--", *argv, check=False, timeout=90)
            ids = proc.stdout.split()
            if (
                proc.returncode == 0
                and len(ids) == size
                and all(re.fullmatch(r"[0-9a-f]{12}", job_id) for job_id in ids)
            ):
                with self.lock:
                    self.acknowledged.extend(ids)
                    self.outstanding.update(ids)
                    self.counts["submitted"] += 1
                    self.counts["submitted_jobs"] += size
                    self.counts[f"submitted_{origin}"] += 1
                self.log(f"submitted {' '.join(ids)} ({origin}, sleep {self.sleeps[index]:.2f})")
                return
            # The daemon died under the call: the job may or may not exist. Not
            # acknowledged, so not asserted on; submit the same command afresh.
            self.bump("submit_errors")
            tail = proc.stderr.strip().replace("\n", " | ")[-600:] or "(no stderr)"
            self.log(f"submit failed (rc {proc.returncode}, {origin}): {tail}")
            if time.monotonic() > deadline:
                raise self.fail(f"vq submit kept failing for 120s: {proc.stderr.strip()}")
            time.sleep(POLL_SECONDS)

    def submitter(self) -> None:
        rng = random.Random(self.plan.seed ^ 0x5EED5EED)
        try:
            while True:
                # Keep the queue busy but bounded, so chaos lands on live jobs.
                if not poll(
                    lambda: (
                        self.stopping.is_set() or self.refresh_outstanding() < self.plan.backlog
                    ),
                    600,
                ):
                    raise self.fail("the backlog did not drain for 600s")
                for _ in range(rng.randint(1, 12)):
                    index = self.take_job()
                    if index is None:
                        return
                    self.submit(index, "thread")
        except BaseException as exc:
            self.submitter_error = exc
            self.log(f"submitter died: {exc!r}")

    # --- the run --------------------------------------------------------------------------
    def actions(self) -> list[tuple[int, str]]:
        """Shuffled actions, each due once that many jobs were acknowledged."""
        plan = self.plan
        kinds = (
            ["daemon"] * plan.daemon_kills
            + ["collector"] * plan.collector_kills
            + ["graceful"] * plan.graceful_restarts
            + ["forkserver"] * plan.forkserver_only_kills
        )
        self.rng.shuffle(kinds)
        kinds = [
            "startup" if k == "daemon" and self.rng.random() < plan.startup_chance else k
            for k in kinds
        ]
        moments = sorted(self.rng.randrange(max(1, plan.jobs)) for _ in kinds)
        return list(zip(moments, kinds, strict=True))

    def run(self) -> None:
        self.log(f"plan {self.plan.describe()}")
        self.start_daemon()
        thread = threading.Thread(target=self.submitter, name="chaos-submitter", daemon=True)
        self.submitter_thread = thread
        thread.start()
        handlers = {
            "daemon": self.kill_daemon,
            "startup": self.kill_daemon_while_starting,
            "collector": self.kill_collector,
            "graceful": self.graceful_restart,
            "forkserver": self.kill_forkserver_only,
        }
        for moment, kind in self.actions():

            def due(moment: int = moment) -> bool:
                with self.lock:
                    reached = self.counts["submitted"] >= moment
                return reached or not thread.is_alive()

            if not poll(due, 600):
                raise self.fail(f"the job stream stalled before {moment} acknowledgements")
            time.sleep(self.rng.uniform(0.0, 0.25))  # chaos timing, not a race fix
            self.log(f"action {kind} at {self.counts['submitted']} acknowledged")
            handlers[kind]()
        thread.join(timeout=600)
        if thread.is_alive():
            raise self.fail("the submitter did not finish")
        if self.submitter_error is not None:
            raise self.submitter_error
        self.drain()

    def drain(self) -> None:
        """Restart the daemon if needed; wait until every spec is terminal; stop."""
        if self.live_daemon() is None:
            self.anomaly("the daemon was dead at the end of the chaos phase")
            self.start_daemon()
        budget = self.plan.drain_base + self.plan.drain_per_job * self.plan.jobs

        settled: set[str] = set()  # terminal is sticky: never re-read those

        def all_terminal() -> bool:
            if self.refresh_outstanding():
                return False
            for job_id in self.all_spec_ids():  # unacknowledged specs too
                if job_id in settled:
                    continue
                spec = self.read_spec(job_id)
                if spec is None or spec.get("state") not in TERMINAL:
                    return False
                settled.add(job_id)
            return True

        if not poll(all_terminal, budget):
            stuck = [
                (job_id, (self.read_spec(job_id) or {}).get("state"))
                for job_id in self.all_spec_ids()
                if (self.read_spec(job_id) or {}).get("state") not in TERMINAL
            ]
            raise self.fail(f"not every job ended within {budget:.0f}s: {stuck[:20]}")
        self.log("every spec is terminal")
        daemon = self.live_daemon()
        proc = self.cli.run("daemon", "stop", check=False, timeout=90)
        if proc.returncode != 0:
            self.anomaly(f"final vq daemon stop failed: {proc.stderr.strip()}")
        if daemon is not None and not poll(lambda: not alive(*daemon), 15):
            raise self.fail("the daemon did not stop at the end")
