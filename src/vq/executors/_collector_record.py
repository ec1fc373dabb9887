"""The collector's record of a job's end: the resource receipt, then the durable exit
marker (see ``_collector.py``).

Standalone and stdlib-only, like the collector and the fork server that import it (run
as a script, it is found next to them). A marker write that fails for lack of space
(ENOSPC, EDQUOT) or EIO is retried with backoff for up to a week, the exit code kept in
memory: the collector stays alive, so the daemon keeps waiting for it instead of
classifying the job.
"""

from __future__ import annotations

import errno
import json
import os
import time

TYPE_CHECKING = False  # mypy treats this name as true; at run time nothing is imported
if TYPE_CHECKING:
    from typing import Any

    Request = dict[str, Any]


#: Errors of a write the filesystem cannot take now; the exit marker is retried on them.
_STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO)
#: How long the exit marker is retried (the collector keeps the code in memory meanwhile).
_MARKER_RETRY_SECONDS = 7 * 24 * 3600.0
_RETRY_FIRST_SECONDS = 0.25
_RETRY_MAX_SECONDS = 5.0

_USAGE_SEMANTICS = {
    "wall_seconds": "monotonic time from command fork to wait4 return",
    "cpu": (
        "getrusage of the waited command and its waited-for descendants "
        "(RUSAGE_CHILDREN semantics of wait4)"
    ),
    "max_rss_kb": "largest resident set of the command or any waited-for descendant, in KiB",
    "process_count": (
        "pids.peak of the job's cgroup scope minus the tasks it held before the command "
        "(0: the collector runs outside the scope); threads count as tasks; null without a "
        "scope whose pids controller has pids.peak"
    ),
}
#: The note a scoped command writes on entering its scope: its /proc/self/cgroup lines.
_SCOPE_ENTERED = "scope-entered"
_CGROUP_ROOT = "/sys/fs/cgroup"


def _scope_process_count(marker_dir: str) -> int | None:
    """pids.peak of the scope the command entered (read from its entry note), minus the
    pre-command baseline (0: nothing of vq runs inside the scope); None when unknown."""
    try:
        with open(os.path.join(marker_dir, _SCOPE_ENTERED), "rb") as handle:
            lines = handle.read(64 * 1024).decode("ascii", "replace").splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        relative = parts[2].lstrip("/")
        if not relative:
            continue  # the root cgroup is never a job's scope
        if "pids" in parts[1].split(","):
            candidates.append(os.path.join(_CGROUP_ROOT, "pids", relative))
        elif parts[1] == "":
            candidates.append(os.path.join(_CGROUP_ROOT, relative))
            candidates.append(os.path.join(_CGROUP_ROOT, "unified", relative))
    for directory in candidates:
        try:
            with open(os.path.join(directory, "pids.peak"), "rb") as handle:
                text = handle.read(64).strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


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


def _atomic_write(path: str, data: bytes, durable: bool = True, dir_fd: int | None = None) -> None:
    """temp file in the same directory → write → fsync → rename → fsync(directory).

    ``durable=False`` skips both fsyncs (still atomic against readers). The receipt is
    written that way: the exit marker written right after it is durable, and its
    directory fsync also makes the receipt's rename durable. With ``dir_fd`` (the job's
    pinned ``_vq/``, multi-user mode) only the name of ``path`` is used, relative to it:
    nothing the job's owner renames or swaps in the path is followed.
    """
    name = os.path.basename(path)
    directory = os.path.dirname(path) or "."
    tmp_name = f".{name}.{os.getpid()}.tmp"
    tmp = tmp_name if dir_fd is not None else os.path.join(directory, tmp_name)
    target = name if dir_fd is not None else path
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
    try:
        try:
            _write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    if not durable:
        return
    if dir_fd is not None:
        os.fsync(dir_fd)
        return
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _stderr(message: str) -> None:
    try:
        _write_all(2, f"vq-forkserver: {message}\n".encode("utf-8", "replace"))
    except OSError:
        pass


def _record(
    req: Request,
    started_at: float,
    started: float,
    status: int,
    rusage: Any,
    extra: dict[str, Any] | None = None,
) -> int:
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
        "process_count": _scope_process_count(os.path.dirname(req["exit_code_path"])),
        "semantics": _USAGE_SEMANTICS,
        **(extra or {}),
    }
    receipt_bytes = (json.dumps(receipt, indent=1) + "\n").encode()
    receipt_written = False
    delay = _RETRY_FIRST_SECONDS
    deadline = time.monotonic() + _MARKER_RETRY_SECONDS
    while True:
        if not receipt_written:
            try:
                _atomic_write(
                    req["usage_path"], receipt_bytes, durable=False, dir_fd=req.get("meta_fd")
                )
                receipt_written = True
            except OSError as exc:
                _stderr(f"job {req.get('job_id')}: cannot write resource usage: {exc}")
        try:
            _atomic_write(req["exit_code_path"], b"%d\n" % exit_code, dir_fd=req.get("meta_fd"))
            return 0
        except OSError as exc:
            # A full disk (or quota, or EIO) must not lose a finished job's outcome: keep
            # the code in memory and retry; while this process lives the daemon waits
            # (its group is alive) instead of classifying the job.
            if exc.errno not in _STORAGE_ERRNOS or time.monotonic() >= deadline:
                _stderr(f"job {req.get('job_id')}: cannot write exit marker: {exc}")
                return 1
            if delay == _RETRY_FIRST_SECONDS:
                _stderr(f"job {req.get('job_id')}: exit marker not written yet ({exc}); retrying")
        time.sleep(delay)
        delay = min(delay * 2, _RETRY_MAX_SECONDS)
