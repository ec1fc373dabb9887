"""The web console as a child of the daemon (``vq daemon run --web``).

Contracts:

* The daemon never imports :mod:`vq.web`: it runs ``python -m vq.web --mode sidecar``
  as a subprocess in its own session, with the daemon's environment (so the same state
  and config roots), its output appended to ``<state-root>/web.log``.
* A monitor thread waits for the child; when it exits while the daemon runs, a line goes
  to daemon.log and a new child starts after a backoff (1 s, doubling to 30 s; reset once
  a child has stayed up for :data:`STABLE_SECONDS`). The main loop is never blocked.
* :meth:`WebSidecar.stop` (called when the daemon stops) ends the child: SIGTERM to its
  group, then SIGKILL after :data:`STOP_GRACE_SECONDS`. The child also exits on its own
  when its parent disappears (``--parent-pid``), so a SIGKILL'd daemon leaves no console.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from vq._fs import open_log
from vq.paths import StatePaths

__all__ = ["DEFAULT_WEB_PORT", "WebOptions", "WebSidecar"]

log = logging.getLogger("vq.daemon.web")

DEFAULT_WEB_PORT = 8477
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 30.0
STABLE_SECONDS = 60.0
STOP_GRACE_SECONDS = 10.0


@dataclass(frozen=True)
class WebOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_WEB_PORT
    #: A non-loopback host was explicitly accepted (``--web-allow-remote``).
    allow_remote: bool = False
    #: Serve the fleet console too (``--web --fleet``).
    fleet: bool = False


class WebSidecar:
    """Owns at most one web console child at a time."""

    def __init__(self, paths: StatePaths, options: WebOptions) -> None:
        self.paths = paths
        self.options = options
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self.restarts = 0

    def argv(self) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            "vq.web",
            "--host",
            self.options.host,
            "--port",
            str(self.options.port),
            "--mode",
            "sidecar",
            "--parent-pid",
            str(os.getpid()),
        ]
        if self.options.allow_remote:
            argv.append("--allow-remote")
        if self.options.fleet:
            argv.append("--fleet")
        return argv

    @property
    def pid(self) -> int | None:
        child = self._child
        return child.pid if child is not None and child.poll() is None else None

    def start(self) -> None:
        """Start the first child and the monitor thread (returns at once)."""
        self._spawn()
        self._thread = threading.Thread(target=self._monitor, name="vq-web-sidecar", daemon=True)
        self._thread.start()

    def _spawn(self) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            with os.fdopen(open_log(self.paths.web_log), "ab") as out:  # never world-readable
                self._child = subprocess.Popen(
                    self.argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                    close_fds=True,
                )
            log.info(
                "web console started (pid %d) on %s:%d",
                self._child.pid,
                self.options.host,
                self.options.port,
            )

    def _monitor(self) -> None:
        backoff = FIRST_BACKOFF_SECONDS
        while not self._stopping.is_set():
            child = self._child
            if child is None:
                return
            started = time.monotonic()
            code = child.wait()  # this thread's only job: the loop never waits on it
            if self._stopping.is_set():
                return
            if time.monotonic() - started >= STABLE_SECONDS:
                backoff = FIRST_BACKOFF_SECONDS
            log.warning(
                "web console (pid %d) exited with %s; restarting in %.0fs",
                child.pid,
                _describe(code),
                backoff,
            )
            if self._stopping.wait(backoff):
                return
            backoff = min(MAX_BACKOFF_SECONDS, backoff * 2)
            self.restarts += 1
            try:
                self._spawn()
            except OSError as exc:
                log.error("web console could not be started: %s", exc)

    def stop(self) -> None:
        """End the child (SIGTERM, then SIGKILL after the grace) and the monitor."""
        with self._lock:
            self._stopping.set()
            child = self._child
        if child is not None and child.poll() is None:
            _signal_group(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                _signal_group(child.pid, signal.SIGKILL)
                child.wait()
            log.info("web console stopped (pid %d)", child.pid)
        if self._thread is not None:
            self._thread.join(timeout=STOP_GRACE_SECONDS)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"
