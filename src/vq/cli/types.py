"""Click parameter types for numbers a user types: ASCII digits only, finite, bounded.

Python's ``int()`` and ``float()`` accept other scripts' digits (``١``), ``nan`` and
``inf``; vq's numbers are refused unless written in ASCII, so what a user sees is what
the queue records.
"""

from __future__ import annotations

import math
import re
from typing import Any

import click

__all__ = ["AsciiFloatRange", "AsciiIntRange"]


class AsciiIntRange(click.IntRange):
    """:class:`click.IntRange` that refuses non-ASCII digits."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip().isascii():
            self.fail(f"{value!r} is not a number written in ASCII digits (0-9)", param, ctx)
        if isinstance(value, str):
            text = value.strip()
            try:
                int(text)
            except ValueError:
                message = f"{value!r} is not a whole number"
                if param is not None and param.name == "mem_mb" and _SIZE.fullmatch(text):
                    message += f" of megabytes; for a size with a unit use --mem {text}"
                self.fail(message, param, ctx)
        return super().convert(value, param, ctx)


#: A size with a unit, as ``--mem`` takes it (``2G``, ``500M``, ``1.5GiB``).
_SIZE = re.compile(r"[0-9]+(?:\.[0-9]+)?\s*[KMGTkmgt](?:i?[Bb])?")


class AsciiFloatRange(click.FloatRange):
    """:class:`click.FloatRange` that refuses non-ASCII digits, NaN and infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip().isascii():
            self.fail(f"{value!r} is not a number written in ASCII digits (0-9)", param, ctx)
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number
