"""The parts a root daemon adds in multi-user mode (§2.4, §4.9, §7.1), built once at start.

:class:`MultiUser` carries the validated policy, the quota policy, the admin group and
the admin-token file; :func:`vq.daemon.compose.compose_daemon` uses it to route every
job to its owner's tree (:class:`~vq.paths.MultiUserLayout`), to hand each launch to the
privilege drop as that owner, to gate dispatch by quota and to guard the socket.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vq.config.multi_user import MultiUserSettings
from vq.domain.quotas import QuotaHold, QuotaPolicy
from vq.errors import PermissionDenied
from vq.paths import OwnerMap
from vq.services.admin_token import require_admin_token
from vq.store.specs import Quarantined

from .rpc import SocketAccess

__all__ = ["MultiUser", "OwnerQuotas", "owner_hold"]

#: Methods that would create a job as root: refused, since every job must be written to
#: its owner's tree by its owner (``vq submit`` as that user writes it there, or hands it
#: to the user's own submit socket, :mod:`vq.daemon.owner_submit`).
_OWNER_TREE_METHODS = frozenset({"submit", "resubmit"})


@dataclass
class OwnerQuotas:
    """The quota policy as dispatch applies it: whose each job is, and why a job waits.

    ``waiting`` (job id → ``quota: max_concurrent_cpus (2/2)``) is written by the
    dispatcher on the loop and read by status; one dict assignment per entry.
    """

    policy: QuotaPolicy
    owner_of: Callable[[str], int | None]
    waiting: dict[str, str] = field(default_factory=dict)

    def hold(self, job_id: str, cpus: int) -> QuotaHold | None:
        """Why the quota holds ``job_id`` (``cpus`` CPUs): it can never fit (whatever the
        last dispatch pass reached), or the last pass found its owner at the quota."""
        owner = self.owner_of(job_id)
        never = self.policy.never_fits(owner, cpus) if owner is not None else None
        if never is not None:
            return QuotaHold(never, never=True)
        waiting = self.waiting.get(job_id)
        return QuotaHold(waiting) if waiting is not None else None


def owner_hold(
    owners: OwnerMap, quarantined: Mapping[str, Quarantined], uid: int, job_id: str
) -> str | None:
    """Why the daemon holds ``uid``'s job ``job_id`` (the ``hold`` of that user's submit
    socket, so the owner's ``vq status`` can say it), or None. Another owner is never
    named: the caller learns only what concerns its own copy."""
    copies = owners.ambiguous.get(job_id)
    if copies is not None and uid in copies:
        return (
            "held: another owner's tree has a job with this id too, and the daemon recorded "
            "neither first, so no copy runs until only one is left (an administrator sees "
            "both in `vq list --json`)"
        )
    recorded = owners.get(job_id)
    if recorded is not None and recorded != uid and uid in owners.impostors.get(job_id, ()):
        return (
            "quarantined: this id belongs to another owner's job, which the daemon recorded "
            "first; this copy never runs"
        )
    item = quarantined.get(job_id) if recorded == uid else None
    return f"quarantined: {item.reason}" if item is not None else None


@dataclass(frozen=True)
class MultiUser:
    """What a multi-user root daemon runs with."""

    policy: MultiUserSettings
    quotas: QuotaPolicy
    admin_gid: int
    token_path: Path

    def socket_access(self) -> SocketAccess:
        """``daemon.sock`` as ``root:<admin group>`` 0660; writes need the admin token."""
        token_path = self.token_path

        def guard(method: str, params: dict[str, Any]) -> None:
            if method in _OWNER_TREE_METHODS:
                raise PermissionDenied(
                    f"{method} is not served by the multi-user daemon: a job is written to "
                    "its submitter's own tree",
                    hint="run `vq submit` as the user the job belongs to",
                )
            require_admin_token(method, params, token_path)  # drops a token sent with a read

        return SocketAccess(self.admin_gid, guard)
