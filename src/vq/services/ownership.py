"""Who may act on a job in multi-user mode (§7.3): the one authorization helper.

``status``, ``logs``, ``events``, ``wait``, ``kill``, ``pause``, ``resume``, bulk
pause/resume, ``fetch`` (and the tar emitter behind ``vq fetch HOST``) and ``resubmit``
call it, each on its own: it is not middleware. :func:`authorize` takes the job's trusted
owner (the numeric ``users/<uid>`` directory the spec was read from, else the spec's
numeric ``submitter``). Allowed: the owner's euid, root, and members of the admin group.
A job with no owner vq can establish (an old spec without a numeric submitter) is
allowed. A denial is :class:`PermissionDenied` (its own exit code) and says nothing about
the job beyond its id: no state, no ``paused_by``. Discovery (``vq list``,
``vq overview``) is not gated.

:class:`OwnerCheck` binds the rule to one process and the tree it reads: a CLI builds
one from the validated system policy (:func:`owner_check_for`); in single-user mode
there is none and every check is a no-op. Pause, resume and kill apply it again inside
the spec's lock, before the job's state is classified (:mod:`vq.services.lifecycle`).
"""

from __future__ import annotations

import grp
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vq.errors import NotFound, PermissionDenied

if TYPE_CHECKING:
    from vq.domain.spec import JobSpec

__all__ = ["Caller", "OwnerCheck", "admin_gid_of", "authorize", "owner_of_submitter"]

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


def admin_gid_of(group: str) -> int | None:
    """The gid of the configured admin group; None (nobody bypasses) when no such group."""
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        return None


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


@dataclass(frozen=True)
class OwnerCheck:
    """The helper bound to one process (``caller``) and the tree it reads.

    ``tree_owner`` is the uid of the ``users/<uid>`` tree every spec is read from (a
    user's CLI), or None when the specs come from every tree (root's CLI): then each
    job's owner is its numeric ``submitter``.
    """

    caller: Caller
    admin_gid: int | None
    tree_owner: int | None
    #: the owner named with ``--uid`` when the specs come from every tree: another
    #: owner's job is then not found
    selected: int | None = None

    def before_reading(self, job_id: str) -> None:
        """Refuse before anything of the job is read when the tree is not the caller's."""
        if self.tree_owner is not None:
            authorize(self.caller, job_id, self.tree_owner, self.admin_gid)

    def __call__(self, spec: JobSpec) -> None:
        """Refuse ``spec`` unless the caller may act on it."""
        owner = self.tree_owner
        if owner is None:
            owner = owner_of_submitter(spec.submitter)
            if self.selected is not None and owner != self.selected:
                raise NotFound(
                    f"no job {spec.id} of uid {self.selected}",
                    hint="`vq list --uid UID` shows that owner's jobs",
                )
        authorize(self.caller, spec.id, owner, self.admin_gid)
