"""Array index expressions: ``0-99``, ``1,5,7-9``, ``0-10:2``. Pure, stdlib-only."""

from __future__ import annotations

import re

from vq.errors import InvalidInput

__all__ = ["MAX_ARRAY_SIZE", "parse_array"]

MAX_ARRAY_SIZE = 100_000
_PART = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?")
_HINT = "use indices and ranges such as 0-99, 1,5,7-9 or 0-20:2 (start-end:step)"


def parse_array(text: str) -> list[int]:
    """The indices of ``text`` in the order given; ranges are inclusive; no repeats."""
    indices: list[int] = []
    for part in text.replace(" ", "").split(","):
        match = _PART.fullmatch(part)
        if not match:
            raise InvalidInput(f"invalid array expression {text!r}", hint=_HINT)
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        step = int(match.group(3)) if match.group(3) is not None else 1
        if end < start or step < 1:
            raise InvalidInput(f"invalid range {part!r} in {text!r}", hint=_HINT)
        if (end - start) // step + 1 + len(indices) > MAX_ARRAY_SIZE:
            raise InvalidInput(f"arrays are limited to {MAX_ARRAY_SIZE} elements")
        indices.extend(range(start, end + 1, step))
    if len(set(indices)) != len(indices):
        raise InvalidInput(f"array expression {text!r} repeats an index", hint=_HINT)
    return indices
