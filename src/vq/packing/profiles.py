"""Packing profiles: ``[packing.NAME.target]`` + ``[packing.NAME.resources]`` (pure).

A profile says where packed allocations go (a Slurm lane, partitions, account…), the
ceilings no allocation may exceed, and the one resource request every task of a roster
makes. :func:`parse_profiles` validates every profile of one config layer, selected or
not, and raises :class:`ProfileError` naming the key path of the first problem
(``packing.NAME.target.KEY``); the caller adds the file and line.

Refused: unknown keys, missing keys (a profile is complete in one layer), counted GRES
(``gpu:2``), relative remote paths, tokens outside Slurm's safe alphabet, control
characters, booleans where integers belong, zero or unlimited values, and conflicting GPU
settings (GPUs without ``gpu_gres``, ``gpu_gres`` without GPU capacity, a task asking for
more than an allocation may hold).

``host`` names a Slurm lane (a ``[hosts.NAME]`` with ``scheduler_dialect = "slurm"``);
only its syntax is checked here: the submission path resolves it
(:func:`vq.packing.cases.remote.lane_runner`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from vq.domain.validation_words import CONFIG_WORDS, describe
from vq.packing.timelimit import TimeLimitError, parse_time_limit, rounded_minutes

__all__ = [
    "PackingProfile",
    "ProfileError",
    "Resources",
    "Target",
    "parse_profiles",
    "select_profile",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_CONSTRAINT = re.compile(r"[A-Za-z0-9_.-]{1,64}(?:[&|][A-Za-z0-9_.-]{1,64}){0,15}")
_GRES = re.compile(r"([A-Za-z][A-Za-z0-9_]{0,31})(?::([A-Za-z0-9_.-]{1,32}))?")
_SEGMENT = re.compile(r"[A-Za-z0-9._+-]{1,255}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAX_INT = 2**31 - 1


class ProfileError(ValueError):
    """A refused profile: ``loc`` is the key path inside the layer, ``reason`` says why."""

    def __init__(self, loc: tuple[str, ...], reason: str) -> None:
        super().__init__(f"{'.'.join(loc)}: {reason}")
        self.loc = loc
        self.reason = reason


def _no_controls(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("control characters are not allowed")
    return value


def _token(value: str) -> str:
    _no_controls(value)
    if not _TOKEN.fullmatch(value):
        raise ValueError(f"{value!r} is not a safe Slurm name (letters, digits, '.', '_', '-')")
    return value


def _lane(value: str) -> str:
    _no_controls(value)
    if not _NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a lane name (letters, digits, '.', '_', '-')")
    return value


def _constraint(value: str) -> str:
    _no_controls(value)
    if not _CONSTRAINT.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a safe constraint: feature names joined by '&' or '|' only"
        )
    return value


def _gres(value: str) -> str:
    _no_controls(value)
    parts = value.split(":")
    if len(parts) > 1 and parts[-1].isdigit():
        raise ValueError(
            f"{value!r} is a counted GRES: give the name only; counts come from gpus_per_task"
        )
    if not _GRES.fullmatch(value):
        raise ValueError(f"{value!r} is not a GRES name (e.g. gpu or gpu:a100)")
    return value


def _remote_path(value: str) -> str:
    _no_controls(value)
    if not value.startswith("/"):
        raise ValueError(f"{value!r} must be an absolute remote path")
    parts = value.split("/")[1:]
    if value == "/" or any(part in (".", "..") or not _SEGMENT.fullmatch(part) for part in parts):
        raise ValueError(
            f"{value!r} is not a safe absolute path (plain names of letters, digits, '._+-', "
            "no trailing '/')"
        )
    return value


def _time(value: str) -> str:
    _no_controls(value)
    try:
        parse_time_limit(value)
    except TimeLimitError as exc:
        raise ValueError(str(exc)) from None
    return value


Token = Annotated[str, AfterValidator(_token)]
Positive = Annotated[int, Field(ge=1, le=_MAX_INT)]
NonNegative = Annotated[int, Field(ge=0, le=_MAX_INT)]
TimeLimit = Annotated[str, AfterValidator(_time)]
RemotePath = Annotated[str, AfterValidator(_remote_path)]

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True, hide_input_in_errors=True)


class Target(BaseModel):
    """``[packing.NAME.target]``: where allocations go and the ceilings they respect."""

    model_config = _STRICT

    host: Annotated[str, AfterValidator(_lane)]
    partitions: Annotated[list[Token], Field(min_length=1, max_length=16)]
    account: Token | None = None
    qos: Token | None = None
    constraint: Annotated[str, AfterValidator(_constraint)] | None = None
    gpu_gres: Annotated[str, AfterValidator(_gres)] | None = None
    work_root: RemotePath
    log_root: RemotePath
    apptainer: RemotePath | None = None
    image: RemotePath | None = None
    max_tasks_per_allocation: Positive
    max_cpus_per_allocation: Positive
    max_memory_mib_per_allocation: Positive
    max_gpus_per_allocation: NonNegative
    max_time_limit: TimeLimit
    max_allocations_per_submit: Positive
    max_script_bytes: Annotated[int, Field(ge=1024, le=_MAX_INT)]

    @model_validator(mode="after")
    def _coherent(self) -> Target:
        if len(set(self.partitions)) != len(self.partitions):
            raise ValueError("partitions: a partition is listed twice")
        if (self.apptainer is None) != (self.image is None):
            raise ValueError("apptainer and image go together: give both or neither")
        if self.gpu_gres is None and self.max_gpus_per_allocation != 0:
            raise ValueError("max_gpus_per_allocation must be 0 when gpu_gres is omitted")
        if self.gpu_gres is not None and self.max_gpus_per_allocation == 0:
            raise ValueError("gpu_gres is set but max_gpus_per_allocation is 0")
        return self

    @property
    def max_time_minutes(self) -> int:
        return rounded_minutes(parse_time_limit(self.max_time_limit))


class Resources(BaseModel):
    """``[packing.NAME.resources]``: what every task of a roster requests."""

    model_config = _STRICT

    cpus_per_task: Positive
    memory_mib_per_task: Positive
    gpus_per_task: NonNegative
    time_limit: TimeLimit

    @property
    def time_minutes(self) -> int:
        """The effective limit: rounded up to whole minutes once."""
        return _effective_minutes(self.time_limit)


@functools.lru_cache(maxsize=256)
def _effective_minutes(limit: str) -> int:
    return rounded_minutes(parse_time_limit(limit))


class PackingProfile(BaseModel):
    """One complete profile; ``name`` is its nonbinding label."""

    model_config = _STRICT

    name: str
    target: Target
    resources: Resources

    @model_validator(mode="after")
    def _one_task_fits(self) -> PackingProfile:
        target, res = self.target, self.resources
        if res.gpus_per_task and target.gpu_gres is None:
            raise _Conflict("resources", "gpus_per_task > 0 needs target.gpu_gres")
        checks = (
            ("cpus_per_task", res.cpus_per_task, target.max_cpus_per_allocation),
            ("memory_mib_per_task", res.memory_mib_per_task, target.max_memory_mib_per_allocation),
            ("gpus_per_task", res.gpus_per_task, target.max_gpus_per_allocation),
            ("time_limit", res.time_minutes, target.max_time_minutes),
        )
        for key, wanted, ceiling in checks:
            if wanted > ceiling:
                raise _Conflict(
                    "resources", f"{key} exceeds the target's ceiling for one allocation"
                )
        return self


class _Conflict(ValueError):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where


def _message(error: Mapping[str, Any]) -> str:
    """The problem in vq's shared words (:func:`vq.domain.validation_words.describe`), with
    what a packing profile adds: it is complete in one layer, and it has no zero or
    unlimited counts."""
    said = describe(error, CONFIG_WORDS)
    ctx = error.get("ctx") or {}
    if error["type"] == "missing":
        return f"{said} (a profile is complete: give every required key)"
    if error["type"] == "greater_than_equal" and ctx.get("ge") == 1:
        return f"{said} (zero and unlimited values are not allowed)"
    return said


def _profile(name: str, raw: Any) -> PackingProfile:
    base = ("packing", name)
    if not _NAME.fullmatch(name):
        raise ProfileError(base, "a profile name is letters, digits, '.', '_', '-'")
    if not isinstance(raw, Mapping):
        raise ProfileError(base, "must be a table with target and resources")
    if "name" in raw:
        raise ProfileError((*base, "name"), "unknown key")
    try:
        return PackingProfile.model_validate({"name": name, **raw})
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(str(part) for part in error["loc"])
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, _Conflict):
            loc = (cause.where,)
        return _raise(base + loc, _message(error))


def _raise(loc: tuple[str, ...], reason: str) -> PackingProfile:
    raise ProfileError(loc, reason)


def parse_profiles(layer: Mapping[str, Any]) -> dict[str, PackingProfile]:
    """Every profile of one config layer (its ``packing`` table), validated.

    ``default_packing``, when present, must name one of them; it is checked by
    :func:`check_default` once the layers are known.
    """
    packing = layer.get("packing", {})
    if not isinstance(packing, Mapping):
        raise ProfileError(("packing",), "must be a table of profiles")
    profiles = {name: _profile(str(name), raw) for name, raw in packing.items()}
    default = layer.get("default_packing")
    if default is not None and not isinstance(default, str):
        raise ProfileError(("default_packing",), "must be a string")
    return profiles


def check_default(default: str | None, names: set[str]) -> None:
    """``default_packing`` names a profile defined in some layer."""
    if default is not None and default not in names:
        known = ", ".join(sorted(names)) or "none"
        raise ProfileError(("default_packing",), f"names no profile {default!r} (defined: {known})")


def select_profile(
    profiles: Mapping[str, PackingProfile], default: str | None, name: str | None
) -> PackingProfile:
    """The profile ``name`` (an explicit choice wins), else the default; KeyError-free."""
    chosen = name if name is not None else default
    if chosen is None:
        raise ProfileError(
            ("default_packing",), "no profile named and no default_packing configured"
        )
    if chosen not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise ProfileError(("packing", chosen), f"no such profile (defined: {known})")
    return profiles[chosen]
