"""Who may act on a job in multi-user mode (§7.3): the one authorization helper.

``status``, ``logs``, ``events``, ``wait``, ``kill``, ``pause``, ``resume``, bulk
pause/resume, ``fetch`` and ``resubmit`` call :func:`authorize` with the job's trusted
owner (the numeric ``users/<uid>`` directory, else the spec's numeric ``submitter``).
Allowed: the owner's euid, root, and members of the admin group. A job with no owner vq
can establish (an old spec without a numeric submitter) is allowed. A denial is
:class:`PermissionDenied` (its own exit code) and says nothing about the job beyond its
id: no state, no ``paused_by``. Discovery (``vq list``, ``vq overview``) is not gated.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from vq.errors import PermissionDenied

__all__ = ["Caller", "authorize", "owner_of_submitter"]

_UID = re.compile(r"[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class Caller:
    """The acting process: its effective uid and every group it holds."""

    uid: int
    groups: frozenset[int]

    @classmethod
    def current(cls) -> Caller:
        return cls(os.geteuid(), frozenset({os.getegid(), *os.getgroups()}))


def owner_of_submitter(submitter: str | None) -> int | None:
    """The uid a spec's ``submitter`` names: a canonical decimal uid, else ``None``."""
    if submitter is None or not _UID.fullmatch(submitter):
        return None
    return int(submitter)


def authorize(caller: Caller, job_id: str, owner: int | None, admin_gid: int | None) -> None:
    """Return if ``caller`` may act on the job, else raise :class:`PermissionDenied`."""
    if owner is None or caller.uid in (0, owner):
        return
    if admin_gid is not None and admin_gid in caller.groups:
        return
    raise PermissionDenied(
        f"job {job_id}: permission denied",
        hint="only the job's submitter, root or the multi-user admin group may do this",
    )
