"""Parsing of memory sizes a user types (``--mem 2G``, ``500M``). Pure, stdlib-only."""

from __future__ import annotations

import re

from vq.errors import InvalidInput

__all__ = ["MAX_MEM_MB", "parse_mem_mb"]

#: The largest memory limit vq accepts: 1 PiB, in MB.
MAX_MEM_MB = 1024**3
_SIZE = re.compile(r"([0-9]{1,16})(?:\.([0-9]{1,3}))?([kmgt]?)(?:i?b)?")
_FACTOR_KB = {"k": 1, "": 1024, "m": 1024, "g": 1024**2, "t": 1024**3}
_HINT = "use a size with a unit such as 500M, 2G or 1.5G (M = MiB; a bare number is MB)"


def parse_mem_mb(text: str) -> int:
    """Megabytes (MiB) in ``text``: ``500M``, ``2G``, ``1.5G``, ``2048K``, ``1T`` or a bare
    number of MB, rounded up to a whole MB. InvalidInput for anything else, for zero and for
    more than :data:`MAX_MEM_MB`."""
    value = text.strip().lower()
    match = _SIZE.fullmatch(value) if value.isascii() else None
    if match is None:
        raise InvalidInput(f"invalid memory size {text[:64]!r}", hint=_HINT)
    whole, fraction, unit = match.groups()
    kib_per_unit = _FACTOR_KB[unit]
    kib = int(whole) * kib_per_unit
    if fraction:
        kib += int(fraction) * kib_per_unit // 10 ** len(fraction)
    mb = -(-kib // 1024)
    if mb <= 0:
        raise InvalidInput(f"memory size {text!r} must be positive", hint=_HINT)
    if mb > MAX_MEM_MB:
        raise InvalidInput(f"memory size {text!r} is larger than 1 PiB", hint=_HINT)
    return mb
