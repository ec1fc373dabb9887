"""The daemon: composition root and main loop.

Start-up order (each step's failure leaves a clear message in daemon.log and stderr):

1. take the singleton flock ``queue/.vq-daemon.lock`` (held for the process lifetime;
   the kernel drops it if we die), write ``daemon.pid``;
2. install the stop handlers (SIGTERM/SIGINT) — *before* the recovery pass;
3. start the fork server; run the recovery pass (interruptible at spec boundaries);
4. load the index; bind ``daemon.sock`` (0600) — only now is the daemon visible;
5. loop: apply collector exits, poll orphans and kill graces, dispatch, sleep until
   woken (submit, exit, wake RPC, signal) or the tick elapses.

Stopping stops dispatch and exits. Running jobs keep running (collectors are in their own
sessions) and are reattached by the next start; a stop never marks a job failed.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import vq as vq_package
from vq import __version__
from vq._fs import atomic_write_bytes, read_regular, try_lock_file
from vq.config import Settings
from vq.domain.spec import JobSpec
from vq.errors import Conflict, VqError
from vq.executors.cgroups import CgroupMode
from vq.executors.local import LocalExecutor
from vq.executors.registry import ExecutorRegistry
from vq.paths import StatePaths
from vq.services.cleanup import sweep_workdir
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle
from vq.services.rerun import maybe_rerun
from vq.transport.local import LocalRunner

from .config_log import log_effective_config
from .dispatch import Dispatcher
from .handlers import build_methods
from .holds import Holds, LoopCalls
from .index import JobIndex
from .notify import Notifier
from .pressure import PressureGuard
from .recovery import recover
from .rpc import RpcServer
from .sidecar import WebOptions, WebSidecar
from .supervisor import Supervisor
from .watchdog import Watchdog

__all__ = ["Daemon", "provenance"]


def provenance(runner: LocalRunner) -> dict[str, str | None]:
    """What code this daemon runs: version, interpreter, install path, git SHA if any."""
    package = Path(vq_package.__file__).resolve().parent
    result = runner.run(["git", "-C", str(package), "rev-parse", "HEAD"], timeout=5)
    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "package_path": str(package),
        "git_sha": result.stdout.strip() if result.ok else None,
    }


log = logging.getLogger("vq.daemon")

#: How often the index looks for spec files written by other processes (names only).
RESCAN_SECONDS = 5.0
#: Poll interval while a group is owed a grace or an orphan is watched.
FAST_POLL_SECONDS = 0.2
#: How often running jobs are judged (memory, starvation); samples are written every 5 s.
WATCH_SECONDS = 1.0


class Daemon:
    """One daemon for one state root."""

    def __init__(
        self,
        paths: StatePaths,
        settings: Settings,
        *,
        auto_resume: bool = False,
        overrides: dict[str, Any] | None = None,
        web: WebOptions | None = None,
    ) -> None:
        self.paths = paths
        #: The web console child (``--web``), started once the socket is published.
        self.web = WebSidecar(paths, web) if web is not None else None
        self.auto_resume = auto_resume
        self.settings = settings
        self.ctx = ServiceContext(
            paths,
            settings.daemon.caps(),
            profiles=settings.profile,
            programs=settings.programs,
            default_recover_on_reboot=auto_resume,  # only the default of later submits
        )
        self.loop_calls = LoopCalls(self.call_soon)
        self.holds = Holds(
            self.ctx,
            settings,
            overrides,
            lambda: [
                job_id
                for job_id, holder in self.supervisor.holders.items()
                if not holder.collector_done and holder.pgid is not None
            ],
            self.loop_calls,
        )
        self.index = JobIndex(self.ctx.store)
        self.stop_requested = threading.Event()
        self.wake_event = threading.Event()
        self.started_monotonic = time.monotonic()
        #: ``time.monotonic()`` of the main loop's latest pass (``health``), None before it.
        self.loop_progress_at: float | None = None
        self.started_at = self.ctx.now()
        self.runner = LocalRunner()
        self.provenance: dict[str, str | None] = {}
        #: Called once for every job that has fully ended (terminal, process gone): terminal
        #: bookkeeping such as notifications and reruns registers here.
        self.ended_listeners: list[Callable[[JobSpec], None]] = [self._rerun, self._sweep]
        #: Terminal webhook (§6.2); resolving its secret can refuse the start (ConfigError).
        self.notifier = Notifier.from_settings(settings.notifications, os.environ)
        self.ended_listeners.append(self.notifier.notify)
        #: The one writer of state transitions; the end of a job runs on the loop.
        self.lifecycle = Lifecycle(
            self.ctx,
            on_change=self.index.upsert,
            on_ended=lambda spec: self.call_soon(lambda: self.job_ended(spec)),
        )
        self.executor = LocalExecutor(paths, runner=self.runner)
        self.executors = ExecutorRegistry(self.executor)  # no scheduler lane configured
        self.supervisor = Supervisor(self.ctx, self.lifecycle, self.executor)
        self.supervisor.wake = self.wake
        self.executor.attach_fork_server(self.supervisor.on_collector_exit)
        self.watchdog = Watchdog(self.ctx, self.supervisor, self.index.get, settings.watchdog)
        self.pressure = PressureGuard(
            self.ctx, self.supervisor, self.index.get, settings.watchdog, self.index.upsert
        )
        self.dispatcher = Dispatcher(
            self.ctx,
            self.supervisor,
            self.executors,
            self.index,
            self.lifecycle,
            dict(os.environ),
            hold=lambda: self.pressure.holding or self.holds.holding,
            affinity_cores=self.affinity_cores,
        )
        self.supervisor.launch_handler = self.dispatcher.apply_launch
        self._calls: list[Callable[[], None]] = []
        self._calls_lock = threading.Lock()
        self._lock_fd: int | None = None
        self._server: RpcServer | None = None

    def affinity_cores(self) -> frozenset[int] | None:
        """The cores jobs are pinned within (the daemon's own affinity), or None when
        ``[daemon] cpu_affinity`` is off (read on the loop; a reload applies)."""
        if not self.holds.settings.daemon.cpu_affinity or not hasattr(os, "sched_getaffinity"):
            return None
        return frozenset(os.sched_getaffinity(0))

    def dispatch_hold(self) -> str | None:
        """Why dispatch is held now (memory pressure, a drain, the config), or None; the
        ``pending_reason`` of a PENDING job that would otherwise be dispatched."""
        if self.pressure.hold_reason is not None:
            return self.pressure.hold_reason
        return self.holds.hold_reason()

    @property
    def cgroup(self) -> CgroupMode:
        """How local jobs are scoped (§5.2), as the local executor probed it."""
        return self.executor.cgroup

    def _rerun(self, spec: JobSpec) -> None:
        sibling = maybe_rerun(self.ctx, spec)
        if sibling is not None:
            self.index.upsert(sibling)

    def _sweep(self, spec: JobSpec) -> None:
        """``--clean-workdir``: remove VQ_WORKDIR off the loop (a big tree takes a while)."""
        if not spec.clean_workdir_on_terminal or spec.workdir_swept_at is not None:
            return

        def work() -> None:
            try:
                self.index.upsert(sweep_workdir(self.ctx, spec))
            except VqError as exc:
                log.warning("job %s: workdir not swept: %s", spec.id, exc.message)

        threading.Thread(target=work, name=f"vq-sweep-{spec.id}", daemon=True).start()

    def job_ended(self, spec: JobSpec) -> None:
        """Terminal bookkeeping for one ended job (on the loop; listeners must not raise)."""
        for listener in self.ended_listeners:
            try:
                listener(spec)
            except Exception:
                log.exception("terminal bookkeeping failed for job %s", spec.id)

    # --- cross-thread plumbing ---------------------------------------------------------
    def wake(self) -> None:
        self.wake_event.set()

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the main loop (the only thread that touches the supervisor)."""
        with self._calls_lock:
            self._calls.append(fn)
        self.wake()

    def _run_calls(self) -> None:
        with self._calls_lock:
            calls, self._calls = self._calls, []
        for fn in calls:
            fn()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        self.stop_requested.set()
        self.wake()

    # --- lifecycle -------------------------------------------------------------------------
    def acquire(self) -> None:
        """Take the singleton lock and publish daemon.pid, or raise Conflict."""
        self.paths.ensure()
        fd = try_lock_file(self.paths.daemon_lock)
        if fd is None:
            pid = self._recorded_pid()
            raise Conflict(
                f"a vq daemon already runs for {self.paths.root}"
                + (f" (pid {pid})" if pid else ""),
                hint="`vq daemon status` shows it; `vq daemon stop` stops it",
                reference="daemon-running",
            )
        self._lock_fd = fd
        atomic_write_bytes(self.paths.daemon_pid, f"{os.getpid()}\n".encode())

    def _recorded_pid(self) -> int | None:
        try:
            return int(read_regular(self.paths.daemon_pid, 64).decode().strip())
        except (OSError, ValueError):
            return None

    def run(self) -> int:
        """Run until stopped. Returns the process exit code."""
        self.acquire()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        log.info("vq %s daemon starting (pid %d) on %s", __version__, os.getpid(), self.paths.root)
        log_effective_config(self.settings, self.holds.overrides, "start")
        try:
            self.executor.start()
            self.executor.probe_scopes()
            self.provenance = provenance(self.runner)
            log.info("cgroup mode: %s (%s)", self.cgroup.mode, self.cgroup.reason)
            report = recover(self.ctx, self.supervisor, self.stop_requested)
            log.info(
                "recovery: %d specs examined, %d reattached, %d finished from markers, "
                "%d aborted (%d auto-resumed), %d leaked groups reaped",
                report.examined,
                len(report.reattached),
                len(report.finished),
                len(report.aborted),
                len(report.resumed_as),
                len(report.reaped_leaks),
            )
            if self.stop_requested.is_set():
                log.info("stopped during recovery; the socket was never published")
                return 0
            self.index.load(self.ctx.store.scan())
            for item in self.index.quarantined.values():
                log.warning("quarantined %s: %s", item.path, item.reason)
            self._server = RpcServer(self.paths.daemon_sock, build_methods(self))
            threading.Thread(target=self._server.serve_forever, name="vq-rpc", daemon=True).start()
            log.info("daemon ready: %s", self.paths.daemon_sock)
            if self.web is not None:
                self.web.start()
            self._loop()
            return 0
        finally:
            self._shutdown()

    def _loop(self) -> None:
        tick = self.settings.daemon.tick_seconds
        last_rescan = time.monotonic()
        self.loop_calls.loop_started()
        while not self.stop_requested.is_set():
            self.loop_progress_at = time.monotonic()
            self._run_calls()
            if self.executor.restart_if_dead():
                log.error("the fork server died; restarting it (running jobs become orphans)")
                self.supervisor.orphan_all()
            self.holds.tick()
            self.supervisor.process()
            self.watchdog.check()
            self.pressure.check()  # every pass: it holds dispatch with no job running too
            if time.monotonic() - last_rescan >= RESCAN_SECONDS:
                self.index.refresh_names(if_changed=True)
                last_rescan = time.monotonic()
            self.dispatcher.run_pass()
            timeout = tick
            for deadline in (self.supervisor.next_deadline(), self.watchdog.next_deadline()):
                if deadline is not None:
                    timeout = min(timeout, deadline + 0.01)
            if self.watchdog.has_work():
                timeout = min(timeout, WATCH_SECONDS)
            if self.supervisor.needs_polling():
                timeout = min(timeout, FAST_POLL_SECONDS)
            self.wake_event.wait(timeout)
            self.wake_event.clear()

    def _shutdown(self) -> None:
        if self.web is not None:
            self.web.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            try:
                self.paths.daemon_sock.unlink()
            except FileNotFoundError:
                pass
        self.executor.close()
        self.notifier.stop()
        try:
            if self._recorded_pid() == os.getpid():
                self.paths.daemon_pid.unlink()
        except FileNotFoundError:
            pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        log.info("daemon stopped")

    # --- used by the RPC handlers ------------------------------------------------------
    def remember(self, spec: JobSpec) -> None:
        self.index.upsert(spec)
