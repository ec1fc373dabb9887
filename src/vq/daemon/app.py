"""The daemon: its parts, start-up, main loop and shutdown.

:func:`vq.daemon.compose.compose_daemon` builds a :class:`Daemon` from a state root and
settings; nothing is wired after construction. Start-up order (each step's failure
leaves a clear message in daemon.log and stderr):

1. take the singleton flock ``queue/.vq-daemon.lock`` (held for the process lifetime;
   the kernel drops it if we die), write ``daemon.pid``;
2. install the stop handlers (SIGTERM/SIGINT) — *before* the recovery pass;
3. start the fork server; run the recovery pass (interruptible at spec boundaries);
   finish what a killed ``vq cleanup`` left (:mod:`vq.cleanup.recovery`);
4. load the index (finished jobs from the terminal index where their spec file is
   unchanged, :mod:`vq.daemon.terminal_index`); bind ``daemon.sock`` (0600) — only now
   is the daemon visible;
5. loop: :meth:`Daemon.tick` (apply collector exits, poll orphans and kill graces,
   dispatch), then sleep until woken (submit, exit, wake RPC, signal) or the tick
   elapses.

Stopping stops dispatch and exits. Running jobs keep running (collectors are in their own
sessions) and are reattached by the next start; a stop never marks a job failed.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import vq as vq_package
from vq import __version__
from vq._fault_points import hold_point
from vq._fs import atomic_write_bytes, read_regular, try_lock_file
from vq.cleanup import recovery as cleanup_recovery
from vq.config.settings import Settings
from vq.errors import Conflict, StorageError, TransportError, VqError
from vq.executors.base import Engine, HostExecutor
from vq.executors.registry import ExecutorRegistry
from vq.executors.scheduler import LaneSet
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle
from vq.transport.local import LocalRunner

from .config_log import log_effective_config
from .dispatch import Dispatcher
from .doorbell import Doorbell
from .foreign_stops import stop_ended_elsewhere
from .handlers.info import DaemonFacts
from .holds import Holds, LoopCalls
from .inbox import LoopInbox
from .index import JobIndex
from .local_engine import LocalEngine
from .notify import Notifier
from .owner_submit import OwnerSubmitSockets
from .pressure import PressureGuard
from .recovery import recover
from .rpc import Route, RpcServer, SocketAccess
from .sidecar import WebSidecar
from .storage import StorageGuard
from .supervisor import Supervisor
from .terminal_index import TerminalIndexKeeper
from .watchdog import Watchdog

__all__ = ["Daemon", "DaemonParts", "provenance"]

log = logging.getLogger("vq.daemon")

#: How often the index looks for spec files written by other processes (names only).
RESCAN_SECONDS = 5.0
#: Poll interval while a group is owed a grace or an orphan is watched.
FAST_POLL_SECONDS = 0.2
#: How often running jobs are judged (memory, starvation); samples are written every 5 s.
WATCH_SECONDS = 1.0


def provenance(runner: LocalRunner) -> dict[str, str | None]:
    """What code this daemon runs: version, interpreter, install path, git SHA if any."""
    package = Path(vq_package.__file__).resolve().parent
    try:
        result = runner.run(["git", "-C", str(package), "rev-parse", "HEAD"], deadline_s=5)
        sha = result.stdout.decode(errors="replace").strip() if result.ok else None
    except TransportError:
        sha = None
    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "package_path": str(package),
        "git_sha": sha,
    }


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a start loads the queue, and what it loaded
    frozen out of every later collection (:func:`gc.freeze`).

    A start builds an object graph per spec (100,000 specs: about a million objects, and
    none of them garbage), and the collector's full passes over that growing heap took
    more time than the parsing itself. Frozen objects are still freed by reference
    counting when the index lets go of them; only a reference cycle made during the
    load and dropped later is never reclaimed (a bounded, one-time amount). Later
    collections, the idle daemon's included, then skip the loaded queue.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class DaemonParts:
    """Everything one daemon is made of, built and wired by ``compose_daemon``."""

    paths: StatePaths
    settings: Settings
    ctx: ServiceContext
    inbox: LoopInbox
    index: JobIndex
    holds: Holds
    loop_calls: LoopCalls
    lifecycle: Lifecycle
    supervisor: Supervisor
    #: The local executor, through the protocol (its fork server and cgroup probe).
    executor: HostExecutor
    #: Which executor runs each spec (the local one, or a scheduler lane).
    executors: ExecutorRegistry
    #: Scheduler lanes (``vq.executors.scheduler``): the active ones ticked every pass,
    #: retired ones settled, all closed at the end; rebuilt on a reload.
    lanes: LaneSet
    watchdog: Watchdog
    pressure: PressureGuard
    storage: StorageGuard
    dispatcher: Dispatcher
    #: The dispatcher's engine (claim and launch here): first of the engines ticked.
    local_engine: LocalEngine
    notifier: Notifier
    facts: DaemonFacts
    routes: Mapping[str, Route]
    runner: LocalRunner
    web: WebSidecar | None
    auto_resume: bool
    #: multi-user mode: ``daemon.sock`` as root:<admin group> 0660 with the token guard
    socket_access: SocketAccess | None = None
    #: how often foreign spec files are looked for (multi-user: users' CLIs cannot
    #: wake a daemon whose socket is the admins', so they are looked for every second)
    rescan_seconds: float = 5.0
    #: multi-user mode: users ring it after writing a spec (the loop then lists at once)
    doorbell: Path | None = None
    #: multi-user mode: each owner's ``users/<uid>/submit.sock``
    owner_sockets: OwnerSubmitSockets | None = None


class Daemon:
    """One daemon for one state root: :meth:`run` serves until stopped."""

    def __init__(self, parts: DaemonParts) -> None:
        self.parts = parts
        self.paths = parts.paths
        self.stop_requested = threading.Event()
        self._last_rescan = time.monotonic()
        self._rung = threading.Event()
        self._doorbell = (
            Doorbell(parts.doorbell, self._on_ring) if parts.doorbell is not None else None
        )
        self._lock_fd: int | None = None
        self._server: RpcServer | None = None
        self._terminal_index = TerminalIndexKeeper(parts.index)

    # --- signals ---------------------------------------------------------------------------
    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        self.request_stop()

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

    def start(self) -> bool:
        """Fork server, cgroup probe, recovery pass, index load. False if stopped meanwhile."""
        parts = self.parts
        parts.executor.start()
        mode = parts.executor.probe_scopes()
        parts.facts.cgroup_mode, parts.facts.cgroup_reason = mode.mode, mode.reason
        parts.facts.provenance = provenance(parts.runner)
        log.info("cgroup mode: %s (%s)", mode.mode, mode.reason)
        with _collector_paused():
            return self._load()

    def _load(self) -> bool:
        """:meth:`start`'s recovery pass and index load."""
        parts = self.parts
        report = recover(
            parts.ctx,
            parts.supervisor,
            self.stop_requested,
            parts.executors,
            engines=parts.lanes.active(),
        )
        log.info(
            "recovery: %d specs examined, %d reattached, %d finished from markers, "
            "%d aborted (%d auto-resumed), %d never started (requeued), "
            "%d leaked groups reaped",
            report.examined,
            len(report.reattached),
            len(report.finished),
            len(report.aborted),
            len(report.resumed_as),
            len(report.requeued),
            len(report.reaped_leaks),
        )
        if self.stop_requested.is_set():
            log.info("stopped during recovery; the socket was never published")
            return False
        self._finish_leftovers(report.archived())
        parts.index.load(report.untouched, report.listing)
        log.info(
            "index loaded: %d finished jobs from the terminal index, %d specs parsed",
            report.summarized,
            report.examined - report.summarized,
        )
        self._terminal_index.after_load(report.summarized)
        for item in parts.index.quarantined.values():
            log.warning("quarantined %s: %s", item.path, item.reason)
        return True

    def _finish_leftovers(self, archived: list[str]) -> None:
        """Complete what a killed ``vq cleanup``/``vq fetch`` left half done (archives
        recorded but not deleted, stale temp files); a failure is logged, never fatal.
        ``archived``: the specs that record an archive (the recovery pass saw them)."""
        try:
            for item in cleanup_recovery.recover(self.parts.ctx, archived=archived):
                log.info("leftover %s %s: %s", item.kind, item.path, item.action)
        except (OSError, VqError) as exc:
            log.warning("leftovers of interrupted cleanups not finished: %s", exc)

    def request_stop(self) -> None:
        """Stop the loop from any thread, as SIGTERM does: :meth:`run` returns after the
        pass under way, having shut down (running jobs go on)."""
        self.stop_requested.set()
        self.parts.inbox.wake()

    def run(self, *, install_signal_handlers: bool = True) -> int:
        """Run until stopped. Returns the process exit code.

        ``install_signal_handlers``: SIGTERM/SIGINT stop the daemon (step 2 above). Pass
        False to run the daemon on a thread other than the main one (Python installs
        signal handlers only there), e.g. composed inside a test process; then only
        :meth:`request_stop` stops it.
        """
        self.acquire()
        if install_signal_handlers:
            signal.signal(signal.SIGTERM, self._on_signal)
            signal.signal(signal.SIGINT, self._on_signal)
        log.info("vq %s daemon starting (pid %d) on %s", __version__, os.getpid(), self.paths.root)
        log_effective_config(self.parts.settings, self.parts.holds.overrides, "start")
        # This thread is the loop from here on: it owns the lanes, and the loop's calls
        # queue for it (no RPC thread may run one inline before the loop turns).
        self.parts.lanes.loop_started()
        self.parts.loop_calls.loop_started()
        try:
            if not self.start():
                return 0
            self._server = RpcServer(
                self.paths.daemon_sock,
                self.parts.routes,
                max_connections=self.parts.settings.daemon.max_connections,
                access=self.parts.socket_access,
                storage=self.parts.storage,
            )
            threading.Thread(target=self._server.serve_forever, name="vq-rpc", daemon=True).start()
            if self._doorbell is not None:
                self._doorbell.start()
            if self.parts.owner_sockets is not None:
                self.parts.owner_sockets.start(self._on_ring)
            log.info("daemon ready: %s", self.paths.daemon_sock)
            if self.parts.web is not None:
                self.parts.web.start()
            while not self.stop_requested.is_set():
                try:
                    timeout = self.tick()
                except OSError as exc:
                    # A write the state root could not take is that write's failure: note
                    # it (dispatch holds) and go on; what must be written is retried.
                    if self.parts.storage.failed_write(exc) is None:
                        raise
                    timeout = FAST_POLL_SECONDS
                except StorageError as exc:
                    self.parts.storage.note(exc)
                    timeout = FAST_POLL_SECONDS
                self.parts.inbox.wait(timeout)
            return 0
        finally:
            self.shutdown()

    def _on_ring(self) -> None:
        """A user wrote a spec: list the owners' queues at the next pass (doorbell thread)."""
        self._rung.set()
        self.parts.inbox.wake()

    def tick(self) -> float:
        """One pass of the main loop; returns how long to sleep (unless woken) before the next.

        Runs the calls other threads queued, restarts a dead fork server, applies holds,
        collector exits, kill graces and the watchdog, rescans for foreign spec files (and
        for running jobs another writer ended) every :data:`RESCAN_SECONDS` or when the
        doorbell rings, and dispatches what admission allows.
        """
        parts = self.parts
        parts.facts.loop_progress_at = time.monotonic()
        hold_point("loop_pass")  # a no-op unless a test holds the loop here
        parts.inbox.run_calls()
        if parts.executor.restart_if_dead():
            log.error("the fork server died; restarting it (running jobs become orphans)")
            parts.supervisor.orphan_all()
        parts.holds.tick()
        parts.storage.check()
        parts.supervisor.process()
        parts.watchdog.check()
        parts.pressure.check()  # every pass: it holds dispatch with no job running too
        if self._rung.is_set() or time.monotonic() - self._last_rescan >= parts.rescan_seconds:
            self._rung.clear()
            parts.index.refresh_names(if_changed=True)
            if parts.owner_sockets is not None:
                parts.owner_sockets.sync()  # a tree provisioned since gets its socket
            # a user's own kill, in their tree, that could not signal the group
            stop_ended_elsewhere(parts.supervisor, parts.ctx.store.read, parts.executor)
            self._last_rescan = time.monotonic()
            self._terminal_index.tick()
        engines = self.engines()
        for engine in engines:
            engine.tick()
        timeout = min(parts.settings.daemon.tick_seconds, parts.rescan_seconds)
        deadlines = [parts.watchdog.next_deadline()]
        deadlines += [engine.next_deadline() for engine in engines]
        for deadline in deadlines:
            if deadline is not None:
                timeout = min(timeout, deadline + 0.01)
        if parts.watchdog.has_work():
            timeout = min(timeout, WATCH_SECONDS)
        if parts.supervisor.needs_polling() or parts.storage.holding:
            timeout = min(timeout, FAST_POLL_SECONDS)
        return timeout

    def engines(self) -> list[Engine]:
        """The engines the loop ticks, in order: the local dispatcher's, then each
        active scheduler lane (a retired lane is settled first: closed once idle, its
        replacement built and adopting its jobs)."""
        self.parts.lanes.settle()
        return [self.parts.local_engine, *self.parts.lanes.active()]

    def shutdown(self) -> None:
        """Stop the web child and the RPC server, close the fork server, drop the lock."""
        parts = self.parts
        if self._doorbell is not None:
            self._doorbell.stop()
        if parts.owner_sockets is not None:
            parts.owner_sockets.stop()
        if parts.web is not None:
            parts.web.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            try:
                self.paths.daemon_sock.unlink()
            except FileNotFoundError:
                pass
        parts.local_engine.close()
        self._terminal_index.close()
        parts.lanes.close()  # every lane, the retiring ones too
        parts.notifier.stop()
        try:
            if self._recorded_pid() == os.getpid():
                self.paths.daemon_pid.unlink()
        except FileNotFoundError:
            pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        log.info("daemon stopped")
