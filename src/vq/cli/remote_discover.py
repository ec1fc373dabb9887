"""Hostless per-job verbs when remote hosts are configured (§2.2).

``vq status ID``: unless ``default_host`` is explicitly this queue (then it goes direct),
every non-down authority is searched (:func:`vq.remote.discovery.discover`) and the
verb runs on the unique owner.

Every other per-job verb (``logs``, ``events``, ``kill``, ``pause``, ``resume``, ``wait``,
``fetch``):

- default unset or ``localhost``: direct, on this queue, no fan-out;
- default marked ``down = true``: fleet-wide discovery, then the verb on the owner;
- any other remote default: one bounded, read-only probe of its listing; a trusted
  listing (job found or not) sends the verb there, an unavailable or invalid one is
  refused (:class:`~vq.errors.HostUnavailable`) naming the inferred default. The probe
  never carries the requested action.
"""

from __future__ import annotations

from typing import Any

from vq.errors import HostUnavailable, VqError
from vq.remote.discovery import LOCAL, discover, probe_listing
from vq.remote.fleet import load_fleet

__all__ = ["run_hostless"]


def _local_listing() -> dict[str, Any]:
    from vq.cli.inspect import list_rows

    params: dict[str, Any] = {"states": [], "tags": [], "name": None, "since": None, "group": None}
    return list_rows(params)


def _on(owner: str, verb: str, rest: list[str]) -> int | list[str]:
    if owner == LOCAL:
        return [verb, *rest]
    from vq.cli.remote_verbs import run_remote

    return run_remote(verb, owner, rest)


def run_hostless(verb: str, rest: list[str], index: int | None) -> int | list[str] | None:
    """Route a hostless per-job verb (see the module docstring); None: run it locally."""
    if index is None:
        return None  # no job id (e.g. --all, --group): this queue
    job_id = rest[index]
    fleet = load_fleet()
    if verb == "status":
        if fleet.default_is_local and fleet.default_host is not None:
            return None
        return _on(discover(fleet, job_id, _local_listing).owner(), verb, rest)
    default = fleet.remote_default
    if default is None:
        return None
    if fleet.hosts[default].down:
        return _on(discover(fleet, job_id, _local_listing).owner(), verb, rest)
    try:
        probe_listing(fleet, default)
    except VqError as exc:
        raise HostUnavailable(
            f"the default host {default} could not be checked before `vq {verb} {job_id}` "
            f"({exc.message}); nothing was done",
            hint=f"name the host explicitly: vq {verb} HOST {job_id} "
            f"(or vq {verb} localhost {job_id})",
        ) from exc
    return _on(default, verb, rest)
