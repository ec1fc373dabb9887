"""Job identifiers: 12 lowercase hex characters, drawn from injected randomness."""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["JOB_ID_LENGTH", "is_job_id", "new_job_id"]

JOB_ID_LENGTH = 12
_ID = re.compile(r"[0-9a-f]{12}")


def is_job_id(text: str) -> bool:
    """Whether ``text`` is a well-formed job id (and so a safe path component)."""
    return bool(_ID.fullmatch(text))


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
