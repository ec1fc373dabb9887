"""``[hosts.NAME]`` and ``default_host``: the remote vq daemons this queue can reach (§2.2).

An ordinary remote host runs its own vq daemon; this side only reaches it over SSH. The
remote queue owns the job's workspace, spec and events.

- ``ssh``: an ``~/.ssh/config`` alias or ``user@host`` (no option injection: never ``-…``).
- ``vq_command``: the remote argv that starts vq (default ``["vq"]``).
- ``ssh_timeout``: seconds one SSH call may take before the host counts as unreachable.
- ``ssh_options``: extra ``ssh`` arguments (``StrictHostKeyChecking=no`` is refused).
- ``host_key_policy``: ``strict`` (default) or ``accept-new`` (trust a host's first key).
- ``scheduler = "local"``: the host is an ordinary daemon host (the only kind so far).
- ``down = true``: an administrative mark on this side; vq never contacts the host.

``localhost`` (and ``local``) always name this queue, the local authority. Host names
match ``[a-z0-9][a-z0-9-]{0,62}``; anything else fails configuration loading.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vq._hostnames import HOST_NAME, LOCAL_NAMES, is_local_name

__all__ = [
    "HOST_NAME",
    "LOCAL_NAMES",
    "HostSettings",
    "check_default_host",
    "check_host_names",
    "is_local_name",
]

_SSH_DEST = re.compile(r"[A-Za-z0-9_.%+@:\[\]-]+")


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

    @model_validator(mode="after")
    def _no_dialect_yet(self) -> HostSettings:
        if self.scheduler_dialect is not None:
            raise ValueError(
                "scheduler_dialect (Slurm/Torque lanes) is not supported yet; "
                "remove it to use the host as an ordinary vq daemon host"
            )
        return self


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
