"""Slurm time limits in the canonical ``[days-]hours:minutes:seconds`` form (pure).

Canonical means: two-digit hours, minutes and seconds; hours below 24 when a day count is
given, minutes and seconds below 60. ``48:00:00`` is accepted (no day part), ``1-48:00:00``
is not. Zero and ``UNLIMITED``/``INFINITE`` are refused: a packed allocation always asks
for a finite time.
"""

from __future__ import annotations

import re

__all__ = ["TimeLimitError", "format_minutes", "parse_time_limit", "rounded_minutes"]

_CANONICAL = re.compile(r"(?:(\d{1,4})-)?(\d{2,3}):(\d{2}):(\d{2})")


class TimeLimitError(ValueError):
    """A time limit vq refuses; the message says why."""


def parse_time_limit(text: str) -> int:
    """Seconds of a canonical time limit; raises :class:`TimeLimitError` otherwise."""
    if text.strip().upper() in ("UNLIMITED", "INFINITE", "-1"):
        raise TimeLimitError("unlimited time is not allowed: give a finite [days-]hh:mm:ss")
    match = _CANONICAL.fullmatch(text)
    if match is None:
        raise TimeLimitError(f"{text!r} is not [days-]hours:minutes:seconds (e.g. 1-12:00:00)")
    days_text, hours_text, minutes_text, seconds_text = match.groups()
    days = int(days_text) if days_text is not None else 0
    hours, minutes, seconds = int(hours_text), int(minutes_text), int(seconds_text)
    if minutes >= 60 or seconds >= 60 or (days_text is not None and hours >= 24):
        raise TimeLimitError(
            f"{text!r} is not canonical: minutes and seconds below 60, hours below 24 "
            "when days are given"
        )
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total == 0:
        raise TimeLimitError("a zero time limit is not allowed")
    return total


def rounded_minutes(seconds: int) -> int:
    """Slurm's effective limit: whole minutes, rounded up once."""
    return -(-seconds // 60)


def format_minutes(minutes: int) -> str:
    """``minutes`` as Slurm's ``[days-]hh:mm:ss`` (the form passed to ``--time``)."""
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    clock = f"{hours:02d}:{mins:02d}:00"
    return f"{days}-{clock}" if days else clock
