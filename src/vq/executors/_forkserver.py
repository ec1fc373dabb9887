"""vq's fork server: a small stdlib-only process that launches jobs for the daemon.

Run as ``<python> -I -S _forkserver.py <fd>`` where ``<fd>`` is an inherited, connected
``AF_UNIX``/``SOCK_STREAM`` socket. This file imports nothing from vq and only cheap
stdlib modules: forking a big daemon costs ~25 µs per MiB of its RSS, so the daemon
never forks per job; this process stays small and does it instead.

Protocol (newline-delimited JSON objects, both directions):

* daemon → server: ``{"op": "launch", "job_id", "argv", "cwd", "env", "stdout",
  "stderr", "exit_code_path", "usage_path"}`` and ``{"op": "ping"}``.
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
server's fds, calls ``setsid()``, installs no handlers of its own, forks the command with
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

import errno
import json
import os
import select
import signal
import sys
import time

TYPE_CHECKING = False  # mypy treats this name as true; at run time nothing is imported
if TYPE_CHECKING:
    from typing import Any, NoReturn

    Request = dict[str, Any]

_MAX_FD = 1 << 16
_READ_SIZE = 1 << 16
_POLL_SECONDS = 1.0
_PERMISSION_ERRNOS = (errno.EACCES, errno.EPERM, errno.ENOEXEC, errno.EISDIR)

_USAGE_SEMANTICS = {
    "wall_seconds": "monotonic time from command fork to wait4 return",
    "cpu": (
        "getrusage of the waited command and its waited-for descendants "
        "(RUSAGE_CHILDREN semantics of wait4)"
    ),
    "max_rss_kb": "largest resident set of the command or any waited-for descendant, in KiB",
    "process_count": "not available without a cgroup v2 pids.peak counter",
}


# --------------------------------------------------------------------------------------
# small helpers (used by both the server and the collector)
# --------------------------------------------------------------------------------------
def _iso_utc(t: float) -> str:
    """ISO-8601 UTC timestamp with microseconds, e.g. ``2024-05-01T12:00:00.123456+00:00``."""
    seconds = int(t)
    micros = int((t - seconds) * 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{micros:06d}+00:00"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _atomic_write(path: str, data: bytes, durable: bool = True) -> None:
    """temp file in the same directory → write → fsync → rename → fsync(directory).

    ``durable=False`` skips both fsyncs (still atomic against readers). The receipt is
    written that way: the exit marker written right after it is durable, and its
    directory fsync also makes the receipt's rename durable.
    """
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if not durable:
        return
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (split after the last ')': comm may contain anything)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
        return int(raw[raw.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _stderr(message: str) -> None:
    try:
        _write_all(2, f"vq-forkserver: {message}\n".encode("utf-8", "replace"))
    except OSError:
        pass


# --------------------------------------------------------------------------------------
# collector: the forked child of the server, one per job
# --------------------------------------------------------------------------------------
def _exec_command(req: Request) -> NoReturn:
    """In the command child: wire fds, chdir, exec. Never returns."""
    argv = req["argv"]
    code = 127
    try:
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
            out_fd = os.open(req["stdout"], flags, 0o644)
            err_fd = os.open(req["stderr"], flags, 0o644)
            null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            os.dup2(null_fd, 0)
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            os.chdir(req["cwd"])
            os.closerange(3, _MAX_FD)
            os.execvpe(argv[0], argv, req["env"])
        except OSError as exc:
            if exc.errno in _PERMISSION_ERRNOS:
                code = 126
            reason = exc.strerror or str(exc)
            if exc.filename is not None and exc.filename != argv[0]:
                reason = f"{reason}: {exc.filename}"
            _write_all(2, f"vq: cannot execute '{argv[0]}': {reason}\n".encode())
        except BaseException as exc:  # e.g. ValueError for an embedded NUL byte
            _write_all(2, f"vq: cannot execute '{argv[0]}': {exc}\n".encode())
    finally:
        os._exit(code)


#: Signals the command starts with at their defaults (Python ignores SIGPIPE and SIGXFSZ,
#: and an ignored signal would survive the exec).
_DEFAULT_SIGNALS = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGCHLD,
    signal.SIGPIPE,
    signal.SIGXFSZ,
    signal.SIGHUP,
    signal.SIGQUIT,
)


def _which(name: str, env: dict[str, str]) -> str | None:
    """``execvpe``'s search: the job's own PATH, not the collector's."""
    if "/" in name:
        return name
    for directory in env.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _spawn_command(req: Request) -> tuple[int | None, int]:
    """Start the command with ``posix_spawn`` (vfork-cheap): ``(pid, 0)``, or
    ``(None, 126|127)`` after writing the reason to the job's stderr (execvp's codes)."""
    argv = req["argv"]
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    try:
        os.chdir(req["cwd"])  # the collector exists for this one command
        path = _which(argv[0], req["env"])
        if path is None:
            raise FileNotFoundError(2, "No such file or directory")
        pid = os.posix_spawn(
            path,
            argv,
            req["env"],
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, req["stdout"], flags, 0o644),
                (os.POSIX_SPAWN_OPEN, 2, req["stderr"], flags, 0o644),
            ],
            setsigmask=(),
            setsigdef=_DEFAULT_SIGNALS,
        )
        return pid, 0
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        try:
            fd = os.open(req["stderr"], flags | os.O_CLOEXEC, 0o644)
            try:
                _write_all(fd, f"vq: cannot execute '{argv[0]}': {reason}\n".encode())
            finally:
                os.close(fd)
        except OSError:
            pass
        denied = isinstance(exc, OSError) and exc.errno in _PERMISSION_ERRNOS
        return None, 126 if denied else 127


def _collector(req: Request, close_fds: tuple[int, ...], sync_w: int) -> int:
    """Body of the collector process; returns its own exit status (0 = marker written)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    os.setsid()  # leads a new session and process group: pgid == pid
    try:
        os.write(sync_w, b"!")  # tells the server that pgid == pid now holds
    finally:
        os.close(sync_w)

    started_at = time.time()
    started = time.monotonic()
    if hasattr(os, "posix_spawn"):
        spawned, failure = _spawn_command(req)
        if spawned is None:  # never started: record the exit code execvp would have given
            return _record(req, started_at, started, failure << 8, None)
        child = spawned
    else:  # pragma: no cover - every supported platform has posix_spawn
        child = os.fork()
        if child == 0:
            _exec_command(req)  # never returns
    while True:
        try:
            _, status, rusage = os.wait4(child, 0)
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries already
            continue
    return _record(req, started_at, started, status, rusage)


def _record(req: Request, started_at: float, started: float, status: int, rusage: Any) -> int:
    """Write the receipt, then the durable exit marker; the collector's exit status."""
    wall = time.monotonic() - started
    finished_at = time.time()
    if os.WIFSIGNALED(status):
        term_signal = os.WTERMSIG(status)
        exit_code = 128 + term_signal
        command_status = "signaled"
    else:
        term_signal = None
        exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 255
        command_status = "exited" if rusage is not None else "not_run"

    receipt = {
        "schema": "vq.resource-usage.v1",
        "status": "ok",
        "source": "wait4",
        "wall_seconds": wall,
        "user_cpu_seconds": rusage.ru_utime if rusage else 0.0,
        "system_cpu_seconds": rusage.ru_stime if rusage else 0.0,
        "active_cpu_seconds": rusage.ru_utime + rusage.ru_stime if rusage else 0.0,
        "max_rss_kb": rusage.ru_maxrss if rusage else 0,
        "exit_code": exit_code,
        "signal": term_signal,
        "command_status": command_status,
        "started_at": _iso_utc(started_at),
        "finished_at": _iso_utc(finished_at),
        "process_count": None,
        "semantics": _USAGE_SEMANTICS,
    }
    try:
        _atomic_write(
            req["usage_path"], (json.dumps(receipt, indent=1) + "\n").encode(), durable=False
        )
    except BaseException as exc:
        _stderr(f"job {req.get('job_id')}: cannot write resource usage: {exc}")
    try:
        _atomic_write(req["exit_code_path"], b"%d\n" % exit_code)
    except BaseException as exc:
        _stderr(f"job {req.get('job_id')}: cannot write exit marker: {exc}")
        return 1
    return 0


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
    for key in ("cwd", "stdout", "stderr", "exit_code_path", "usage_path"):
        value = req.get(key)
        if not isinstance(value, str) or not value.startswith("/"):
            return f"{key} must be an absolute path"
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
