"""The one rule for a job name, whatever path sets it (submit, resubmit, the API).

A job name is shown on terminals and pages and may become part of file names (output
stems), so it is 1-128 characters of printable text: no ``/``, no control or format
characters (terminal escapes, bidi overrides), no lone surrogates, not ``.`` or ``..``.
Pure, stdlib-only.
"""

from __future__ import annotations

import unicodedata

from vq.errors import InvalidInput

__all__ = ["MAX_JOB_NAME", "check_job_name", "name_problem"]

MAX_JOB_NAME = 128
#: Unicode categories refused anywhere in a name: controls, format characters (bidi
#: overrides, zero-width), surrogates, private use, unassigned, line/paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def name_problem(value: str) -> str | None:
    """Why ``value`` is not a valid job name, or None when it is."""
    if not value:
        return "a job name cannot be empty"
    if len(value) > MAX_JOB_NAME:
        return f"a job name is at most {MAX_JOB_NAME} characters"
    if value in {".", ".."} or "/" in value:
        return "a job name cannot contain '/' or be . or .."
    if any(unicodedata.category(c) in _REFUSED_CATEGORIES for c in value):
        return "a job name cannot contain control or invisible formatting characters"
    return None


def check_job_name(value: str | None) -> str | None:
    """``value`` when it is a valid job name (or None); InvalidInput otherwise."""
    if value is None:
        return None
    problem = name_problem(value)
    if problem is not None:
        raise InvalidInput(
            f"job name {value[:40].encode('ascii', 'backslashreplace').decode()!r}: {problem}",
            hint="use letters, digits, spaces and punctuation other than '/'",
        )
    return value
