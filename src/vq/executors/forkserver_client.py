"""The daemon's side of the fork server: spawn it, launch jobs through it, hear exits.

The daemon is big, and ``fork`` costs ~25 µs per MiB of the forking process's RSS, so
it never forks per job. :class:`ForkServer` spawns ``_forkserver.py`` (a stdlib-only
script, see its docstring for the wire protocol) once, over a ``socketpair``, and asks
it to launch each job. The server forks a *collector* per job; the collector leads its
own session (``pgid == pid``), runs the command, and writes the resource-usage receipt
and then the exit-code marker itself, so a job's outcome survives a daemon crash.

Contracts:

* :meth:`ForkServer.launch` returns once the collector exists and leads its process
  group: ``Launched.pgid == Launched.pid`` and ``killpg(pgid, ...)`` reaches the job.
  It is thread-safe; writes to the socket are serialised by a lock and replies are
  routed to the waiting caller by job id (one launch per job id in flight at a time).
* Failures raise :class:`LaunchError` (a :class:`~vq.errors.VqError`): reference
  ``launch-failed`` (the server refused or could not fork, or it is not running) or
  ``launch-timeout``. **After a timeout the outcome is unknown**: the job may have been
  launched; its late ``launched`` reply is logged, and its exit is still reported.
* ``on_exit`` is called on the reader thread for every collector the server reaps. It
  must be quick, thread-safe, and must not call :meth:`ForkServer.launch` or wait for
  anything a launching thread holds (the reader thread also delivers launch replies).
  It may run *before* ``launch()`` has returned to the caller for the same job. An
  exception in it is logged and swallowed. ``CollectorExit.exit_code`` is the
  *collector's* status (0 = markers written); the job's own exit code is in its marker.
* If the server dies, every pending launch fails, :meth:`ForkServer.alive` turns False
  and :meth:`ForkServer.start` respawns it. Collectors never depend on the server:
  after a death or :meth:`ForkServer.close` they keep running and write their markers,
  but their exits are no longer reported here; the daemon must then rely on the markers
  and on :mod:`vq.executors.procs` liveness checks.
* The server stays in the daemon's process group (it ignores SIGINT), runs with cwd
  ``/``, stdin and stdout on /dev/null, and stderr shared with the daemon.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vq.executors._fsconn import Connection, Waiter
from vq.executors.launch import (
    SERVER_EXITED,
    CollectorExit,
    LaunchCallback,
    Launched,
    LaunchError,
    LaunchRequest,
)

log = logging.getLogger(__name__)

__all__ = [  # the launch types are re-exported for the modules that import them from here
    "SERVER_EXITED",
    "SERVER_SCRIPT",
    "CollectorExit",
    "ForkServer",
    "LaunchError",
    "LaunchRequest",
    "Launched",
]

#: The fork server program, run as ``<python> -I -S SERVER_SCRIPT <fd>``.
SERVER_SCRIPT = Path(__file__).absolute().with_name("_forkserver.py")

_RECV_SIZE = 1 << 16
_REAP_SECONDS = 5.0


class ForkServer:
    """Client of one fork-server process. See the module docstring for the contracts."""

    def __init__(
        self, on_exit: Callable[[CollectorExit], None], python: str = sys.executable
    ) -> None:
        self._on_exit = on_exit
        self._python = python
        self._state_lock = threading.Lock()
        self._conn: Connection | None = None

    # --- lifecycle -----------------------------------------------------------------
    def start(self) -> None:
        """Spawn the server and its reader thread; no-op while one is running."""
        with self._state_lock:
            old = self._conn
            if old is not None and old.usable():
                return
            if old is not None:
                self._dispose(old)
            parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                proc = subprocess.Popen(
                    [self._python, "-I", "-S", str(SERVER_SCRIPT), str(child.fileno())],
                    pass_fds=(child.fileno(),),
                    close_fds=True,
                    start_new_session=False,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    cwd="/",
                )
            except OSError as exc:
                parent.close()
                raise LaunchError(
                    f"cannot start the fork server: {exc}",
                    hint=f"check that {self._python} can run",
                    reference="forkserver-start-failed",
                ) from exc
            finally:
                child.close()
            conn = Connection(parent, proc)
            conn.reader = threading.Thread(
                target=self._read_loop,
                args=(conn,),
                name=f"vq-forkserver-reader-{proc.pid}",
                daemon=True,
            )
            self._conn = conn
            conn.reader.start()
            log.debug("fork server started (pid %d)", proc.pid)

    def close(self) -> None:
        """Close the socket so the server exits; reap it. Collectors keep running.

        Events the server sent before it saw EOF are still delivered to ``on_exit``.
        """
        with self._state_lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                self._dispose(conn)

    def __enter__(self) -> ForkServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def alive(self) -> bool:
        """True while the server process runs and its socket is open."""
        conn = self._conn
        return conn is not None and conn.usable()

    @property
    def server_pid(self) -> int | None:
        """Pid of the current server process (running or not), None before start()."""
        conn = self._conn
        return None if conn is None else conn.proc.pid

    # --- requests --------------------------------------------------------------------
    def launch(self, request: LaunchRequest, timeout: float = 10.0) -> Launched:
        """Launch one job and return once its collector leads its process group.

        Raises :class:`LaunchError` if the server refuses or is not running (reference
        ``launch-failed``) or does not answer within ``timeout`` seconds (reference
        ``launch-timeout``: the job may have been launched anyway), and ValueError for an
        ill-formed request.
        """
        message = request.to_message()
        job_id = request.job_id
        conn = self._conn
        waiter = Waiter()
        if conn is None:
            raise LaunchError(
                f"cannot launch job {job_id}: the fork server is not running",
                hint="start the fork server first",
            )
        with conn.lock:
            if conn.dead:
                raise LaunchError(
                    f"cannot launch job {job_id}: the fork server is not running",
                    hint="restart the fork server",
                )
            if job_id in conn.pending:
                raise LaunchError(f"a launch of job {job_id} is already in flight")
            conn.pending[job_id] = waiter
            try:
                conn.send(message)
            except OSError as exc:
                conn.pending.pop(job_id, None)
                raise LaunchError(
                    f"cannot launch job {job_id}: fork server unreachable: {exc}"
                ) from exc
        if not waiter.event.wait(timeout):
            with conn.lock:
                timed_out = conn.pending.get(job_id) is waiter
                if timed_out:
                    del conn.pending[job_id]
            if timed_out:
                raise LaunchError(
                    f"launch of job {job_id} not confirmed within {timeout:g}s;"
                    " it may or may not be running",
                    hint="check the job's process group and exit marker",
                    reference="launch-timeout",
                )
        if waiter.launched is not None:
            return waiter.launched
        raise LaunchError(f"cannot launch job {job_id}: {waiter.error}")

    def launch_async(self, request: LaunchRequest, callback: LaunchCallback) -> None:
        """Send a launch without waiting; ``callback`` runs on the reader thread.

        The callback gets ``(job_id, Launched, None)`` once the collector leads its group,
        or ``(job_id, None, error)``. For one job it always runs before that job's
        ``on_exit`` (the server answers in order and one thread delivers both). If the
        request cannot even be sent, the callback runs at once on the calling thread.
        """
        message = request.to_message()
        job_id = request.job_id
        conn = self._conn
        waiter = Waiter(callback)
        if conn is None:
            waiter.error = "the fork server is not running"
            waiter.settle(job_id)
            return
        with conn.lock:
            failure = None
            if conn.dead:
                failure = "the fork server is not running"
            elif job_id in conn.pending:
                failure = f"a launch of job {job_id} is already in flight"
            else:
                conn.pending[job_id] = waiter
                try:
                    conn.send(message)
                    waiter.sent = True
                except OSError as exc:
                    conn.pending.pop(job_id, None)
                    failure = f"fork server unreachable: {exc}"
        if failure is not None:
            waiter.error = failure
            waiter.settle(job_id)

    def ping(self, timeout: float = 5.0) -> bool:
        """True if the server answers a ping within ``timeout`` seconds."""
        conn = self._conn
        if conn is None:
            return False
        waiter = Waiter()
        with conn.lock:
            if conn.dead:
                return False
            conn.pongs.append(waiter)
            try:
                conn.send({"op": "ping"})
            except OSError:
                conn.pongs.remove(waiter)
                return False
        return waiter.event.wait(timeout) and waiter.error is None

    # --- internals -------------------------------------------------------------------
    def _dispose(self, conn: Connection) -> None:
        conn.closing = True
        try:
            conn.sock.shutdown(socket.SHUT_WR)  # the server reads EOF and exits
        except OSError:
            pass
        conn.reap()
        if conn.reader is not None and conn.reader is not threading.current_thread():
            conn.reader.join(_REAP_SECONDS)
        conn.sock.close()

    def _read_loop(self, conn: Connection) -> None:
        buffer = b""
        try:
            while True:
                data = conn.sock.recv(_RECV_SIZE)
                if not data:
                    break
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        self._dispatch(conn, line)
        except OSError as exc:
            if not conn.closing:
                log.warning("fork server socket failed: %s", exc)
        finally:
            self._connection_lost(conn)

    def _connection_lost(self, conn: Connection) -> None:
        with conn.lock:
            conn.dead = True
            pending_items = list(conn.pending.items())
            pongs = list(conn.pongs)
            conn.pending.clear()
            conn.pongs.clear()
        for job_id, waiter in pending_items:
            waiter.error = SERVER_EXITED
            waiter.settle(job_id)
        for waiter in pongs:
            waiter.error = SERVER_EXITED
            waiter.event.set()
        if conn.closing:
            return
        try:
            conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        status = conn.reap()
        log.warning("fork server %d exited unexpectedly (status %s)", conn.proc.pid, status)

    def _dispatch(self, conn: Connection, line: bytes) -> None:
        try:
            msg = json.loads(line)
            event = msg["event"]
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("ignoring malformed fork-server message %r: %s", line[:200], exc)
            return
        if event == "exited":
            try:
                info = CollectorExit(
                    job_id=str(msg["job_id"]),
                    pid=int(msg["pid"]),
                    exit_code=msg.get("exit_code"),
                    signal=msg.get("signal"),
                )
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("ignoring malformed exit event %r: %s", msg, exc)
                return
            try:
                self._on_exit(info)
            except Exception:
                log.exception("on_exit callback failed for job %s", info.job_id)
        elif event in ("launched", "launch_failed"):
            try:
                self._deliver_launch(conn, msg)
            except (KeyError, TypeError, ValueError) as exc:
                log.warning("ignoring malformed launch reply %r: %s", msg, exc)
        elif event == "pong":
            with conn.lock:
                waiter = conn.pongs.popleft() if conn.pongs else None
            if waiter is not None:
                waiter.event.set()
        else:
            log.warning("ignoring unknown fork-server event %r", event)

    def _deliver_launch(self, conn: Connection, msg: dict[str, Any]) -> None:
        job_id = str(msg.get("job_id"))
        launched: Launched | None = None
        if msg["event"] == "launched":
            ticks = msg.get("start_ticks")
            launched = Launched(
                job_id=job_id,
                pid=int(msg["pid"]),
                pgid=int(msg["pgid"]),
                start_ticks=None if ticks is None else int(ticks),
            )
        with conn.lock:
            waiter = conn.pending.pop(job_id, None)
            if waiter is not None:
                waiter.launched = launched
                waiter.error = None if launched else str(msg.get("error", "unknown error"))
        if waiter is not None:
            waiter.settle(job_id)
        elif launched is not None:
            log.warning(
                "job %s was launched after its launch timed out (pid %d, pgid %d)",
                job_id,
                launched.pid,
                launched.pgid,
            )
        else:
            log.warning("late launch failure of job %s: %s", job_id, msg.get("error"))
