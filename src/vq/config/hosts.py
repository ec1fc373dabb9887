"""``[hosts.NAME]`` and ``default_host``: the remote vq daemons this queue can reach (§2.2).

An ordinary remote host runs its own vq daemon; this side only reaches it over SSH. The
remote queue owns the job's workspace, spec and events.

- ``ssh``: an ``~/.ssh/config`` alias or ``user@host`` (no option injection: never ``-…``).
- ``vq_command``: the remote argv that starts vq (default ``["vq"]``).
- ``ssh_timeout``: seconds one SSH call may take before the host counts as unreachable.
- ``ssh_options``: extra ``ssh`` arguments (``StrictHostKeyChecking=no`` is refused).
- ``host_key_policy``: ``strict`` (default) or ``accept-new`` (trust a host's first key).
- ``scheduler = "local"``: the host is an ordinary daemon host (the default).
- ``down = true``: an administrative mark on this side; vq never contacts the host.

A host with ``scheduler_dialect = "slurm" | "torque"`` is a *scheduler lane* instead
(§2.2, §3.2; docs/scheduler.md): no vq runs there; the driver daemon named by
``scheduler_driver`` submits batch jobs over SSH into ``scratch_root`` and watches them.
``pbspro`` and ``sge`` fail closed. The lane keys are :class:`LaneSettings`' fields;
they are refused on an ordinary host.

``localhost`` (and ``local``) always name this queue, the local authority. Host names
match ``[a-z0-9][a-z0-9-]{0,62}``; anything else fails configuration loading.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vq.config.host_names import HOST_NAME, LOCAL_NAMES, is_local_name
from vq.config.programs import check_program_names

__all__ = [
    "HOST_NAME",
    "LANE_KEYS",
    "LOCAL_NAMES",
    "HostSettings",
    "LaneProgramSettings",
    "LaneSettings",
    "ProgramHookSettings",
    "check_default_host",
    "check_host_names",
    "daemon_hosts",
    "is_local_name",
    "lanes_of",
]

_SSH_DEST = re.compile(r"[A-Za-z0-9_.%+@:\[\]-]+")
#: Directive values (partition, account, qos): what the dialects accept verbatim.
_DIRECTIVE = re.compile(r"[A-Za-z0-9._+=,@:/-]{1,128}")
#: Lane keys: every one of them is refused on an ordinary daemon host (and ``vq config
#: show`` lists them only for lanes).
LANE_KEYS = (
    "scratch_root",
    "scheduler_driver",
    "partition",
    "account",
    "qos",
    "scheduler_mem_directive",
    "node_scratch_dir",
    "prologue",
    "epilogue",
    "scheduler_program_hooks",
    "scheduler_programs",
    "scheduler_gnu_time_command",
    "max_scheduler_jobs",
    "poll_interval",
    "scheduler_rpc_per_minute",
    "scheduler_accounting",
    "scheduler_backoff_seconds",
    "scheduler_copy_back_delays",
    "scheduler_absent_recheck_seconds",
    "scheduler_min_job_age",
)


class ProgramHookSettings(BaseModel):
    """``[hosts.NAME.scheduler_program_hooks.PROG]``: trusted shell lines around a
    program's command on the cluster, and an argv the command is appended to."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    prologue: list[str] = Field(default_factory=list)
    epilogue: list[str] = Field(default_factory=list)
    command_wrapper: list[str] = Field(default_factory=list)


def _cluster_path(value: str) -> str:
    if not value.startswith("/") or ".." in value.split("/"):
        raise ValueError("must be an absolute path on the cluster without '..'")
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise ValueError("must not contain control characters")
    return value


class LaneProgramSettings(BaseModel):
    """``[hosts.NAME.scheduler_programs.PROG]``: managed program PROG as installed on the
    lane's cluster, the target program registry (§3.4): its interpreter and git checkout
    there, an optional module whose ``__version__`` is its version, and an optional
    commit it must be at. A submit naming PROG on the lane resolves it over SSH."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    python: str = Field(min_length=2, max_length=1024)
    git_dir: str = Field(min_length=2, max_length=1024)
    import_check: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
    )
    expected_git_sha: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{7,64}$")

    _paths = field_validator("python", "git_dir")(_cluster_path)


class LaneSettings(BaseModel):
    """The scheduler-lane view of a ``[hosts.NAME]`` with ``scheduler_dialect``."""

    model_config = ConfigDict(frozen=True)

    name: str
    dialect: Literal["slurm", "torque"]
    ssh: str
    ssh_options: tuple[str, ...]
    host_key_policy: Literal["strict", "accept-new"]
    ssh_timeout: float
    scratch_root: str
    driver: str
    partition: str | None
    account: str | None
    qos: str | None
    mem_directive: Literal["request", "omit"]
    node_scratch_dir: str | None
    prologue: tuple[str, ...]
    epilogue: tuple[str, ...]
    program_hooks: dict[str, ProgramHookSettings]
    gnu_time_command: str
    max_jobs: int
    poll_interval: float
    rpc_per_minute: int
    accounting: Literal["sacct", "none"]
    backoff_seconds: float = 600.0
    copy_back_delays: tuple[float, ...] = (30.0, 120.0, 300.0)
    absent_recheck_seconds: float = 30.0
    #: How long the scheduler keeps an ended job visible (Slurm's MinJobAge).
    min_job_age: float = 300.0
    #: ``scheduler_programs``: the target program registry (name → its cluster install)
    programs: dict[str, LaneProgramSettings] = Field(default_factory=dict)

    @property
    def jobs_root(self) -> str:
        """``<scratch_root>/.vibeqc-cluster/jobs``: one directory per vq job below it."""
        return self.scratch_root.rstrip("/") + "/.vibeqc-cluster/jobs"

    def remote_workspace(self, job_id: str) -> str:
        return f"{self.jobs_root}/{job_id}"


class HostSettings(BaseModel):
    """One ``[hosts.NAME]`` table (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    ssh: str = Field(min_length=1, max_length=255)
    vq_command: list[str] = Field(default_factory=lambda: ["vq"], min_length=1)
    ssh_timeout: float = Field(default=10.0, gt=0, le=600)
    ssh_options: list[str] = Field(default_factory=list)
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    scheduler: Literal["local"] = "local"
    scheduler_dialect: str | None = None
    down: bool = False
    # --- scheduler lanes (only with scheduler_dialect) -----------------------------------
    scratch_root: str | None = Field(default=None, min_length=2, max_length=1024)
    scheduler_driver: str = "localhost"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    scheduler_mem_directive: Literal["request", "omit"] = "request"
    node_scratch_dir: str | None = Field(default=None, min_length=2, max_length=1024)
    prologue: list[str] = Field(default_factory=list)
    epilogue: list[str] = Field(default_factory=list)
    scheduler_program_hooks: dict[str, ProgramHookSettings] = Field(default_factory=dict)
    scheduler_programs: dict[str, LaneProgramSettings] = Field(default_factory=dict)
    scheduler_gnu_time_command: str = Field(default="/usr/bin/time", min_length=2)
    max_scheduler_jobs: int = Field(default=100, ge=1, le=100000)
    poll_interval: float = Field(default=30.0, gt=0, le=3600)
    scheduler_rpc_per_minute: int = Field(default=6, ge=1, le=6000)
    scheduler_accounting: Literal["sacct", "none"] = "sacct"
    scheduler_backoff_seconds: float = Field(default=600.0, gt=0, le=86400)
    scheduler_copy_back_delays: list[float] = Field(
        default_factory=lambda: [30.0, 120.0, 300.0], max_length=10
    )
    scheduler_absent_recheck_seconds: float = Field(default=30.0, gt=0, le=3600)
    scheduler_min_job_age: float = Field(default=300.0, gt=0, le=7 * 86400)

    @field_validator("ssh")
    @classmethod
    def _destination(cls, value: str) -> str:
        if value.startswith("-") or not _SSH_DEST.fullmatch(value):
            raise ValueError("must be an SSH alias or user@host (no spaces, not starting with -)")
        return value

    @field_validator("vq_command")
    @classmethod
    def _words(cls, value: list[str]) -> list[str]:
        if any(not word or "\x00" in word for word in value):
            raise ValueError("must be a list of non-empty words, e.g. ['vq']")
        return value

    @field_validator("ssh_options")
    @classmethod
    def _no_blind_trust(cls, value: list[str]) -> list[str]:
        joined = " ".join(value).lower().replace(" ", "")
        if re.search(r"stricthostkeychecking=(no|off|false)", joined):
            raise ValueError(
                "StrictHostKeyChecking=no is refused; use host_key_policy = 'accept-new'"
            )
        return value

    @field_validator("scheduler_programs")
    @classmethod
    def _program_names(
        cls, value: dict[str, LaneProgramSettings]
    ) -> dict[str, LaneProgramSettings]:
        check_program_names(dict(value))
        return value

    @field_validator("partition", "account", "qos")
    @classmethod
    def _directive(cls, value: str | None) -> str | None:
        if value is not None and not _DIRECTIVE.fullmatch(value):
            raise ValueError("must be 1-128 of letters, digits and . _ + = , @ : / -")
        return value

    @model_validator(mode="after")
    def _lane_keys(self) -> HostSettings:
        dialect = self.scheduler_dialect
        if dialect is None:
            given = sorted(k for k in LANE_KEYS if k in self.model_fields_set)
            if given:
                raise ValueError(
                    f"{', '.join(given)} only apply to a scheduler lane "
                    '(add scheduler_dialect = "slurm" or "torque")'
                )
            return self
        if dialect in ("pbspro", "sge"):
            raise ValueError(
                f"scheduler_dialect {dialect!r} is not implemented (use slurm or torque)"
            )
        if dialect not in ("slurm", "torque"):
            raise ValueError(f"unknown scheduler_dialect {dialect!r} (use slurm or torque)")
        for key in ("scratch_root", "node_scratch_dir", "scheduler_gnu_time_command"):
            value = getattr(self, key)
            if value is not None and (not value.startswith("/") or ".." in value.split("/")):
                raise ValueError(f"{key} must be an absolute path without '..'")
        if self.scratch_root is None:
            raise ValueError(
                "a scheduler lane needs scratch_root (an absolute path on the cluster)"
            )
        if self.scheduler_driver not in LOCAL_NAMES and not HOST_NAME.fullmatch(
            self.scheduler_driver
        ):
            raise ValueError("scheduler_driver must be 'localhost' or a configured host name")
        return self

    def lane(self, name: str) -> LaneSettings | None:
        """This host as a scheduler lane, or None for an ordinary daemon host."""
        if self.scheduler_dialect not in ("slurm", "torque") or self.scratch_root is None:
            return None
        return LaneSettings(
            name=name,
            dialect=self.scheduler_dialect,
            ssh=self.ssh,
            ssh_options=tuple(self.ssh_options),
            host_key_policy=self.host_key_policy,
            ssh_timeout=self.ssh_timeout,
            scratch_root=self.scratch_root,
            driver="localhost" if is_local_name(self.scheduler_driver) else self.scheduler_driver,
            partition=self.partition,
            account=self.account,
            qos=self.qos,
            mem_directive=self.scheduler_mem_directive,
            node_scratch_dir=self.node_scratch_dir,
            prologue=tuple(self.prologue),
            epilogue=tuple(self.epilogue),
            program_hooks=dict(self.scheduler_program_hooks),
            gnu_time_command=self.scheduler_gnu_time_command,
            max_jobs=self.max_scheduler_jobs,
            poll_interval=self.poll_interval,
            rpc_per_minute=self.scheduler_rpc_per_minute,
            accounting=self.scheduler_accounting,
            backoff_seconds=self.scheduler_backoff_seconds,
            copy_back_delays=tuple(self.scheduler_copy_back_delays),
            absent_recheck_seconds=self.scheduler_absent_recheck_seconds,
            min_job_age=self.scheduler_min_job_age,
            programs=dict(self.scheduler_programs),
        )


def lanes_of(hosts: dict[str, HostSettings]) -> dict[str, LaneSettings]:
    """The scheduler lanes among ``hosts``, by name."""
    out: dict[str, LaneSettings] = {}
    for name, host in hosts.items():
        lane = host.lane(name)
        if lane is not None:
            out[name] = lane
    return out


def daemon_hosts(hosts: dict[str, HostSettings]) -> dict[str, HostSettings]:
    """The ordinary remote vq daemon hosts among ``hosts`` (no scheduler lanes)."""
    return {name: host for name, host in hosts.items() if host.scheduler_dialect is None}


def check_host_names(hosts: dict[str, HostSettings]) -> dict[str, HostSettings]:
    """Refuse names outside ``[a-z0-9][a-z0-9-]{0,62}`` and names of this queue."""
    for name in hosts:
        if not HOST_NAME.fullmatch(name):
            raise ValueError(
                f"host name {name!r} must match [a-z0-9][a-z0-9-]{{0,62}} "
                "(lower-case letters, digits and '-')"
            )
        if name in LOCAL_NAMES:
            raise ValueError(f"host name {name!r} is reserved for this queue")
    return hosts


def check_default_host(default: str | None, hosts: dict[str, HostSettings]) -> None:
    """``default_host`` is unset, a name of this queue, or a configured host."""
    if default is None or default in LOCAL_NAMES or default in hosts:
        return
    known = ", ".join(["localhost", *sorted(hosts)])
    raise ValueError(f"default_host {default!r} is not a configured host (known: {known})")
