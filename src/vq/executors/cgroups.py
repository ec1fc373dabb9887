"""cgroup scopes for local jobs (§5.2): a bounded probe, and the launch wrapper.

vq does not infer cgroup support from versions. It runs one bounded
``systemd-run --user --scope --collect`` probe with a small ``MemoryMax``. On success
each local job runs inside a named scope ``vq-job-<id>.scope`` with ``MemoryMax`` (the
effective memory), ``MemoryHigh`` (90 % of it) and ``CPUQuota`` (100 % per declared CPU),
and the scope is stopped at the end of every attempt. On failure jobs launch directly
and the watchdog enforces memory by sampling RSS. Either way the watchdog keeps judging
wall time, starvation and host pressure.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from vq.errors import TransportError
from vq.transport.runner import Runner

__all__ = [
    "CGROUP_ENFORCED_MODES",
    "JOB_CGROUP_MODE",
    "PROBE_TIMEOUT_SECONDS",
    "CgroupMode",
    "ScopeInfo",
    "probe",
    "scope_argv",
    "scope_info",
    "scope_name",
    "stop_scope",
]

PROBE_TIMEOUT_SECONDS = 5.0
PROBE_ARGV = (
    "systemd-run",
    "--user",
    "--scope",
    "--collect",
    "--quiet",
    "-p",
    "MemoryMax=64M",
    "true",
)


@dataclass(frozen=True)
class CgroupMode:
    """How jobs' memory and CPUs are held, and why: ``scope`` (systemd user scopes),
    ``job-cgroup`` (the multi-user daemon's collector drop puts each job in its own
    cgroup before dropping to the owner) or ``direct`` (no cgroup: the watchdog samples)."""

    mode: str
    reason: str

    @property
    def scoped(self) -> bool:
        """Whether jobs run in systemd user scopes."""
        return self.mode == "scope"

    @property
    def cgroup_enforced(self) -> bool:
        """Whether each job's memory and CPUs are held by a cgroup of its own."""
        return self.mode in CGROUP_ENFORCED_MODES


#: The modes in which a job's own cgroup holds its memory and CPUs.
CGROUP_ENFORCED_MODES = ("scope", "job-cgroup")

#: The multi-user daemon's mode: it never asks systemd-run (root has no user manager
#: there); the collector places each job in its own group (:mod:`vq.executors._privdrop`).
JOB_CGROUP_MODE = CgroupMode(
    "job-cgroup",
    "multi-user collector drop: each job runs in its own cgroup (memory, cpu, pids) "
    "made by the daemon before the collector drops to the job's owner",
)


def probe(runner: Runner) -> CgroupMode:
    """Run the bounded scope probe once: ``scope`` when it worked, else ``direct``."""
    try:
        result = runner.run(PROBE_ARGV, deadline_s=PROBE_TIMEOUT_SECONDS)
        failure = None if result.ok else result.first_line()
    except TransportError as exc:
        failure = exc.message
    if failure is None:
        return CgroupMode(
            "scope", "systemd-run --user --scope works: jobs run in vq-job-<id>.scope"
        )
    return CgroupMode(
        "direct",
        f"systemd-run --user --scope failed ({failure}); jobs run "
        "directly and the watchdog enforces memory by sampling RSS",
    )


def scope_name(job_id: str) -> str:
    return f"vq-job-{job_id}.scope"


def scope_argv(job_id: str, cpus: int, mem_mb: int | None) -> list[str]:
    """The prefix that runs a command inside the job's scope."""
    argv = [
        "systemd-run",
        "--user",
        "--scope",
        "--collect",
        "--quiet",
        f"--unit={scope_name(job_id)}",
    ]
    if mem_mb:
        argv += ["-p", f"MemoryMax={mem_mb}M", "-p", f"MemoryHigh={max(1, mem_mb * 9 // 10)}M"]
    argv += ["-p", f"CPUQuota={cpus * 100}%", "--"]
    return argv


def stop_scope(runner: Runner, job_id: str) -> None:
    """Stop the job's scope (best-effort; a scope that is already gone is fine)."""
    with contextlib.suppress(TransportError):
        runner.run(
            ["systemctl", "--user", "stop", scope_name(job_id)], deadline_s=PROBE_TIMEOUT_SECONDS
        )


@dataclass(frozen=True)
class ScopeInfo:
    """What systemd says of a job's scope: its cgroup path, main pid (0: none) and
    whether it is active (a leftover of an earlier attempt when found before launch)."""

    control_group: str | None
    main_pid: int
    active: bool


def scope_info(runner: Runner, job_id: str) -> ScopeInfo | None:
    """``systemctl --user show`` of the job's scope; None when systemd does not answer."""
    argv = [
        "systemctl",
        "--user",
        "show",
        "--property=ControlGroup",
        "--property=MainPID",
        "--property=ActiveState",
        scope_name(job_id),
    ]
    try:
        result = runner.run(argv, deadline_s=PROBE_TIMEOUT_SECONDS)
    except TransportError:
        return None
    if not result.ok:
        return None
    text = result.stdout.decode(errors="replace")
    values = dict(line.partition("=")[::2] for line in text.splitlines())
    pid_text = values.get("MainPID", "0").strip()
    return ScopeInfo(
        control_group=values.get("ControlGroup", "").strip() or None,
        main_pid=int(pid_text) if pid_text.isdigit() else 0,
        active=values.get("ActiveState", "").strip() in ("active", "activating", "deactivating"),
    )
