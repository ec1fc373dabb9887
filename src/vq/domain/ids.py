"""Job identifiers: 12 lowercase hex characters, drawn from injected randomness."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from vq.errors import AmbiguousId, InvalidInput, NotFound

__all__ = [
    "JOB_ID_LENGTH",
    "MIN_PREFIX",
    "is_id_or_prefix",
    "is_job_id",
    "new_job_id",
    "resolve_prefix",
]

JOB_ID_LENGTH = 12
#: The shortest prefix accepted for a job id (like git's short hashes).
MIN_PREFIX = 4
_ID = re.compile(r"[0-9a-f]{12}")
_PREFIX = re.compile(rf"[0-9a-f]{{{MIN_PREFIX},12}}")
#: At most this many candidates are named in an "ambiguous" message.
_NAMED = 5


def is_job_id(text: str) -> bool:
    """Whether ``text`` is a well-formed job id (and so a safe path component)."""
    return bool(_ID.fullmatch(text))


def is_id_or_prefix(text: str) -> bool:
    """Whether ``text`` is a job id or a prefix :func:`resolve_prefix` would look up."""
    return bool(_PREFIX.fullmatch(text.strip().lower()))


def new_job_id(random_bytes: Callable[[int], bytes], taken: Callable[[str], bool]) -> str:
    """A fresh id not yet ``taken``. ``random_bytes`` is e.g. ``os.urandom``.

    Collisions among 2**48 ids are rare, but the check makes them impossible for ids this
    queue already holds; the caller's exclusive create closes the remaining race.
    """
    for _ in range(64):
        candidate = random_bytes(JOB_ID_LENGTH // 2).hex()
        if not taken(candidate):
            return candidate
    raise RuntimeError("could not draw an unused job id in 64 attempts")


def resolve_prefix(text: str, ids: Iterable[str], *, what: str = "job id") -> str:
    """The one id among ``ids`` that ``text`` names: itself, or a unique prefix of at least
    :data:`MIN_PREFIX` characters (case-insensitive).

    A full id is returned as is even when ``ids`` does not hold it (the caller reports an
    unknown job as usual). Raises InvalidInput for text that cannot be an id or prefix,
    NotFound when no id starts with it, AmbiguousId (naming the matches) for several.
    ``what`` names the kind of id in those messages ("group id" for array and chain
    groups, whose ids are drawn from the same space).
    """
    wanted = text.strip().lower()
    if is_job_id(wanted):
        return wanted
    if not _PREFIX.fullmatch(wanted):
        raise InvalidInput(
            f"{text!r} is not a {what}",
            hint=f"{what}s are 12 lowercase hex characters (any unique prefix of at least "
            f"{MIN_PREFIX} will do), as `vq list` shows them",
        )
    matches = sorted(i for i in ids if i.startswith(wanted))
    if not matches:
        raise NotFound(f"no {what} starts with {wanted!r}", hint=f"`vq list` shows the {what}s")
    if len(matches) > 1:
        named = ", ".join(matches[:_NAMED]) + (" …" if len(matches) > _NAMED else "")
        raise AmbiguousId(
            f"{wanted!r} is ambiguous: matches {named}",
            hint="give more characters of the id",
        )
    return matches[0]
