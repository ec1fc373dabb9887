"""The collector: one per job, forked by the fork server (see ``_forkserver.py``).

Standalone and stdlib-only, like the server that imports it: it leads a new session and
process group, starts the command with ``posix_spawn`` (cwd = the workspace, stdin from
/dev/null, logs appended, default signal dispositions), ``wait4``s it, writes the
resource receipt and then the durable exit marker (``_collector_record.py``, which
retries a marker the disk cannot take yet), and exits 0 (1 if the marker could not be
written). It installs no signal handlers: a SIGTERM to the group ends it at once.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import time

TYPE_CHECKING = False  # mypy treats this name as true; at run time nothing is imported
if TYPE_CHECKING:
    from typing import Any, NoReturn

    Request = dict[str, Any]

# The end-of-job record lives in a sibling module; run as a script (by the fork server,
# which put this directory on the path) the package is not importable.
try:
    from vq.executors._collector_record import _atomic_write, _record, _stderr, _write_all
except ImportError:  # pragma: no cover - exercised by every real daemon start
    from _collector_record import (  # type: ignore[import-not-found,no-redef]
        _atomic_write,
        _record,
        _stderr,
        _write_all,
    )


_MAX_FD = 1 << 16
_READ_SIZE = 1 << 16
_POLL_SECONDS = 1.0
_PERMISSION_ERRNOS = (errno.EACCES, errno.EPERM, errno.ENOEXEC, errno.EISDIR)
#: Exit status of a collector that did not start its command because it could not create
#: the attempt's start record (``vq.executors.launch.COLLECTOR_NOT_STARTED``).
NOT_STARTED = 3


# --------------------------------------------------------------------------------------
# small helpers (used by both the server and the collector)
# --------------------------------------------------------------------------------------
def _create_start_record(path: str, data: bytes, dir_fd: int | None = None) -> None:
    """Create ``path`` exclusively with ``data``, durably (file and directory fsync'd);
    with ``dir_fd`` (the pinned ``_vq/``) by its name relative to that directory.

    Raises FileExistsError when it already exists: recovery fenced this attempt (or
    another collector claimed it). Any OSError means the command must not start.
    """
    name = os.path.basename(path) if dir_fd is not None else path
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if dir_fd is not None:
        os.fsync(dir_fd)
        return
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _pin_meta_dir(path: str, identity: list[int]) -> int:
    """An fd of the directory ``path`` (final component not followed) that must be the
    one whose ``[st_dev, st_ino]`` is ``identity``; OSError otherwise (nothing written)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    info = os.fstat(fd)
    if [info.st_dev, info.st_ino] != [int(n) for n in identity]:
        os.close(fd)
        raise OSError(errno.ESTALE, "is not the directory the daemon made", path)
    return fd


def _test_fault(name: str) -> None:
    """``VQ_TEST_FAULT=<name>``: SIGKILL this process here (fault-injection tests)."""
    if os.environ.get("VQ_TEST_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (split after the last ')': comm may contain anything)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
        return int(raw[raw.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


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


def _spawn_command(req: Request) -> tuple[int | None, int, str]:
    """Start the command with ``posix_spawn`` (vfork-cheap): ``(pid, 0, "")``, or
    ``(None, 126|127, reason)`` after writing the reason to the job's stderr (execvp's
    codes)."""
    argv = req["argv"]
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    try:
        stage = f"cannot enter the working directory {req['cwd']}"
        os.chdir(req["cwd"])  # the collector exists for this one command
        stage = f"cannot execute '{argv[0]}'"
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
        return pid, 0, ""
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
        return None, 126 if denied else 127, f"{stage}: {reason}"


def _job_environment(req: Request) -> dict[str, str]:
    """The command's environment: the submit's capture (``_vq/environment``, next to the
    exit marker) over its base, then the daemon's ``VQ_*`` job variables on top.

    The file's format is ``vq.domain.environment.CapturedEnvironment``: base
    ``submitter`` replaces the daemon's environment (``req["env"]``), base ``daemon``
    adds to it. No file (or an unreadable one) leaves ``req["env"]`` as it is.
    """
    launch_env: dict[str, str] = req["env"]
    path = os.path.join(os.path.dirname(req["exit_code_path"]), "environment")
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read())
        variables = data["variables"]
        base = data["base"]
    except FileNotFoundError:
        return launch_env
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _stderr(f"job {req.get('job_id')}: ignoring unreadable {path}: {exc}")
        return launch_env
    env = dict(launch_env) if base != "submitter" else {}
    env.update({str(k): str(v) for k, v in variables.items()})
    env.update({k: v for k, v in launch_env.items() if k.startswith("VQ_")})
    return env


def _with_thread_defaults(req: Request) -> dict[str, str]:
    """The command's environment plus each ``thread_defaults`` entry it does not set
    (``OMP_NUM_THREADS`` and friends = the job's CPUs; the job's own value wins)."""
    env: dict[str, str] = dict(req["env"])
    for name, value in (req.get("thread_defaults") or {}).items():
        env.setdefault(name, value)
    return env


def _apply_affinity(req: Request) -> None:
    """Pin this collector, and so the command it starts, to ``cpu_affinity``. A core set
    the host refuses (a cpuset changed under the daemon) leaves the job unpinned, with
    a note on its stderr."""
    cores = req.get("cpu_affinity")
    if not cores or not hasattr(os, "sched_setaffinity"):
        return
    try:
        os.sched_setaffinity(0, cores)
    except (OSError, ValueError) as exc:
        note = f"vq: warning: CPU affinity {cores} not applied: {exc}\n"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
            fd = os.open(req["stderr"], flags, 0o644)
            try:
                _write_all(fd, note.encode())
            finally:
                os.close(fd)
        except OSError:
            pass


def _privdrop() -> Any:
    """The privilege-drop module (a sibling; the package may not be importable here)."""
    try:
        from vq.executors import _privdrop as module
    except ImportError:  # run as a script: the fork server put our directory on the path
        import _privdrop as module  # type: ignore[import-not-found,no-redef]
    return module


def _spawn_dropped(req: Request) -> tuple[int | None, int, str]:
    """Fork the command child that drops to the job's owner (``req["drop"]``), as
    :func:`_spawn_command` returns: ``(pid, 0, "")`` once it has exec'd, else
    ``(None, code, reason)`` with 125 for a failed drop step (the command never ran)."""
    module = _privdrop()
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child execs or exits
        os.close(read_fd)
        for signum in _DEFAULT_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        module.drop_and_exec(req, write_fd)
    os.close(write_fd)
    chunks = []
    try:
        while chunk := os.read(read_fd, 4096):  # EOF at exec (close-on-exec) or exit
            chunks.append(chunk)
    finally:
        os.close(read_fd)
    if not chunks:
        return pid, 0, ""
    os.waitpid(pid, 0)
    code, _, reason = b"".join(chunks).decode(errors="replace").partition(" ")
    return None, int(code) if code.isdigit() else module.DROP_FAILED, reason


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
    pid = os.getpid()
    marker_dir = os.path.dirname(req["exit_code_path"])
    meta_fd = None
    if req.get("drop") and req["drop"].get("meta"):
        # Multi-user: the markers go into the very _vq/ the daemon made (its identity is
        # in the request), never through a path the job's owner can swap for a link.
        try:
            meta_fd = _pin_meta_dir(marker_dir, req["drop"]["meta"])
        except OSError as exc:
            _stderr(f"job {req.get('job_id')}: not started: {exc}")
            return NOT_STARTED
        req = {**req, "meta_fd": meta_fd}
    _test_fault("collector_before_start_record")
    record = req.get("start_record")
    if record:
        # The never-started proof (docs/architecture.md): the command starts only after
        # this attempt's start record exists durably. If recovery created it first (it
        # found no trace of us), or it cannot be written, nothing starts.
        try:
            _create_start_record(record, f"{pid} {_start_ticks(pid)}\n".encode(), meta_fd)
        except OSError as exc:
            _stderr(f"job {req.get('job_id')}: not started: cannot create {record}: {exc}")
            return NOT_STARTED
    # Make this group findable by a restarted daemon even before the daemon has recorded
    # our pid: "<pid> <start ticks>" next to the exit marker (atomic, not fsync'd — no
    # process survives a power loss anyway).
    try:
        _atomic_write(
            os.path.join(marker_dir, "collector.pid"),
            f"{pid} {_start_ticks(pid)}\n".encode(),
            durable=False,
            dir_fd=meta_fd,
        )
    except OSError as exc:
        _stderr(f"job {req.get('job_id')}: cannot write collector.pid: {exc}")

    if not req.get("drop"):  # a dropped job reads its capture itself, as its owner
        req = {**req, "env": _job_environment(req)}
        req = {**req, "env": _with_thread_defaults(req)}  # the job's own values win
    _apply_affinity(req)
    started_at = time.time()
    started = time.monotonic()
    if req.get("drop") or hasattr(os, "posix_spawn"):
        spawned, failure, reason = (_spawn_dropped if req.get("drop") else _spawn_command)(req)
        if spawned is None:
            # Never started: note why (the daemon records a dispatch failure, not the
            # payload's exit code), then the exit code execvp would have given.
            try:
                _atomic_write(
                    os.path.join(marker_dir, "spawn-error"),
                    reason.encode() + b"\n",
                    durable=False,
                    dir_fd=meta_fd,
                )
            except OSError as exc:
                _stderr(f"job {req.get('job_id')}: cannot write spawn-error: {exc}")
            return _record(req, started_at, started, failure << 8, None, _release(req))
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
    return _record(req, started_at, started, status, rusage, _release(req))


def _release(req: Request) -> dict[str, Any]:
    """A dropped job's cgroup outcome (its OOM kills), then its groups removed."""
    drop = req.get("drop")
    if not drop:
        return {}
    module = _privdrop()
    job_id = str(req["job_id"])
    kills = module.oom_kills(drop["cgroup_parents"], job_id)
    module.remove_job_cgroups(drop["cgroup_parents"], job_id)
    return {"cgroup_oom_kills": kills}
