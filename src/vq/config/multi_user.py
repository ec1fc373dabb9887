"""``[multi_user]``: the system multi-user policy (§7.1), a section of :mod:`vq.config.settings`.

A leaf module (pydantic and ``os`` only). The policy is system configuration: it is read
from the system config file, ``$VQ_CONFIG_DIR/config.toml`` when ``VQ_CONFIG_DIR`` is set,
else ``/etc/vq/config.toml``; a personal config (``$XDG_CONFIG_HOME/vq`` or
``~/.config/vq``) may not set it, so system policy always beats a personal config.
``docs/multi-user.md`` describes the mode and ``docs/config.md`` every key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vq.domain.quotas import QuotaLimits, QuotaPolicy

__all__ = [
    "DEFAULT_MULTI_USER_ROOT",
    "SITE_CONFIG",
    "MultiUserSettings",
    "QuotaSettings",
    "allow_root_from_env",
    "multi_user_root",
    "system_config_path",
]

SITE_CONFIG = Path("/etc/vq/config.toml")
DEFAULT_MULTI_USER_ROOT = Path("/var/lib/vq")
_GROUP = re.compile(r"[a-z_][a-z0-9_-]{0,31}\$?")


class MultiUserSettings(BaseModel):
    """``[multi_user]``: whether a root daemon serves every user, and how it drops privilege.

    ``privilege_drop`` has no default: with ``enabled = true`` the operator must choose
    ``"systemd"`` (a ``systemd-run --uid/--gid`` scope per job) or ``"collector"`` (the
    root collector joins the job's cgroup and drops to the submitter itself).
    """

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    enabled: bool = False
    admin_group: str = "vq-admins"
    privilege_drop: Literal["systemd", "collector"] | None = None
    min_uid: int = Field(default=1000, ge=1, le=2**31 - 1)

    @field_validator("admin_group")
    @classmethod
    def _group_name(cls, value: str) -> str:
        if not _GROUP.fullmatch(value):
            raise ValueError("must be a POSIX group name such as vq-admins")
        return value

    @model_validator(mode="after")
    def _drop_chosen(self) -> MultiUserSettings:
        if self.enabled and self.privilege_drop is None:
            raise ValueError('enabled = true needs privilege_drop = "systemd" or "collector"')
        return self


class UidQuota(BaseModel):
    """``[quotas.uid.<uid>]``: one owner's overrides (an unset key keeps the default)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    max_pending_jobs: int | None = Field(default=None, ge=1)
    max_concurrent_cpus: int | None = Field(default=None, ge=1)


_UID = re.compile(r"[1-9][0-9]{0,9}")


class QuotaSettings(BaseModel):
    """``[quotas]`` (§4.9): per-owner dispatch limits of multi-user mode; unset = unlimited.

    Both count active holders (running, suspended, reserved); ``default_max_pending_jobs``
    caps how many an owner has, ``default_max_concurrent_cpus`` their declared CPUs.
    """

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    default_max_pending_jobs: int | None = Field(default=None, ge=1)
    default_max_concurrent_cpus: int | None = Field(default=None, ge=1)
    uid: dict[str, UidQuota] = Field(default_factory=dict)

    @field_validator("uid")
    @classmethod
    def _numeric_uids(cls, value: dict[str, UidQuota]) -> dict[str, UidQuota]:
        for key in value:
            if not _UID.fullmatch(key):
                raise ValueError(f"{key!r} is not a canonical decimal uid ([quotas.uid.1001])")
        return value

    def policy(self) -> QuotaPolicy:
        return QuotaPolicy(
            QuotaLimits(self.default_max_pending_jobs, self.default_max_concurrent_cpus),
            {
                int(uid): QuotaLimits(limits.max_pending_jobs, limits.max_concurrent_cpus)
                for uid, limits in self.uid.items()
            },
        )


def system_config_path(env: Mapping[str, str]) -> Path:
    """The system config file: ``$VQ_CONFIG_DIR/config.toml``, else ``/etc/vq/config.toml``."""
    configured = env.get("VQ_CONFIG_DIR")
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured))) / "config.toml"
    return SITE_CONFIG


def multi_user_root(env: Mapping[str, str]) -> Path:
    """The system state root: ``VQ_MULTI_USER_ROOT``, else ``/var/lib/vq``."""
    configured = env.get("VQ_MULTI_USER_ROOT")
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured)))
    return DEFAULT_MULTI_USER_ROOT


def allow_root_from_env(env: Mapping[str, str]) -> bool:
    """``VQ_ALLOW_ROOT=1`` (or ``true``/``yes``): the env form of ``--allow-root``."""
    return env.get("VQ_ALLOW_ROOT", "").strip().lower() in {"1", "true", "yes"}
