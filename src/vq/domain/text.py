"""Text that crosses a boundary (argv, JSON bodies) must be real Unicode. Pure."""

from __future__ import annotations

from typing import Any

__all__ = ["refuse_surrogates"]


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
