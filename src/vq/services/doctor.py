"""``vq doctor``: check the installation and explain each finding (ok / warn / fail).

Every check is independent and never raises: a check that cannot run reports ``fail``
with the reason. The daemon's own answer is preferred where it exists (its cgroup mode);
otherwise the check runs here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypedDict

from vq._fs import read_regular, try_lock_file
from vq.errors import VqError
from vq.executors.cgroups import CgroupMode
from vq.paths import StatePaths
from vq.protocol.answers import PingAnswer

__all__ = ["Check", "CheckItem", "run_checks"]


class CheckItem(TypedDict):
    """One check of ``vq doctor --json``."""

    name: str
    status: str
    message: str
    hint: str | None


LOW_DISK_WARN_BYTES = 1024**3
LOW_DISK_FAIL_BYTES = 100 * 1024**2


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok" | "warn" | "fail"
    message: str
    hint: str | None = None

    def as_dict(self) -> CheckItem:
        return {
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "hint": self.hint,
        }


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_state_root(paths: StatePaths) -> Check:
    root = paths.root
    target = root if root.exists() else _existing_ancestor(root)
    try:
        fd, name = tempfile.mkstemp(prefix=".vq-doctor-", dir=target)
        try:
            os.write(fd, b"probe")
            os.fsync(fd)
            lock = try_lock_file(Path(name))
            if lock is None:
                raise OSError("flock on a fresh file failed")
            os.close(lock)
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError as exc:
        return Check(
            "state root",
            "fail",
            f"{target} is not usable: {exc}",
            "vq needs a writable local filesystem with working flock and fsync",
        )
    note = "" if root.exists() else " (will be created on first use)"
    return Check("state root", "ok", f"{root} is writable, flock and fsync work{note}")


def check_daemon(ping: PingAnswer | None, paths: StatePaths) -> list[Check]:
    if ping is not None:
        checks = [
            Check(
                "daemon",
                "ok",
                f"vq {ping['version']} running (pid {ping['pid']}, "
                f"up {ping['uptime_seconds']:.0f}s)",
            )
        ]
        if ping.get("dispatch_hold"):
            checks.append(
                Check(
                    "dispatch",
                    "warn",
                    str(ping["dispatch_hold"]),
                    "`vq daemon admin-status` shows every hold",
                )
            )
        hold = ping.get("storage_hold")
        if hold:
            checks.append(
                Check(
                    "storage hold",
                    "fail",
                    f"dispatch is held: {hold['message']} (since {hold['since']})",
                    "free space under the state root; dispatch resumes by itself",
                )
            )
        if ping.get("root_single_user"):
            from vq.services.root_guard import ROOT_SINGLE_USER_WARNING

            checks.append(
                Check(
                    "root",
                    "warn",
                    ROOT_SINGLE_USER_WARNING,
                    "run the daemon as an ordinary user, or enable [multi_user] "
                    "(docs/multi-user.md)",
                )
            )
        return checks
    checks = [Check("daemon", "warn", "no daemon is running", "start one with `vq daemon start`")]
    if paths.daemon_sock.exists():
        checks.append(
            Check(
                "stale files",
                "warn",
                f"{paths.daemon_sock} exists but nothing answers on it",
                "a daemon died without cleaning up; the next `vq daemon start` replaces it",
            )
        )
    with contextlib.suppress(OSError, ValueError):
        pid = int(read_regular(paths.daemon_pid, 64).decode().strip())
        from vq._proc_stat import is_alive

        if not is_alive(pid):
            checks.append(
                Check(
                    "stale files",
                    "warn",
                    f"{paths.daemon_pid} names pid {pid}, which is gone",
                    "harmless; the next `vq daemon start` rewrites it",
                )
            )
    return checks


def check_config(load: Callable[[], object]) -> Check:
    try:
        load()
    except VqError as exc:
        return Check("config", "fail", exc.message, exc.hint)
    return Check("config", "ok", "configuration is valid")


def check_cgroups(ping: PingAnswer | None) -> Check:
    if ping is not None and "cgroup_mode" in ping:
        mode, reason = ping["cgroup_mode"], ping["cgroup_reason"]
    else:
        from vq.executors.cgroups import probe
        from vq.transport.local import LocalRunner

        found = probe(LocalRunner())
        mode, reason = found.mode, found.reason
    if CgroupMode(mode, reason).cgroup_enforced:
        return Check("cgroups", "ok", reason)
    return Check(
        "cgroups",
        "warn",
        reason,
        "see docs/cgroup-setup.md to enable systemd user scopes; enforcement still works "
        "by sampling",
    )


def _affinity_configured(ping: PingAnswer | None, load: Callable[[], object]) -> bool:
    """Whether jobs get a CPU affinity: the daemon's answer, else this config."""
    if ping is not None and "cpu_affinity" in ping:
        return bool(ping["cpu_affinity"])
    settings = load()
    daemon = getattr(settings, "daemon", None)
    return bool(getattr(daemon, "cpu_affinity", False)) and hasattr(os, "sched_setaffinity")


def check_enforcement(ping: PingAnswer | None, load: Callable[[], object]) -> Check:
    """What this host enforces of a job's declared memory and CPUs, in plain words."""
    if ping is not None and "cgroup_mode" in ping:
        found = CgroupMode(ping["cgroup_mode"], "")
    else:
        from vq.executors.cgroups import probe
        from vq.transport.local import LocalRunner

        found = probe(LocalRunner())
    scoped = found.cgroup_enforced
    try:
        pinned = _affinity_configured(ping, load)
    except VqError:
        pinned = False
    memory = (
        "memory: enforced by the job's own cgroup"
        + (" scope (MemoryMax)" if found.scoped else " (memory limit)")
        if scoped
        else "memory: enforced by sampling (the watchdog kills a job whose RSS passes its "
        "limit between samples)"
    )
    if scoped and pinned:
        cpus = "CPUs: enforced by cgroup CPU quota and by CPU affinity"
    elif scoped:
        cpus = "CPUs: enforced by cgroup CPU quota (no CPU affinity)"
    elif pinned:
        cpus = "CPUs: enforced by CPU affinity (each job pinned to its declared cores)"
    else:
        cpus = "CPUs: NOT enforced (no cgroup scopes and [daemon] cpu_affinity is off)"
    threads = "thread variables (OMP_NUM_THREADS and friends) default to the job's CPUs"
    message = f"{memory}; {cpus}; {threads}"
    if scoped or pinned:
        return Check("enforcement", "ok", message)
    return Check(
        "enforcement",
        "warn",
        message,
        "set `[daemon] cpu_affinity = true` or see docs/cgroup-setup.md for cgroup scopes",
    )


def check_specs(paths: StatePaths, now: datetime) -> list[Check]:
    from vq.store.specs import SpecStore

    scan = SpecStore(paths).scan()
    checks = []
    if scan.quarantined:
        names = ", ".join(sorted(q.path for q in scan.quarantined.values())[:5])
        checks.append(
            Check(
                "specs",
                "warn",
                f"{len(scan.quarantined)} unreadable spec file(s), skipped by dispatch: {names}",
                "they are never deleted; inspect them (`vq list` shows the reasons)",
            )
        )
    else:
        checks.append(Check("specs", "ok", f"{len(scan.specs)} spec(s), all readable"))
    limit = now + timedelta(minutes=5)
    future = [s.id for s in scan.specs.values() if s.submitted_at > limit]
    if future:
        checks.append(
            Check(
                "clock",
                "warn",
                f"{len(future)} job(s) were submitted in the future (e.g. {future[0]})",
                "the system clock moved backwards; check NTP",
            )
        )
    else:
        checks.append(Check("clock", "ok", "no spec is dated in the future"))
    return checks


def check_leftovers(paths: StatePaths) -> Check:
    """Traces of an interrupted ``vq cleanup`` (see :mod:`vq.cleanup.recovery`)."""
    from vq.cleanup.recovery import find_leftovers
    from vq.domain.admission import Caps
    from vq.services.context import ServiceContext

    found = find_leftovers(ServiceContext(paths, Caps()))
    if not found:
        return Check("leftovers", "ok", "no interrupted archive or fetch, no stale temp file")
    kinds = sorted({item.kind for item in found})
    first = found[0]
    return Check(
        "leftovers",
        "warn",
        f"{len(found)} trace(s) of interrupted work ({', '.join(kinds)}), e.g. {first.path}",
        "`vq cleanup --execute` finishes interrupted archives and removes stale temp files "
        "and what killed fetches staged"
        if any(item.action == "would remove" for item in found)
        else "an archived job's archive file is missing: its workspace is kept; inspect it",
    )


def check_disk(paths: StatePaths) -> Check:
    usage = shutil.disk_usage(_existing_ancestor(paths.root))
    free_gb = usage.free / 1024**3
    if usage.free < LOW_DISK_FAIL_BYTES:
        return Check(
            "disk",
            "fail",
            f"only {free_gb:.2f} GB free under the state root",
            "free space: spec writes and job output will fail",
        )
    if usage.free < LOW_DISK_WARN_BYTES:
        return Check(
            "disk",
            "warn",
            f"only {free_gb:.2f} GB free under the state root",
            "`vq cleanup` or removing old workspaces frees space",
        )
    return Check("disk", "ok", f"{free_gb:.1f} GB free under the state root")


def check_programs(load: Callable[[], object]) -> list[Check]:
    """Probe every ``[programs.NAME]``: one warning per unavailable program."""
    try:
        settings = load()
    except VqError:
        return [Check("programs", "warn", "skipped: the configuration is invalid")]
    registry = getattr(settings, "programs", None) or {}
    if not registry:
        return [Check("programs", "ok", "no programs registered")]
    from vq.services.programs import probe_all

    statuses = probe_all(registry)
    bad = [
        Check(
            "programs",
            "warn",
            f"program {status.name!r} ({status.kind}) is unavailable: {status.reason}",
            "`vq programs` shows every entry; jobs naming it fail at dispatch",
        )
        for status in statuses
        if not status.available
    ]
    return bad or [Check("programs", "ok", f"{len(statuses)} program(s) available")]


def check_lane_programs(load: Callable[[], object]) -> list[Check]:
    """Every lane's ``scheduler_program_hooks`` and ``scheduler_programs`` key names a
    registered program (§3.4): a hook or a target registry entry for a name ``--program``
    cannot take never applies, and a target registry entry is for a managed (``venv``)
    program only. No SSH: what is installed on the cluster is checked at submit."""
    try:
        settings = load()
    except VqError:
        return [Check("lane programs", "warn", "skipped: the configuration is invalid")]
    registry = getattr(settings, "programs", None) or {}
    hosts = getattr(settings, "hosts", None) or {}
    found: list[Check] = []
    checked = 0
    for lane, host in sorted(hosts.items()):
        for table in ("scheduler_program_hooks", "scheduler_programs"):
            for name in sorted(getattr(host, table, None) or {}):
                checked += 1
                where = f"[hosts.{lane}.{table}.{name}]"
                program = registry.get(name)
                if program is None:
                    found.append(
                        Check(
                            "lane programs",
                            "warn",
                            f"{where} names no registered program",
                            f"add [programs.{name}] or remove {where}: "
                            "`--program` takes registered names only",
                        )
                    )
                elif table == "scheduler_programs" and getattr(program, "kind", None) != "venv":
                    found.append(
                        Check(
                            "lane programs",
                            "warn",
                            f"{where}: program {name!r} is not a managed runtime "
                            f"({getattr(program, 'kind', '?')}); the entry is never used",
                            "a lane's scheduler_programs resolves managed (venv) programs",
                        )
                    )
    if found:
        return found
    if not checked:
        return [Check("lane programs", "ok", "no lane program hooks or registries")]
    return [Check("lane programs", "ok", f"{checked} lane program entries name programs")]


def check_multi_user(load: Callable[[], object]) -> Check:
    """Whether the system policy enables multi-user mode, its privilege drop, and why."""
    try:
        settings = load()
    except VqError:
        return Check("multi-user", "warn", "skipped: the configuration is invalid")
    policy = getattr(settings, "multi_user", None)
    if policy is None or not policy.enabled:
        return Check("multi-user", "ok", "single-user mode ([multi_user] is not enabled)")
    if policy.privilege_drop != "collector":
        return Check(
            "multi-user",
            "fail",
            f"[multi_user] is enabled (privilege_drop = {policy.privilege_drop}), but this "
            "build has only the collector drop, so the daemon refuses to start as root",
            'set privilege_drop = "collector"; jobs never fall back to running as root',
        )
    return Check(
        "multi-user",
        "ok",
        "[multi_user] is enabled (privilege_drop = collector): the root daemon starts each "
        "job as its owner inside its own cgroup, or fails it (exit 125, not run)",
    )


def run_checks(
    paths: StatePaths,
    ping: PingAnswer | None,
    load_config: Callable[[], object],
    now: datetime,
) -> list[Check]:
    steps: list[tuple[str, Callable[[], Check | list[Check]]]] = [
        ("state root", lambda: check_state_root(paths)),
        ("daemon", lambda: check_daemon(ping, paths)),
        ("config", lambda: check_config(load_config)),
        ("cgroups", lambda: check_cgroups(ping)),
        ("enforcement", lambda: check_enforcement(ping, load_config)),
        ("multi-user", lambda: check_multi_user(load_config)),
        ("programs", lambda: check_programs(load_config)),
        ("lane programs", lambda: check_lane_programs(load_config)),
        ("specs", lambda: check_specs(paths, now)),
        ("leftovers", lambda: check_leftovers(paths)),
        ("disk", lambda: check_disk(paths)),
    ]
    checks: list[Check] = []
    for name, step in steps:
        try:
            found = step()
        except Exception as exc:  # a check that cannot run is itself a finding
            found = Check(name, "fail", f"the check could not run: {type(exc).__name__}: {exc}")
        checks.extend(found if isinstance(found, list) else [found])
    return checks
