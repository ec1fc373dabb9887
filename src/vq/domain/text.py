"""Text that crosses a boundary (argv, JSON bodies) must be real Unicode. Pure."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["escape_control_bytes", "escape_controls", "refuse_surrogates"]


def refuse_surrogates(data: Any, where: str = "") -> None:
    """Raise ValueError when any string in ``data`` (nested lists/dicts, keys too) holds a
    lone surrogate: such text cannot be written as UTF-8, so it is refused up front rather
    than failing when the spec is written."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            shown = f" in {where}" if where else ""
            raise ValueError(f"text{shown} is not valid UTF-8 (a lone surrogate)") from None
    elif isinstance(data, dict):
        for key, value in data.items():
            refuse_surrogates(key, where)
            refuse_surrogates(value, f"{where}.{key}".strip(".") if isinstance(key, str) else where)
    elif isinstance(data, (list, tuple)):
        for item in data:
            refuse_surrogates(item, where)


#: Characters shown escaped on a terminal: C0 and C1 controls, DEL, and the invisible
#: format characters that reorder or hide text (bidi overrides, zero-width marks).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")


def _escape_char(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with control and invisible formatting characters written as ``\\x1b`` /
    ``\\u202e``, so a name, an argv or a stderr tail cannot drive the terminal that shows
    it. Characters in ``keep`` (e.g. ``"\\n\\t"`` for a multi-line tail) pass through."""
    return _CONTROL.sub(lambda m: m[0] if m[0] in keep else _escape_char(m[0]), text)


def escape_control_bytes(data: bytes) -> bytes:
    """:func:`escape_controls` for raw output bytes (``vq logs`` on a terminal): C0 controls
    but newline and tab, DEL and UTF-8-encoded C1 controls become ``\\xNN`` text."""

    def one(match: re.Match[bytes]) -> bytes:
        raw = match[0]
        code = raw[-1] if len(raw) == 2 else raw[0]
        return f"\\x{code:02x}".encode()

    return _CONTROL_BYTES.sub(one, data)
