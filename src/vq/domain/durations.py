"""The one bounded parser of durations and points in time a user can type.

Durations: units ``2h30m``, ``90s``, ``1d`` (in d/h/m/s order), ``HH:MM:SS``, and Slurm's
``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS`` and ``MM:SS``. A bare number means seconds, except
where ``bare_seconds=False`` (``--wall-time``: Slurm reads a bare number as minutes, so
vq refuses it rather than guess). Every duration is positive and at most
:data:`MAX_DURATION_SECONDS`; anything else is :class:`InvalidInput`, never an
OverflowError.

Times (:func:`parse_moment`): an ISO 8601 time (naive = the user's local time) or a
duration from ``now``, between :data:`MIN_MOMENT` and :data:`MAX_MOMENT`.

Pure and stdlib-only (the CLI imports it on the submit path).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from vq.errors import InvalidInput

__all__ = [
    "MAX_DURATION_SECONDS",
    "MAX_MOMENT",
    "MIN_MOMENT",
    "format_duration",
    "parse_duration",
    "parse_moment",
]

#: The longest duration vq accepts: 100 years.
MAX_DURATION_SECONDS = 100 * 366 * 86400
#: The range of accepted points in time.
MIN_MOMENT = datetime(1970, 1, 1, tzinfo=UTC)
MAX_MOMENT = datetime(9000, 1, 1, tzinfo=UTC)

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_NUMBER = r"[0-9]{1,20}"  # ASCII digits only, and few enough that int() is instant
_PART = re.compile(rf"({_NUMBER})([dhms])")
_CLOCK = re.compile(
    rf"(?:(?P<days>{_NUMBER})-)?(?P<h>{_NUMBER})(?::(?P<m>[0-9]{{1,2}})(?::(?P<s>[0-9]{{1,2}}))?)?"
)
_MINSEC = re.compile(rf"(?P<m>{_NUMBER}):(?P<s>[0-9]{{2}})")
_HINT = "use units d/h/m/s such as 90s, 10m, 2h30m, 1d, or [D-]HH:MM:SS"
_BARE_HINT = "write the unit: 10m for ten minutes, 10s for ten seconds (Slurm reads 10 as minutes)"
_MAX_TEXT = 64


def _invalid(text: str, why: str = "", hint: str = _HINT) -> InvalidInput:
    shown = text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + "…"
    return InvalidInput(f"invalid duration {shown!r}{why}", hint=hint)


def _clock_seconds(value: str, text: str) -> int | None:
    """Seconds of a ``[D-]HH[:MM[:SS]]`` or ``MM:SS`` form, None when it is none of them."""
    minsec = _MINSEC.fullmatch(value)
    if minsec:
        minutes, secs = int(minsec["m"]), int(minsec["s"])
        if secs >= 60:
            raise _invalid(text)
        return minutes * 60 + secs
    clock = _CLOCK.fullmatch(value)
    if clock is None or (clock["days"] is None and clock["s"] is None):
        return None  # a bare number, or HH:MM without days: not a clock form
    days = int(clock["days"] or 0)
    hours, minutes, secs = int(clock["h"]), int(clock["m"] or 0), int(clock["s"] or 0)
    if minutes >= 60 or secs >= 60 or (clock["days"] is not None and hours >= 24):
        raise _invalid(text)
    return days * 86400 + hours * 3600 + minutes * 60 + secs


def parse_duration(text: str, *, bare_seconds: bool = True) -> int:
    """Seconds in ``text`` (see the module docstring for the forms).

    Raises :class:`InvalidInput` for anything else, for zero, for values above
    :data:`MAX_DURATION_SECONDS` and, when ``bare_seconds`` is False, for a bare number.
    """
    value = text.strip().lower()
    seconds: int | None
    if len(value) > _MAX_TEXT or not value.isascii():
        raise _invalid(text)
    if re.fullmatch(_NUMBER, value):
        if not bare_seconds:
            raise _invalid(text, " (a bare number has no unit)", _BARE_HINT)
        seconds = int(value)
    else:
        seconds = _clock_seconds(value, text)
    if seconds is None:
        parts = _PART.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise _invalid(text)
        units = [unit for _, unit in parts]
        if len(set(units)) != len(units) or units != sorted(units, key="dhms".index):
            raise _invalid(text, " (units out of order)")
        seconds = sum(int(number) * _UNITS[unit] for number, unit in parts)
    if seconds <= 0:
        raise InvalidInput(f"duration {text!r} must be positive", hint=_HINT)
    if seconds > MAX_DURATION_SECONDS:
        raise InvalidInput(
            f"duration {text.strip()[:_MAX_TEXT]!r} is longer than 100 years", hint=_HINT
        )
    return seconds


def parse_moment(text: str, now: datetime, *, ago: bool) -> datetime:
    """The UTC time ``text`` names: an ISO time, or a duration before (``ago``) or after
    ``now``. Naive ISO times are the local time. Raises :class:`InvalidInput` for anything
    else and for times outside [:data:`MIN_MOMENT`, :data:`MAX_MOMENT`)."""
    value = text.strip()
    hint = "give an ISO time such as 2026-03-01T09:00 or a duration such as 2h or 3d"
    if len(value) > _MAX_TEXT:
        raise InvalidInput(f"invalid time {value[:_MAX_TEXT] + '…'!r}", hint=hint)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        try:
            delta = timedelta(seconds=parse_duration(value))
        except InvalidInput as exc:
            if re.fullmatch(r"[0-9:dhms-]+", value.lower()):
                raise  # a duration, but a refused one: its own message says why
            raise InvalidInput(
                f"{text!r} is neither an ISO time nor a duration", hint=hint
            ) from exc
        return (now - delta if ago else now + delta).astimezone(UTC)
    try:
        if moment.tzinfo is None:
            moment = moment.astimezone()  # a naive time is the user's local time
        moment = moment.astimezone(UTC)
    except (OverflowError, ValueError, OSError):
        moment = MIN_MOMENT - timedelta(days=1) if moment.year < 1970 else MAX_MOMENT
    if not MIN_MOMENT <= moment < MAX_MOMENT:
        raise InvalidInput(f"time {value!r} is out of range (1970-01-01 to 8999-12-31)", hint=hint)
    return moment


def format_duration(seconds: float | None) -> str:
    """``3725`` → ``1h2m5s``; sub-minute values keep one decimal; None → ``-``."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds % 1 else f"{int(seconds)}s"
    total = int(seconds)
    out = []
    for unit, size in _UNITS.items():
        count, total = divmod(total, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)
