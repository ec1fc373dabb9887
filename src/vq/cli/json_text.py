"""``json.dumps(value, indent=2)``, the same text about three times faster.

The standard library encodes indented JSON in pure Python (its C encoder only writes
compact text), one generator per container: for ``vq list --json`` over thousands of
jobs that re-encoding is most of the command's time. :func:`dumps_indented` walks the
value once and appends strings to one list, quoting with the C ``encode_basestring_ascii``
the standard encoder uses and caching each dict key's indented prefix.

Contract: for any value, the result equals ``json.dumps(value, indent=2)`` exactly, or the
same exception is raised. Values of exactly the JSON types (``dict`` with ``str`` keys,
``list``, ``tuple`` at the top or inside containers, ``str``, ``int``, ``float``, ``bool``,
``None``) take the fast path; anything else (subclasses such as enums, non-string keys,
unknown types, cycles) is handed to ``json.dumps`` itself. Stdlib only: the Click-free
``vq submit`` path imports :mod:`vq.cli.output`, and with it this module.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["dumps_indented"]

_INFINITY = float("inf")
_int_text = int.__repr__
_float_text = float.__repr__


class _NotPlainJson(Exception):
    """The value holds something only ``json.dumps`` knows how to treat."""


def _scalar(value: Any) -> str:
    """A bool, int or float as ``json.dumps`` writes it (other types: _NotPlainJson)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    kind = type(value)
    if kind is int:
        return _int_text(value)
    if kind is float:
        if math.isnan(value):
            return "NaN"
        if value == _INFINITY:
            return "Infinity"
        if value == -_INFINITY:
            return "-Infinity"
        return _float_text(value)
    raise _NotPlainJson


def _encode(value: Any, level: int, out: list[str], keys: dict[int, dict[str, str]]) -> None:
    append = out.append
    kind = type(value)
    if kind is dict:
        if not value:
            append("{}")
            return
        heads = keys.get(level)
        if heads is None:
            heads = keys[level] = {}
        separator = "{"
        for key, item in value.items():
            head = heads.get(key)
            if head is None:
                if type(key) is not str:
                    raise _NotPlainJson
                head = heads[key] = "\n" + "  " * (level + 1) + encode_basestring_ascii(key) + ": "
            append(separator)
            append(head)
            separator = ","
            item_kind = type(item)
            if item_kind is str:
                append(encode_basestring_ascii(item))
            elif item is None:
                append("null")
            elif item_kind is dict or item_kind is list or item_kind is tuple:
                _encode(item, level + 1, out, keys)
            else:
                append(_scalar(item))
        append("\n" + "  " * level + "}")
    elif kind is list or kind is tuple:
        if not value:
            append("[]")
            return
        inner = "\n" + "  " * (level + 1)
        separator = "[" + inner
        following = "," + inner
        for item in value:
            append(separator)
            separator = following
            item_kind = type(item)
            if item_kind is str:
                append(encode_basestring_ascii(item))
            elif item is None:
                append("null")
            elif item_kind is dict or item_kind is list or item_kind is tuple:
                _encode(item, level + 1, out, keys)
            else:
                append(_scalar(item))
        append("\n" + "  " * level + "]")
    elif kind is str:
        append(encode_basestring_ascii(value))
    elif value is None:
        append("null")
    else:
        append(_scalar(value))


def dumps_indented(value: Any) -> str:
    """Exactly ``json.dumps(value, indent=2)`` (see the module's contract)."""
    out: list[str] = []
    try:
        _encode(value, 0, out, {})
    except (_NotPlainJson, RecursionError):
        return json.dumps(value, indent=2)
    return "".join(out)
