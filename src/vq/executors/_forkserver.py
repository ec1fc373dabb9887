"""vq's fork server: a small stdlib-only process that launches jobs for the daemon.

Run as ``<python> -I -S _forkserver.py <fd>`` where ``<fd>`` is an inherited, connected
``AF_UNIX``/``SOCK_STREAM`` socket. This file imports nothing from vq and only cheap
stdlib modules: forking a big daemon costs ~25 µs per MiB of its RSS, so the daemon
never forks per job; this process stays small and does it instead.

Protocol (newline-delimited JSON objects, both directions):

* daemon → server: ``{"op": "launch", "job_id", "argv", "cwd", "env", "stdout",
  "stderr", "exit_code_path", "usage_path"[, "start_record"]}`` and ``{"op": "ping"}``.
* server → daemon: ``{"event": "launched", "job_id", "pid", "pgid", "start_ticks"}`` or
  ``{"event": "launch_failed", "job_id", "error"}`` in reply to a launch;
  ``{"event": "pong"}``; and ``{"event": "exited", "job_id", "pid", "status",
  "exit_code", "signal"}`` whenever the server reaps a collector. ``launched`` for a job
  is always sent before its ``exited``; replies are sent in request order.

Contracts:

* The server is single-threaded; it ignores SIGINT (a Ctrl-C at a foreground daemon's
  terminal reaches its whole process group) and keeps SIGTERM's default action.
* It exits promptly on EOF of the control socket, without signalling or waiting for its
  collectors: they lead their own sessions, keep running, and write their own markers.
* Its control socket is non-blocking and output is buffered, so it never blocks on a
  write; it reaps collectors via SIGCHLD + ``signal.set_wakeup_fd`` (and a 1 s poll as a
  safety net).
* ``launched`` is only sent once the collector has called ``setsid()``: from then on
  ``pgid == pid`` holds and ``killpg(pid, sig)`` reaches the collector and its command.

Collector (one forked child per job, see :func:`_collector`): resets SIGINT, SIGTERM,
SIGCHLD, SIGPIPE and SIGXFSZ to SIG_DFL (an ignored signal survives exec), closes the
server's fds, calls ``setsid()``, installs no handlers of its own, creates the start
record (exclusively, fsync'd; if that fails it exits 3 without starting anything — the
never-started proof, docs/architecture.md), writes ``collector.pid``, forks the command with
stdin from /dev/null and stdout/stderr appended to the given files, ``wait4``s for it,
then writes the resource-usage receipt and *after it* the exit-code marker, each
atomically and durably. Exec failures exit the command with 127 (126 for permission
problems) after writing ``vq: cannot execute '<argv0>': <reason>`` to its stderr file.
The collector exits 0 once the marker is written and 1 if it could not be; a collector
killed by a signal writes no marker. Collectors keep the server's stderr (the daemon's).

Known limitation: Linux folds the pre-exec RSS of the forked command child (a copy of
this Python process, ~7 MiB) into ``ru_maxrss``, so ``max_rss_kb`` never reads below that
floor even for ``/bin/true``; above it the figure is exact.
"""

# pathlib is not imported on purpose (start-up time of a tiny process), hence os.path:

from __future__ import annotations

import json
import os
import select
import signal
import sys

TYPE_CHECKING = False  # mypy treats this name as true; at run time nothing is imported
if TYPE_CHECKING:
    from typing import Any

    Request = dict[str, Any]

# The collector lives in a sibling module. Run as a script with ``-I -S`` the package is
# not importable, so the script's own directory is put on the path for it.
try:
    from vq.executors._collector import _POLL_SECONDS, _READ_SIZE, _collector, _start_ticks
    from vq.executors._collector_record import _stderr
except ImportError:  # pragma: no cover - exercised by every real daemon start
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _collector import (  # type: ignore[import-not-found,no-redef]
        _POLL_SECONDS,
        _READ_SIZE,
        _collector,
        _start_ticks,
    )
    from _collector_record import _stderr  # type: ignore[import-not-found,no-redef]


# --------------------------------------------------------------------------------------
# server
# --------------------------------------------------------------------------------------
class _Server:
    def __init__(self, ctl: int) -> None:
        self.ctl = ctl
        self.out = bytearray()
        self.inbuf = b""
        self.jobs: dict[int, str] = {}  # collector pid -> job id
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def send(self, obj: dict[str, Any]) -> None:
        self.out += json.dumps(obj, separators=(",", ":")).encode() + b"\n"

    def flush(self) -> bool:
        """Write what the socket accepts now; the rest waits for select()."""
        while self.out:
            try:
                written = os.write(self.ctl, self.out)
            except BlockingIOError:
                return True
            except (BrokenPipeError, ConnectionResetError):
                return False
            del self.out[:written]
        return True

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job_id = self.jobs.pop(pid, None)
            if job_id is None:
                continue
            self.send(
                {
                    "event": "exited",
                    "job_id": job_id,
                    "pid": pid,
                    "status": status,
                    "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                }
            )

    def launch(self, req: Request) -> None:
        problem = _validate(req)
        if problem is not None:
            self.send({"event": "launch_failed", "job_id": req.get("job_id"), "error": problem})
            return
        job_id: str = req["job_id"]
        sync_r, sync_w = os.pipe2(os.O_CLOEXEC)
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(sync_r)
            os.close(sync_w)
            self.send({"event": "launch_failed", "job_id": job_id, "error": str(exc)})
            return
        if pid == 0:
            code = 1
            try:
                code = _collector(req, (self.ctl, self.wake_r, self.wake_w, sync_r), sync_w)
            except BaseException as exc:
                _stderr(f"job {job_id}: collector failed: {exc!r}")
            finally:
                os._exit(code)
        os.close(sync_w)
        try:
            os.read(sync_r, 1)  # b"" if the collector died before setsid(): reported anyway
        finally:
            os.close(sync_r)
        self.jobs[pid] = job_id
        self.send(
            {
                "event": "launched",
                "job_id": job_id,
                "pid": pid,
                "pgid": pid,
                "start_ticks": _start_ticks(pid),
            }
        )

    def handle_line(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError as exc:
            _stderr(f"ignoring malformed request: {exc}")
            return
        if not isinstance(msg, dict):
            _stderr("ignoring non-object request")
            return
        op = msg.get("op")
        if op == "launch":
            self.launch(msg)
        elif op == "ping":
            self.send({"event": "pong"})
        else:
            _stderr(f"ignoring unknown op {op!r}")

    def run(self) -> int:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        os.set_blocking(self.ctl, False)
        while True:
            wlist = [self.ctl] if self.out else []
            readable, _, _ = select.select([self.ctl, self.wake_r], wlist, [], _POLL_SECONDS)
            if self.wake_r in readable:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            self.reap()
            if self.ctl in readable:
                try:
                    data = os.read(self.ctl, _READ_SIZE)
                except BlockingIOError:
                    data = None
                except (ConnectionResetError, BrokenPipeError):
                    data = b""
                if data == b"":
                    return 0  # EOF: the daemon is gone; collectors carry on by themselves
                if data:
                    self.inbuf += data
                    *lines, self.inbuf = self.inbuf.split(b"\n")
                    for line in lines:
                        if line.strip():
                            self.handle_line(line)
            if not self.flush():
                return 0


def _validate(req: Request) -> str | None:
    argv = req.get("argv")
    if not isinstance(req.get("job_id"), str):
        return "job_id must be a string"
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return "argv must be a non-empty list of strings"
    env = req.get("env")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        return "env must be an object of strings"
    defaults = req.get("thread_defaults", {})
    if not isinstance(defaults, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in defaults.items()
    ):
        return "thread_defaults must be an object of strings"
    cores = req.get("cpu_affinity")
    if cores is not None and (
        not isinstance(cores, list) or not cores or not all(isinstance(c, int) for c in cores)
    ):
        return "cpu_affinity must be null or a non-empty list of core numbers"
    for key in ("cwd", "stdout", "stderr", "exit_code_path", "usage_path"):
        value = req.get(key)
        if not isinstance(value, str) or not value.startswith("/"):
            return f"{key} must be an absolute path"
    record = req.get("start_record")
    if record is not None and (not isinstance(record, str) or not record.startswith("/")):
        return "start_record must be an absolute path"
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        _stderr("usage: _forkserver.py <fd>")
        return 2
    # A blocked signal mask would survive into the collectors and break SIGCHLD wakeups.
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    return _Server(int(argv[1])).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
