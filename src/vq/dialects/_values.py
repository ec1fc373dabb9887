"""Checks of the values vq writes into scripts and argv, and scheduler time formats.

Every ``check_*`` returns the value unchanged or raises :class:`UnsafeSchedulerValue`
naming the field. The character sets are deliberately narrow: a directive line is parsed
by the scheduler, not by a shell, so a value is safe only if no scheduler could read it
as two values, a pattern (``%j``) or a new directive.
"""

from __future__ import annotations

import re

from vq.dialects.model import UnsafeSchedulerValue

__all__ = [
    "ceil_minutes",
    "check_abs_path",
    "check_job_id",
    "check_name",
    "check_nonce",
    "check_relative_path",
    "check_scratch_template",
    "check_text_argv",
    "check_user_variable_name",
    "check_variable_name",
    "format_slurm_duration",
    "kib_from_slurm_size",
    "slurm_duration_seconds",
]

_JOB_ID = re.compile(r"[0-9a-f]{12}")
_NONCE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+,-]{0,127}")
_PATH_CHARS = r"[A-Za-z0-9._+@,=-]"
_SEGMENT = re.compile(rf"{_PATH_CHARS}+")
_VARIABLE = re.compile(r"VQ_[A-Z0-9_]{1,64}")
_USER_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,255}")
_SCRATCH_PIECE = re.compile(
    rf"(?:{_PATH_CHARS}|/|\$[A-Za-z_][A-Za-z0-9_]*|\$\{{[A-Za-z_][A-Za-z0-9_]*\}})+"
)
_MAX_PATH = 1024


def check_job_id(field: str, value: str) -> str:
    if not isinstance(value, str) or not _JOB_ID.fullmatch(value):
        raise UnsafeSchedulerValue(field, f"{value!r} is not a vq job id (12 hex digits)")
    return value


def check_nonce(field: str, value: str) -> str:
    if not isinstance(value, str) or not _NONCE.fullmatch(value):
        raise UnsafeSchedulerValue(field, f"{value!r} must be 1-64 letters, digits, '_' or '-'")
    return value


def check_name(field: str, value: str) -> str:
    """A partition, account, QoS or queue name (Slurm allows a comma-separated list)."""
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise UnsafeSchedulerValue(field, f"{value!r} is not a plain scheduler name")
    return value


def _check_segments(field: str, value: str, segments: list[str]) -> None:
    for segment in segments:
        if segment in ("", ".", "..") or not _SEGMENT.fullmatch(segment):
            raise UnsafeSchedulerValue(field, f"{value!r} has an unsafe path component")


def check_abs_path(field: str, value: str) -> str:
    """An absolute path whose components are plain (no ``..``, ``%``, spaces, quotes)."""
    if not isinstance(value, str) or not value.startswith("/") or len(value) > _MAX_PATH:
        raise UnsafeSchedulerValue(field, f"{value!r} is not an absolute path")
    if value == "/":
        raise UnsafeSchedulerValue(field, "'/' is not a usable directory")
    _check_segments(field, value, value[1:].rstrip("/").split("/"))
    return value.rstrip("/")


def check_relative_path(field: str, value: str) -> str:
    """A path inside the workspace: relative, plain components, not under ``_vq/``."""
    if not isinstance(value, str) or not value or value.startswith("/") or len(value) > _MAX_PATH:
        raise UnsafeSchedulerValue(field, f"{value!r} is not a path inside the workspace")
    parts = value.split("/")
    _check_segments(field, value, parts)
    if parts[0] == "_vq":
        raise UnsafeSchedulerValue(field, f"{value!r} is inside vq's own _vq directory")
    return value


def check_scratch_template(field: str, value: str) -> str:
    """``node_scratch_dir``: an absolute path that may use ``$VAR``/``${VAR}`` (expanded
    on the compute node, e.g. ``$TMPDIR``); no command substitution, quotes or spaces."""
    if (
        not isinstance(value, str)
        or not value.startswith(("/", "$"))
        or len(value) > _MAX_PATH
        or not _SCRATCH_PIECE.fullmatch(value)
        or "/../" in f"{value}/"
        or "/./" in f"{value}/"
    ):
        raise UnsafeSchedulerValue(
            field,
            f"{value!r} is not a directory template",
            hint="use an absolute path, optionally with $VAR or ${VAR}, e.g. $TMPDIR or /local",
        )
    return value


def check_variable_name(field: str, value: str) -> str:
    if not isinstance(value, str) or not _VARIABLE.fullmatch(value):
        raise UnsafeSchedulerValue(field, f"{value!r} is not a VQ_* variable name")
    return value


def check_user_variable_name(field: str, value: str) -> str:
    """A variable the submit named: a shell identifier, not vq's (``VQ_*``) and not the
    batch script's own shell variables (``vq_*``)."""
    if not isinstance(value, str) or not _USER_VARIABLE.fullmatch(value):
        raise UnsafeSchedulerValue(field, f"{str(value)[:64]!r} is not a variable name")
    if value.upper().startswith("VQ_"):
        raise UnsafeSchedulerValue(field, f"{value} is reserved: VQ_* and vq_* names are vq's")
    return value


def check_text_argv(field: str, values: tuple[str, ...], *, allow_empty: bool = False) -> None:
    """Arguments quoted into the script: any text except NUL and unpaired surrogates
    (neither can reach an exec'd argv)."""
    if not values and not allow_empty:
        raise UnsafeSchedulerValue(field, "is empty", hint="give at least the program to run")
    for value in values:
        if not isinstance(value, str):
            raise UnsafeSchedulerValue(field, f"{value!r} is not text")
        if "\x00" in value:
            raise UnsafeSchedulerValue(field, "an argument contains a NUL byte")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise UnsafeSchedulerValue(field, "an argument is not valid Unicode text") from None


def ceil_minutes(seconds: int) -> int:
    """Whole minutes, rounded up (Slurm limits have minute resolution)."""
    return -(-seconds // 60)


_CLOCK = re.compile(r"(?:([0-9]+):)?([0-9]+):([0-9]+(?:\.[0-9]+)?)")
_DAYS = re.compile(r"([0-9]+)-([0-9]+)(?::([0-9]+)(?::([0-9]+))?)?")


def slurm_duration_seconds(text: str) -> float | None:
    """Seconds of a Slurm duration: ``M:SS``, ``MM:SS.mmm``, ``H:MM:SS``, and with days
    ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``. None for ``UNLIMITED``, ``INVALID``, empty
    and anything unreadable."""
    value = text.strip()
    days = _DAYS.fullmatch(value)
    if days:
        day, hours, minutes, seconds = (int(part or 0) for part in days.groups())
        return day * 86400 + hours * 3600 + minutes * 60 + seconds
    clock = _CLOCK.fullmatch(value)
    if clock:
        hours = int(clock[1] or 0)
        return hours * 3600 + int(clock[2]) * 60 + float(clock[3])
    return None


def format_slurm_duration(seconds: float) -> str:
    """Whole seconds as Slurm prints an elapsed time: ``H:MM:SS``, ``D-HH:MM:SS`` from a
    day on (:func:`slurm_duration_seconds` reads it back)."""
    days, rest = divmod(max(0, round(seconds)), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}"


_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([KMGTP]?)")
_SIZE_KIB = {"": 1 / 1024, "K": 1, "M": 1024, "G": 1024**2, "T": 1024**3, "P": 1024**4}


def kib_from_slurm_size(text: str) -> int | None:
    """KiB of a sacct size such as ``3424K``, ``1.50M``, ``2G`` or ``0``; None if empty
    or unreadable. A bare number is bytes."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        return None
    return round(float(match[1]) * _SIZE_KIB[match[2]])
