"""Hostless per-job discovery (§2.2): which authority owns job ID?

:func:`discover` reads the durable listing (``vq list --json``: every spec, archived ones
included) of this queue and of every configured host not marked down, in parallel, one
SSH call each within the host's ``ssh_timeout``, and classifies the answer:

- exactly one authority lists the id → that authority (``"localhost"`` or a host name);
- several do → :class:`~vq.errors.Conflict` naming them (fails closed);
- none does, and every listing was read → :class:`~vq.errors.NotFound` (exit 3);
- none does, but a listing was unavailable or invalid → :class:`~vq.errors.HostUnavailable`
  (exit 13): an unread listing is no evidence that the job is not there.

A row carrying a ``scheduler_target`` must name a lane this configuration has, driven
by the authority that listed it (``scheduler_driver``; ``localhost`` for this queue): a
match on an unconfigured target fails closed (:class:`~vq.errors.Conflict`, naming the
authority, which an explicit ``vq VERB HOST ID`` still reaches). Lanes are not read
separately: a driver's listing holds all of its lanes' jobs and is read once.

A short id (a prefix of at least four characters, as every id argument accepts) is
matched against every listing the same way and must name exactly one job fleet-wide:
several different ids are :class:`~vq.errors.AmbiguousId` (exit 8) naming them with
their hosts, and since an unread listing could hold another match, a prefix found while a
listing was unavailable is refused (exit 13) rather than guessed. The caller then acts
with the full id (:meth:`Discovery.full_id`).

:func:`probe_listing` is the bounded, read-only check of one host's listing used before
acting on an unmarked remote default; it never carries the requested action.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from vq.domain.ids import is_job_id
from vq.errors import AmbiguousId, Conflict, HostUnavailable, NotFound, VqError
from vq.protocol.answers import ListAnswer
from vq.protocol.remote_answers import ListAnswer as RemoteListAnswer
from vq.remote.fleet import Fleet

__all__ = ["LOCAL", "Discovery", "discover", "probe_listing"]

LOCAL = "localhost"
_MAX_PARALLEL = 8

#: Reads this queue's listing ({"jobs": [...]}); injected so this module stays CLI-free.
LocalLister = Callable[[], ListAnswer]


@dataclass
class Discovery:
    """What a fleet-wide search found: who lists ``job_id`` (an id or a prefix)."""

    job_id: str
    #: the verb the search is for: its hints name the exact command (``vq VERB HOST ID``)
    verb: str = "status"
    owners: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # host → why
    #: owner → the full ids its listing holds that ``job_id`` names (a prefix may name more)
    matched: dict[str, list[str]] = field(default_factory=dict)
    #: owner → a matching row's scheduler_target that no configured lane of it names
    unconfigured: dict[str, str] = field(default_factory=dict)

    def full_id(self, owner: str) -> str:
        """The full id ``owner`` holds (``job_id`` itself when it was a full id)."""
        ids = self.matched.get(owner) or [self.job_id]
        return ids[0]

    def owner(self) -> str:
        """The unique owner, or the error the search amounts to."""
        distinct = sorted({i for ids in self.matched.values() for i in ids})
        if len(distinct) > 1:
            named = ", ".join(
                f"{i} on {name}" for name in self.owners for i in self.matched.get(name, [])
            )
            raise AmbiguousId(
                f"{self.job_id!r} is ambiguous: matches {named}",
                hint="give more characters of the id, or name the host "
                f"(vq {self.verb} HOST {self.job_id})",
            )
        if len(self.owners) > 1:
            names = ", ".join(self.owners)
            raise Conflict(
                f"job {self.job_id} exists on several hosts: {names}",
                hint=f"name the host: vq {self.verb} {self.owners[0]} {self.job_id}",
                reference="ambiguous-job",
            )
        if len(self.owners) == 1 and (is_job_id(self.job_id) or not self.unavailable):
            owner = self.owners[0]
            if owner in self.unconfigured:
                target = self.unconfigured[owner]
                raise Conflict(
                    f"job {self.full_id(owner)} on {owner} belongs to scheduler target "
                    f"{target!r}, which is not a configured lane of {owner}",
                    hint=f"add [hosts.{target}] with scheduler_driver = {owner!r}, or name "
                    f"the host: vq {self.verb} {owner} {self.full_id(owner)}",
                    reference="unconfigured-scheduler-target",
                )
            return owner
        if self.unavailable:
            names = ", ".join(sorted(self.unavailable))
            if self.owners:
                owner = self.owners[0]
                raise HostUnavailable(
                    f"{self.job_id!r} matches {self.full_id(owner)} on {owner}, but "
                    f"{names} could not be read and may hold another match",
                    hint=f"name the host: `vq {self.verb} {owner} {self.job_id}` (or give "
                    f"the full id {self.full_id(owner)})",
                )
            raise HostUnavailable(
                f"job {self.job_id} not found; {names} unavailable",
                hint="it may be on a host that could not be read: retry when "
                f"`vq hosts --probe` shows it ok, or name the host "
                f"(vq {self.verb} HOST {self.job_id})",
            )
        raise NotFound(
            f"unknown job id {self.job_id} (searched this queue and every configured host)",
            hint="check the id (vq queue --all)",
        )


def _matches(payload: Any, wanted: str) -> list[tuple[str, str | None]]:
    """(full id, scheduler_target) of the rows in a listing ``wanted`` (an id or a
    prefix) names."""
    if not isinstance(payload, dict) or not isinstance(payload.get("jobs"), list):
        raise ValueError("not a vq listing")
    out: dict[str, str | None] = {}
    for row in payload["jobs"]:
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            continue
        ident = row["id"]
        if ident == wanted or (not is_job_id(wanted) and ident.startswith(wanted)):
            target = row.get("scheduler_target")
            out[ident] = target if isinstance(target, str) and target else None
    return sorted(out.items())


def probe_listing(fleet: Fleet, name: str) -> ListAnswer:
    """One bounded read of ``name``'s listing; raises when it is unavailable or is not a
    valid listing (:class:`~vq.protocol.remote_answers.ListAnswer` checks each row's
    ``id`` and ``state``; the other fields are as that host sent them)."""
    return cast(ListAnswer, fleet.host(name).run_json(["list", "--json"], RemoteListAnswer))


def discover(
    fleet: Fleet,
    job_id: str,
    local: LocalLister | None,
    on_found: Callable[[str, str], None] | None = None,
    lanes: Mapping[str, str] | None = None,
    *,
    verb: str = "status",
    skip: str | None = None,
) -> Discovery:
    """Search this queue (when ``local`` is given) and every non-down host for ``job_id``
    (a full id or a prefix).

    ``on_found(name, full_id)`` is called as soon as one listing shows exactly one match,
    while slower listings are still being read (a read-only caller may start early).
    ``lanes`` maps each configured scheduler lane to its driver's authority name.
    ``verb`` is the verb the caller acts with (named in the errors' hints); ``skip`` an
    authority not to read (one already asked).
    """
    job_id = job_id.strip().lower()
    found = Discovery(job_id, verb)
    sources: dict[str, Callable[[], ListAnswer]] = {}
    if local is not None:
        sources[LOCAL] = local
    for name in fleet.live_names():
        sources[name] = lambda name=name: probe_listing(fleet, name)  # type: ignore[misc]
    sources.pop(skip or "", None)

    def read(name: str) -> tuple[str, list[tuple[str, str | None]] | None, str]:
        try:
            listed = _matches(sources[name](), job_id)
            if len(listed) == 1 and listed[0][1] is None and on_found is not None:
                on_found(name, listed[0][0])
            return name, listed, ""
        except VqError as exc:
            return name, None, exc.message
        except ValueError as exc:
            return name, None, str(exc)

    with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL, len(sources) or 1)) as pool:
        for name, listed, why in pool.map(read, list(sources)):
            if listed is None:
                found.unavailable[name] = why
            elif listed:
                found.owners.append(name)
                found.matched[name] = [ident for ident, _ in listed]
                for _, target in listed:
                    if target is not None and (lanes or {}).get(target) != name:
                        found.unconfigured[name] = target
    found.owners.sort(key=lambda n: (n != LOCAL, n))
    return found
