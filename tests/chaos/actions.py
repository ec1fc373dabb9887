"""The chaos harness's moves on the daemon and its processes: start, stop, ``kill -9``
of the daemon (also while starting, sometimes with its fork server), of a running job's
collector, of the fork server alone, and a graceful restart.

:class:`ChaosActions` is a part of :class:`tests.chaos.driver.Driver`: it uses the
driver's bookkeeping (``log``, ``bump``, ``anomaly``, ``fail``) and submissions, declared
below. Every process is killed only if it is still the one found (pid and start ticks).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.chaos.plan import ChaosAborted, ChaosPlan, Cli
from tests.chaos.procs import alive, cmdline, pids, poll, proc_stat

__all__ = ["ChaosActions"]

_FORKSERVER = "_forkserver.py"
_DAEMON_MODULE = "vq.daemon"


class ChaosActions:
    """The daemon's lifecycle and the chaos actions of one run."""

    cli: Cli
    root: Path
    plan: ChaosPlan
    rng: random.Random
    lock: threading.Lock
    outstanding: set[str]
    collector_killed: set[str]

    # --- what the driver provides -----------------------------------------------------------
    def log(self, message: str) -> None:
        raise NotImplementedError

    def anomaly(self, message: str) -> None:
        raise NotImplementedError

    def bump(self, key: str, by: int = 1) -> None:
        raise NotImplementedError

    def fail(self, message: str) -> ChaosAborted:
        raise NotImplementedError

    def read_spec(self, job_id: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def take_job(self) -> int | None:
        raise NotImplementedError

    def submit(self, index: int, origin: str) -> None:
        raise NotImplementedError

    # --- the daemon -----------------------------------------------------------------------
    def recorded_daemon_pid(self) -> int | None:
        try:
            return int((self.root / "daemon.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def live_daemon(self) -> tuple[int, int] | None:
        """(pid, start ticks) of the daemon recorded in daemon.pid, if it is alive."""
        pid = self.recorded_daemon_pid()
        if pid is None:
            return None
        stat = proc_stat(pid)
        if stat is None or not stat.alive or _DAEMON_MODULE not in cmdline(pid):
            return None
        return pid, stat.start_ticks

    def forkservers_of(self, daemon_pid: int) -> list[tuple[int, int]]:
        found = []
        for pid in pids():
            stat = proc_stat(pid)
            if (
                stat is not None
                and stat.alive
                and stat.ppid == daemon_pid
                and _FORKSERVER in cmdline(pid)
            ):
                found.append((pid, stat.start_ticks))
        return found

    def start_daemon(self) -> None:
        """``vq daemon start``, retried while a dying daemon still holds the root."""
        deadline = time.monotonic() + 60
        while True:
            proc = self.cli.run(
                "daemon", "start", "--max-jobs", str(self.plan.max_jobs), check=False, timeout=90
            )
            if proc.returncode == 0:
                self.bump("restarts")
                self.log(f"daemon started: {proc.stdout.strip()}")
                return
            message = proc.stderr.strip()
            self.log(f"daemon start failed (rc {proc.returncode}): {message}")
            if "already runs" not in message:
                self.anomaly(f"vq daemon start failed: {message}")
            self.bump("start_retries")
            if time.monotonic() > deadline:
                raise self.fail(f"the daemon did not start within 60s: {message}")
            poll(lambda: self.live_daemon() is None, 5)

    def ensure_daemon(self) -> tuple[int, int]:
        daemon = self.live_daemon()
        if daemon is None:
            self.anomaly("the daemon was found dead without the harness killing it")
            self.start_daemon()
            daemon = self.live_daemon()
            if daemon is None:
                raise self.fail("no live daemon after a successful start")
        return daemon

    def kill_process(self, pid: int, start_ticks: int, what: str) -> bool:
        """SIGKILL ``pid`` if it is still that process; then wait until it is gone."""
        if not alive(pid, start_ticks):
            return False
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        if not poll(lambda: not alive(pid, start_ticks), 15):
            raise self.fail(f"{what} {pid} survived SIGKILL for 15s")
        return True

    # --- chaos actions --------------------------------------------------------------------
    def kill_running_daemon(self) -> None:
        """kill -9 the live daemon (and sometimes its fork server); wait until gone."""
        pid, ticks = self.ensure_daemon()
        servers = self.forkservers_of(pid)  # found now: once orphaned, its ppid is 1
        also_server = bool(servers) and self.rng.random() < self.plan.forkserver_chance
        if self.kill_process(pid, ticks, "daemon"):
            self.bump("daemon_kills")
            self.log(f"kill -9 daemon {pid}")
        if also_server:
            for server, server_ticks in servers:
                if self.kill_process(server, server_ticks, "fork server"):
                    self.bump("forkserver_kills")
                    self.log(f"kill -9 fork server {server}")

    def kill_daemon(self) -> None:
        self.kill_running_daemon()
        if self.rng.random() < self.plan.down_submit_chance:
            for _ in range(self.rng.randint(1, 3)):
                index = self.take_job()
                if index is not None:
                    self.submit(index, "down")  # the CLI writes the spec itself
        self.start_daemon()

    def kill_daemon_while_starting(self) -> None:
        """Kill the daemon; start one and kill it at once (recovery pass or just after)."""
        self.kill_running_daemon()
        old = self.recorded_daemon_pid()
        delay = self.rng.uniform(0.0, 0.15)
        starter = subprocess.Popen(
            [_vq_bin(self.cli), "daemon", "start", "--max-jobs", str(self.plan.max_jobs)],
            env=self.cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        daemon: tuple[int, int] | None = None
        try:

            def fresh() -> tuple[int, int] | None:
                daemon = self.live_daemon()
                return daemon if daemon is not None and daemon[0] != old else None

            poll(lambda: fresh() or starter.poll() is not None, 30)
            daemon = fresh()
            if daemon is not None:
                time.sleep(delay)  # chaos timing, not a race fix
                if self.kill_process(*daemon, "starting daemon"):
                    self.bump("daemon_kills")
                    self.bump("startup_kills")
                    self.log(f"kill -9 starting daemon {daemon[0]} after {delay:.3f}s")
        finally:
            out, err = starter.communicate(timeout=90)
        output = (out + err).strip()
        self.log(f"interrupted start exited {starter.returncode}: {output}")
        if daemon is None:
            if starter.returncode is None or starter.returncode == 0:
                raise self.fail("a starting daemon never published a live daemon.pid")
            self.anomaly(f"vq daemon start failed before the harness killed it: {output}")
        self.start_daemon()

    def kill_collector(self) -> None:
        self.ensure_daemon()

        def candidates() -> list[tuple[str, int, int]]:
            with self.lock:
                ids = list(self.outstanding)
            found = []
            for job_id in ids:
                spec = self.read_spec(job_id)
                if spec is None or spec.get("state") != "RUNNING":
                    continue
                pgid, ticks = spec.get("pgid"), spec.get("pid_start_time")
                if not isinstance(pgid, int) or not isinstance(ticks, int):
                    continue
                stat = proc_stat(pgid)
                # The collector: alive, leads its group, is the recorded process, and
                # is a fork of the fork server (same program in its cmdline).
                if (
                    stat is not None
                    and stat.alive
                    and stat.pgid == pgid
                    and stat.start_ticks == ticks
                    and _FORKSERVER in cmdline(pgid)
                ):
                    found.append((job_id, pgid, ticks))
            return found

        found = poll(candidates, 3)
        if not found:
            self.bump("collector_kill_skipped")
            self.log("no running collector to kill")
            return
        job_id, pgid, ticks = self.rng.choice(found)
        with self.lock:
            self.collector_killed.add(job_id)
        if self.kill_process(pgid, ticks, "collector"):
            self.bump("collector_kills")
            self.log(f"kill -9 collector {pgid} of job {job_id}")

    def kill_forkserver_only(self) -> None:
        pid, _ = self.ensure_daemon()
        servers = poll(lambda: self.forkservers_of(pid), 5)
        if not servers:
            self.anomaly(f"daemon {pid} has no fork server")
            return
        for server, ticks in servers:
            if self.kill_process(server, ticks, "fork server"):
                self.bump("forkserver_kills")
                self.bump("forkserver_only_kills")
                self.log(f"kill -9 fork server {server} under live daemon {pid}")
        # The daemon must notice and respawn it (its loop checks every tick).
        if not poll(lambda: self.forkservers_of(pid), 30):
            self.anomaly(f"daemon {pid} did not respawn its fork server within 30s")

    def graceful_restart(self) -> None:
        pid, ticks = self.ensure_daemon()
        proc = self.cli.run("daemon", "stop", check=False, timeout=90)
        if proc.returncode != 0:
            self.anomaly(f"vq daemon stop failed: {proc.stderr.strip()}")
        if not poll(lambda: not alive(pid, ticks), 15):
            raise self.fail(f"daemon {pid} still alive 15s after vq daemon stop")
        self.bump("graceful_stops")
        self.log(f"graceful stop of daemon {pid}")
        self.start_daemon()


def _vq_bin(cli: Cli) -> str:
    for directory in cli.env.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory, "vq")
        if os.access(candidate, os.X_OK):
            return candidate
    return "vq"
