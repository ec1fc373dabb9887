"""Parsing and formatting of durations such as ``2h30m``, ``90s``, ``1d`` or ``45``.

Pure and stdlib-only (the CLI imports it on the submit path).
"""

from __future__ import annotations

import re

from vq.errors import InvalidInput

__all__ = ["format_duration", "parse_duration"]

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"([0-9]+)([dhms])")
_HINT = "use a number of seconds or units d/h/m/s, for example 90s, 10m, 2h30m, 1d"


def parse_duration(text: str) -> int:
    """Seconds in ``text``. A bare integer is seconds; ``HH:MM:SS`` is accepted too.

    Raises :class:`InvalidInput` for anything else, for zero, and for negative values.
    """
    value = text.strip().lower()
    seconds: int
    if value.isascii() and value.isdigit():
        seconds = int(value)
    elif re.fullmatch(r"[0-9]+:[0-9]{1,2}:[0-9]{1,2}", value):
        hours, minutes, secs = (int(part) for part in value.split(":"))
        if minutes >= 60 or secs >= 60:
            raise InvalidInput(f"invalid duration {text!r}", hint=_HINT)
        seconds = hours * 3600 + minutes * 60 + secs
    else:
        parts = _PART.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value:
            raise InvalidInput(f"invalid duration {text!r}", hint=_HINT)
        units = [unit for _, unit in parts]
        if len(set(units)) != len(units) or units != sorted(units, key="dhms".index):
            raise InvalidInput(f"invalid duration {text!r} (units out of order)", hint=_HINT)
        seconds = sum(int(number) * _UNITS[unit] for number, unit in parts)
    if seconds <= 0:
        raise InvalidInput(f"duration {text!r} must be positive", hint=_HINT)
    return seconds


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
