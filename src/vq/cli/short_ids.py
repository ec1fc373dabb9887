"""Short job ids for the CLI, Click-free (the ``vq submit`` fast path resolves ``--after``).

A full id is used as is; a prefix of at least 4 characters is resolved against the spec
files of this shell's state root (a directory listing, no spec is read) by
:func:`vq.domain.ids.resolve_prefix`.
"""

from __future__ import annotations

import os

from vq.config import roots
from vq.domain.ids import is_job_id, resolve_prefix

__all__ = ["known_ids", "resolve_job_id"]

_SUFFIX = ".json"


def known_ids(state_root: str | None = None) -> list[str]:
    """Ids of every spec file in the queue directory (names only)."""
    root = state_root if state_root is not None else roots.state_root(os.environ)
    try:
        names = os.listdir(os.path.join(root, "queue"))
    except OSError:
        return []
    return [n[: -len(_SUFFIX)] for n in names if n.endswith(_SUFFIX) and is_job_id(n[:-5])]


def resolve_job_id(text: str) -> str:
    """The full id ``text`` names (itself when it is one: no directory listing)."""
    if is_job_id(text):
        return text
    return resolve_prefix(text, known_ids())
