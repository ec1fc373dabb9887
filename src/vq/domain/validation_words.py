"""One validation problem in vq's words, whatever model found it.

vq validates config files, job specs, RPC parameters, API bodies, campaign files and packing
documents with pydantic models. Users must never read the library's wording ("Input should be
a valid integer, unable to parse string as an integer", "Value error, ...", links to its
documentation): every place that reports a ``ValidationError`` turns its problems into a
sentence here, so the words are the same in the CLI, the daemon's answers and the web API.

Contract: :func:`describe` is pure and total. It returns a short predicate to follow a field's
name ("must be a whole number", "is required", "must be at least 1"); a validator's own message
(``ValueError``/``AssertionError`` raised inside a model) is returned as written, without the
library's prefix. The offending value is never quoted back (it may be a secret).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

#: Prefixes the library puts before a validator's own words.
LIBRARY_PREFIXES = ("Value error, ", "Assertion failed, ")


@dataclass(frozen=True)
class Vocabulary:
    """How a surface names its parts: config files have keys and tables, JSON fields and objects."""

    unknown: str = "unknown key"
    mapping: str = "a table"
    sequence: str = "a list"


CONFIG_WORDS = Vocabulary()
JSON_WORDS = Vocabulary(unknown="unknown field", mapping="an object", sequence="an array")

_FIXED = {
    "missing": "is required",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "int_parsing_size": "is too large a number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be text",
    "string_unicode": "must be valid text",
    "bytes_type": "must be text",
    "none_required": "must be empty",
    "json_invalid": "is not valid JSON",
    "json_type": "must be JSON text",
    "string_pattern_mismatch": "is not in the expected form",
    "datetime_parsing": "must be a date and time (ISO 8601)",
    "datetime_type": "must be a date and time (ISO 8601)",
    "date_parsing": "must be a date (YYYY-MM-DD)",
    "url_parsing": "must be a URL",
    "url_scheme": "uses a URL scheme that is not allowed",
    "frozen_instance": "cannot be changed",
    "frozen_field": "cannot be changed",
}


def describe(error: Mapping[str, Any], words: Vocabulary = CONFIG_WORDS) -> str:
    """What is wrong with one field, as a predicate (see the module's contract)."""
    kind = str(error.get("type", ""))
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    if kind in ("value_error", "assertion_error"):
        cause = ctx.get("error")
        if cause is not None and str(cause):
            return str(cause)
    if kind == "extra_forbidden":
        return words.unknown
    if kind == "int_type" and isinstance(error.get("input"), bool):
        return "must be a whole number, not true or false"
    if kind in ("dict_type", "model_type", "model_attributes_type", "mapping_type"):
        return f"must be {words.mapping}"
    if kind in ("list_type", "tuple_type", "set_type", "iterable_type"):
        return f"must be {words.sequence}"
    if kind in _FIXED:
        return _FIXED[kind]
    bound = _bound(kind, ctx)
    if bound is not None:
        return bound
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected', 'the allowed values')}"
    return _strip(str(error.get("msg", "is not valid")))


def _bound(kind: str, ctx: Mapping[str, Any]) -> str | None:
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind == "less_than":
        return f"must be less than {ctx.get('lt')}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}"
    if kind == "string_too_short":
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must be at least {least} characters"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    if kind == "too_short":
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must have at least {least} entries"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} entries"
    return None


def _strip(message: str) -> str:
    for prefix in LIBRARY_PREFIXES:
        message = message.removeprefix(prefix)
    return message


def where(loc: Sequence[Any], default: str) -> str:
    """A problem's location as dotted key names (``daemon.max_jobs``), ``default`` at the top."""
    return ".".join(str(part) for part in loc) or default


def first_problem(
    exc: ValidationError, default: str, words: Vocabulary = CONFIG_WORDS
) -> tuple[str, str]:
    """The first problem of ``exc`` as (dotted location, predicate)."""
    first = exc.errors(include_url=False)[0]
    return where(first["loc"], default), describe(first, words)
