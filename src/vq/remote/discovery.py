"""Hostless per-job discovery (§2.2): which authority owns job ID?

:func:`discover` reads the durable listing (``vq list --json``: every spec, archived ones
included) of this queue and of every configured host not marked down, in parallel, one
SSH call each within the host's ``ssh_timeout``, and classifies the answer:

- exactly one authority lists the id → that authority (``"localhost"`` or a host name);
- several do → :class:`~vq.errors.Conflict` naming them (fails closed);
- none does, and every listing was read → :class:`~vq.errors.NotFound` (exit 3);
- none does, but a listing was unavailable or invalid → :class:`~vq.errors.HostUnavailable`
  (exit 13): an unread listing is no evidence that the job is not there.

:func:`probe_listing` is the bounded, read-only check of one host's listing used before
acting on an unmarked remote default; it never carries the requested action.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from vq.errors import Conflict, HostUnavailable, NotFound, VqError
from vq.remote.fleet import Fleet

__all__ = ["LOCAL", "Discovery", "discover", "probe_listing"]

LOCAL = "localhost"
_MAX_PARALLEL = 8

#: Reads this queue's listing ({"jobs": [...]}); injected so this module stays CLI-free.
LocalLister = Callable[[], dict[str, Any]]


@dataclass
class Discovery:
    """What a fleet-wide search found."""

    job_id: str
    owners: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)  # host → why

    def owner(self) -> str:
        """The unique owner, or the error the search amounts to."""
        if len(self.owners) == 1:
            return self.owners[0]
        if len(self.owners) > 1:
            names = ", ".join(self.owners)
            raise Conflict(
                f"job {self.job_id} exists on several hosts: {names}",
                hint=f"name the host: vq status {self.owners[0]} {self.job_id}",
                reference="ambiguous-job",
            )
        if self.unavailable:
            names = ", ".join(sorted(self.unavailable))
            raise HostUnavailable(
                f"job {self.job_id} not found; {names} unavailable",
                hint="it may be on a host that could not be read: retry when "
                f"`vq hosts --probe` shows it ok, or name the host (vq status HOST {self.job_id})",
            )
        raise NotFound(
            f"unknown job id {self.job_id} (searched this queue and every configured host)",
            hint="check the id (vq queue --all)",
        )


def _lists(payload: Any, job_id: str) -> bool:
    if not isinstance(payload, dict) or not isinstance(payload.get("jobs"), list):
        raise ValueError("not a vq listing")
    return any(isinstance(row, dict) and row.get("id") == job_id for row in payload["jobs"])


def probe_listing(fleet: Fleet, name: str) -> dict[str, Any]:
    """One bounded read of ``name``'s listing; raises when it is unavailable or invalid."""
    payload = fleet.host(name).run_json(["list", "--json"])
    if not isinstance(payload, dict) or not isinstance(payload.get("jobs"), list):
        raise HostUnavailable(f"host {name} did not return a vq listing")
    return payload


def discover(
    fleet: Fleet,
    job_id: str,
    local: LocalLister | None,
    on_found: Callable[[str], None] | None = None,
) -> Discovery:
    """Search this queue (when ``local`` is given) and every non-down host for ``job_id``.

    ``on_found(name)`` is called as soon as one listing shows the id, while slower
    listings are still being read (a read-only caller may start its own call early).
    """
    found = Discovery(job_id)
    sources: dict[str, Callable[[], dict[str, Any]]] = {}
    if local is not None:
        sources[LOCAL] = local
    for name in fleet.live_names():
        sources[name] = lambda name=name: probe_listing(fleet, name)  # type: ignore[misc]

    def read(name: str) -> tuple[str, bool | None, str]:
        try:
            listed = _lists(sources[name](), job_id)
            if listed and on_found is not None:
                on_found(name)
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
    found.owners.sort(key=lambda n: (n != LOCAL, n))
    return found
