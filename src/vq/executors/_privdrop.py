"""The ``collector`` privilege drop (§5.2, §7.1): a root collector starts a job as its owner.

Stdlib only, like the collector and fork server that import it. The root collector forks
the command child, which, still as root:

1. resolves the submitter from the passwd database (a deleted user fails here);
2. creates ``vq-job-<id>`` in the cgroup v1 ``memory``, ``cpu`` and ``pids`` hierarchies
   (or the unified v2 hierarchy when it has those controllers) below the given parents,
   writes ``memory.limit_in_bytes``, the CFS quota and ``pids.max``, and joins it;

then drops with ``initgroups``, ``setresgid`` and ``setresuid`` and, before exec,
verifies: every real/effective/saved id is the target's, ``getgroups`` is exactly the
user's groups, ``setuid(0)`` fails with EPERM, CapEff is 0, and its own cgroups end in
``vq-job-<id>``. It sets ``no_new_privs``, umask 027, and a clean environment built from
passwd plus the ``VQ_*`` variables of the request; the user's captured submit environment
(``_vq/environment``) is read only now, as the user, with ``O_NOFOLLOW``. It closes
every inherited descriptor, and only then opens ``stdout.log``/``stderr.log`` and creates
``VQ_WORKDIR``, both with ``O_NOFOLLOW``, so a planted symlink cannot borrow root.

Any failed step sends ``125 <step>: <reason>`` on the report pipe and exits 125: the
command never runs and nothing falls back to root. An exec failure of the command itself
(after the drop) reports 127 (126 for permission problems), as ``execvp`` would.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import time

TYPE_CHECKING = False  # mypy treats this name as true; at run time nothing is imported
if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = [
    "DROP_FAILED",
    "cgroup_parents",
    "drop_and_exec",
    "job_cgroup_dirs",
    "oom_kills",
    "remove_job_cgroups",
]

DROP_FAILED = 125
CGROUP_ROOT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("memory", "cpu", "pids")
CFS_PERIOD_US = 100_000
DEFAULT_PIDS_MAX = 4096
_MAX_FD = 1 << 16
_PR_SET_NO_NEW_PRIVS = 38
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


class DropFailed(Exception):
    """One step of the drop failed: ``str(self)`` is ``<step>: <reason>``."""


def cgroup_parents(root: str = CGROUP_ROOT, proc: str = "/proc/self/cgroup") -> dict[str, str]:
    """Where job groups go: this process's own group in each hierarchy.

    Cgroup v1 with ``memory``, ``cpu`` and ``pids`` mounted gives one directory per
    controller; otherwise the unified v2 group under the key ``unified``.
    """
    own: dict[str, str] = {}
    with open(proc) as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else ["unified"]:
                own[name] = path
    if all(os.path.isdir(os.path.join(root, name)) for name in V1_CONTROLLERS):
        parents = {}
        for name in V1_CONTROLLERS:
            mount = os.path.join(root, name)
            if not os.path.isfile(os.path.join(mount, "cgroup.procs")):  # e.g. cpu,cpuacct
                mount = os.path.realpath(mount)
            parents[name] = mount + own.get(name, "/").rstrip("/")
        return parents
    base = os.path.join(root, "unified") if os.path.isdir(os.path.join(root, "unified")) else root
    return {"unified": base + own.get("unified", "/").rstrip("/")}


def job_cgroup_dirs(parents: dict[str, str], job_id: str) -> dict[str, str]:
    return {name: os.path.join(parent, f"vq-job-{job_id}") for name, parent in parents.items()}


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _join_cgroups(drop: dict[str, Any], job_id: str) -> dict[str, str]:
    dirs = job_cgroup_dirs(drop["cgroup_parents"], job_id)
    mem_mb, cpus = drop.get("mem_mb"), int(drop.get("cpus") or 1)
    pids_max = str(int(drop.get("pids_max") or DEFAULT_PIDS_MAX))
    for name, directory in dirs.items():
        try:
            os.mkdir(directory, 0o755)
        except FileExistsError:
            pass
        if name == "memory" and mem_mb:
            _write(os.path.join(directory, "memory.limit_in_bytes"), str(mem_mb << 20))
        elif name == "cpu":
            _write(os.path.join(directory, "cpu.cfs_period_us"), str(CFS_PERIOD_US))
            _write(os.path.join(directory, "cpu.cfs_quota_us"), str(cpus * CFS_PERIOD_US))
        elif name == "pids":
            _write(os.path.join(directory, "pids.max"), pids_max)
        elif name == "unified":
            if mem_mb:
                _write(os.path.join(directory, "memory.max"), str(mem_mb << 20))
            _write(os.path.join(directory, "cpu.max"), f"{cpus * CFS_PERIOD_US} {CFS_PERIOD_US}")
            _write(os.path.join(directory, "pids.max"), pids_max)
    for directory in dirs.values():
        _write(os.path.join(directory, "cgroup.procs"), str(os.getpid()))
    return dirs


def _status_field(name: str) -> str:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    raise DropFailed(f"verify: /proc/self/status has no {name}")


def _verify(entry: pwd.struct_passwd, dirs: dict[str, str], job_id: str) -> None:
    uid, gid = entry.pw_uid, entry.pw_gid
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        raise DropFailed(f"verify: ids are {os.getresuid()}/{os.getresgid()}")
    if set(os.getgroups()) != set(os.getgrouplist(entry.pw_name, gid)):
        raise DropFailed(f"verify: supplementary groups are {sorted(os.getgroups())}")
    try:
        os.setuid(0)
    except PermissionError as exc:
        if exc.errno != errno.EPERM:
            raise DropFailed(f"verify: setuid(0) failed with {exc.strerror}") from None
    else:
        os._exit(DROP_FAILED)  # regained root: never run anything
    if int(_status_field("CapEff"), 16) != 0:
        raise DropFailed("verify: effective capabilities are not empty")
    suffix = f"/vq-job-{job_id}"
    with open("/proc/self/cgroup") as handle:
        own = {}
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else ["unified"]:
                own[name] = path
    for name in dirs:
        if not own.get(name, "").endswith(suffix):
            raise DropFailed(f"verify: the {name} cgroup is {own.get(name)!r}")


def _load_prctl() -> Any:
    """``prctl`` from libc, loaded while still root: after the drop the interpreter's own
    files (a venv under a private home) may be unreadable, so nothing is imported then."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


def _no_new_privs(prctl: Any) -> None:
    if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise DropFailed("no_new_privs: prctl(PR_SET_NO_NEW_PRIVS) failed")
    if _status_field("NoNewPrivs") != "1":
        raise DropFailed("no_new_privs: the kernel does not report it set")


def _captured_environment(path: str) -> dict[str, str]:
    """The user's captured submit environment (``_vq/environment``, the JSON of
    ``vq.domain.environment.CapturedEnvironment``), read as the user with ``O_NOFOLLOW``.

    Whatever its base, it only adds to the clean environment: a root process never
    inherits the daemon's environment for a dropped job. ``VQ_*`` names are ignored.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    with os.fdopen(fd, "rb") as handle:
        data = json.loads(handle.read(1 << 22))
    variables = data["variables"]
    return {str(k): str(v) for k, v in variables.items() if not str(k).startswith("VQ_")}


def _clean_environment(entry: pwd.struct_passwd, job_env: dict[str, str]) -> dict[str, str]:
    env = {
        "HOME": entry.pw_dir,
        "USER": entry.pw_name,
        "LOGNAME": entry.pw_name,
        "SHELL": entry.pw_shell or "/bin/sh",
        "PATH": _SAFE_PATH,
    }
    env.update({key: value for key, value in job_env.items() if key.startswith("VQ_")})
    return env


def _ensure_workdir(path: str) -> None:
    try:
        os.mkdir(path, 0o750)
    except FileExistsError:
        pass
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    os.close(fd)


def _execvpe(argv: list[str], env: dict[str, str]) -> NoReturn:
    """``os.execvpe`` without its lazy ``import warnings``: after the drop the daemon's
    interpreter may not be readable by the job's owner. The same search and errors."""
    name = argv[0]
    if "/" in name:
        os.execve(name, argv, env)
    saved: OSError | None = None
    for directory in env.get("PATH", _SAFE_PATH).split(os.pathsep):
        try:
            os.execve(os.path.join(directory or ".", name), argv, env)
        except (FileNotFoundError, NotADirectoryError) as exc:
            saved = saved or exc
        except OSError as exc:
            saved = exc  # e.g. EACCES: reported unless a later directory has the program
    raise saved or FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def _test_hold(name: str) -> None:
    """``VQ_TEST_HOLD=<name>:<dir>`` (the contract of ``vq._fault_points.hold_point``,
    kept stdlib-only here): announce ``<dir>/<name>.held``, then wait for
    ``<dir>/<name>.go`` (at most 600 s). A no-op in normal use."""
    point, sep, folder = os.environ.get("VQ_TEST_HOLD", "").partition(":")
    if not sep or point != name:
        return
    with open(os.path.join(folder, f"{name}.held"), "a"):
        pass
    deadline = time.monotonic() + 600
    while not os.path.exists(os.path.join(folder, f"{name}.go")):
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)


def drop_and_exec(req: dict[str, Any], report_fd: int) -> NoReturn:
    """In the forked command child (root): the steps above, then exec. Never returns."""
    drop = req["drop"]
    step = "passwd"
    code = DROP_FAILED
    try:
        try:
            entry = pwd.getpwuid(int(drop["uid"]))
        except KeyError:
            raise DropFailed(f"passwd: no user has uid {drop['uid']}") from None
        if entry.pw_uid == 0 or entry.pw_gid == 0:
            raise DropFailed("passwd: refusing to run a job as uid or gid 0")
        step = "prctl"
        prctl = _load_prctl()
        step = "cgroup"
        dirs = _join_cgroups(drop, str(req["job_id"]))
        _test_hold("privdrop-before-setresuid")  # the group holds only root's processes
        step = "setresuid"
        os.initgroups(entry.pw_name, entry.pw_gid)
        os.setresgid(entry.pw_gid, entry.pw_gid, entry.pw_gid)
        os.setresuid(entry.pw_uid, entry.pw_uid, entry.pw_uid)
        step = "verify"
        _verify(entry, dirs, str(req["job_id"]))
        step = "no_new_privs"
        _no_new_privs(prctl)
        os.umask(0o027)
        step = "environment"
        env = _clean_environment(entry, req["env"])
        default = os.path.join(os.path.dirname(req["exit_code_path"]), "environment")
        env.update(_captured_environment(drop.get("environment_file") or default))
        for name, value in (req.get("thread_defaults") or {}).items():
            env.setdefault(name, value)  # OMP_NUM_THREADS and friends; the job's own win
        step = "close fds"
        os.closerange(3, report_fd)
        os.closerange(report_fd + 1, _MAX_FD)
        step = "logs"
        out_fd = os.open(req["stdout"], _LOG_FLAGS, 0o640)
        err_fd = os.open(req["stderr"], _LOG_FLAGS, 0o640)
        null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        step = "workdir"
        if drop.get("workdir"):
            _ensure_workdir(drop["workdir"])
        step = "cwd"
        os.chdir(req["cwd"])
        os.dup2(null_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        step = "exec"
        argv = req["argv"]
        try:
            _execvpe(argv, env)
        except OSError as exc:
            code = 126 if exc.errno in (errno.EACCES, errno.EPERM, errno.ENOEXEC) else 127
            os.write(2, f"vq: cannot execute '{argv[0]}': {exc.strerror}\n".encode())
            raise
    except BaseException as exc:
        reason = str(exc) if isinstance(exc, DropFailed) else f"{step}: {exc}"
        try:
            os.write(report_fd, f"{code} {reason}".encode(errors="replace")[:4000])
        except OSError:
            pass
    os._exit(code)


def oom_kills(parents: dict[str, str], job_id: str) -> int:
    """How many processes the job's memory group OOM-killed (0 when unknown)."""
    dirs = job_cgroup_dirs(parents, job_id)
    directory = dirs.get("memory") or dirs.get("unified")
    if directory is None:
        return 0
    for name in ("memory.oom_control", "memory.events"):
        try:
            with open(os.path.join(directory, name)) as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def remove_job_cgroups(parents: dict[str, str], job_id: str) -> None:
    """Remove the job's groups (best effort: a group with a live descendant stays)."""
    for directory in job_cgroup_dirs(parents, job_id).values():
        try:
            os.rmdir(directory)
        except OSError:
            pass
