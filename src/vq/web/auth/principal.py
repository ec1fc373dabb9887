"""Who is asking, as one immutable value (pure: no I/O).

Kinds and their powers:

* ``anonymous`` — nobody authenticated; may read only while no console account exists.
* ``session`` — a console account signed in with a cookie; its role decides.
* ``admin_token`` — the shared bearer token; admin-equivalent (§7.2).
* ``scoped_token`` — an agent token (§10.4); exactly its scopes, within its limits.

Needs: ``read`` (GET job data), ``control`` (kill, pause, resume, resubmit, drain,
cleanup), ``submit`` (POST /api/v1/jobs, uploads), ``admin`` (audit view).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["NEEDS", "ROLES", "Need", "Principal", "Role"]

Role = Literal["viewer", "operator", "admin"]
Need = Literal["read", "control", "submit", "admin"]
ROLES: tuple[Role, ...] = ("viewer", "operator", "admin")
NEEDS: tuple[Need, ...] = ("read", "control", "submit", "admin")

_ROLE_GRANTS: dict[str, frozenset[str]] = {
    "viewer": frozenset({"read"}),
    "operator": frozenset({"read", "control", "submit"}),
    "admin": frozenset({"read", "control", "submit", "admin"}),
}


@dataclass(frozen=True)
class Principal:
    kind: Literal["anonymous", "session", "admin_token", "scoped_token"]
    #: Display name: the account, the scoped token's name, "admin-token" or "anonymous".
    name: str
    role: Role | None = None
    #: For scoped tokens: the granted needs. For others derived from ``role``.
    scopes: frozenset[str] = field(default_factory=frozenset)
    #: Scoped tokens only: id of the token record (for quota accounting).
    token_id: str | None = None
    #: Scoped tokens only: allowed profiles / programs (empty = any).
    profiles: frozenset[str] = field(default_factory=frozenset)
    programs: frozenset[str] = field(default_factory=frozenset)
    #: Sessions only: the session id (the CSRF token is derived from it).
    session_id: str | None = None

    def grants(self) -> frozenset[str]:
        if self.kind == "scoped_token":
            return self.scopes
        if self.role is None:
            return frozenset()
        return _ROLE_GRANTS[self.role]

    def can(self, need: Need) -> bool:
        return need in self.grants()
