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

from concurrent.futures import Future, ThreadPoolExecutor

from vq.cli.authorities import lane_drivers, local_listing
from vq.domain.ids import is_id_or_prefix
from vq.errors import HostUnavailable, VqError
from vq.remote.discovery import LOCAL, discover, probe_listing
from vq.remote.fleet import Fleet, load_fleet
from vq.transport.runner import RunResult

__all__ = ["run_hostless"]


def _on(owner: str, verb: str, rest: list[str]) -> int | list[str]:
    if owner == LOCAL:
        return [verb, *rest]
    from vq.cli.remote_verbs import run_remote

    return run_remote(verb, owner, rest)


def _with_id(rest: list[str], index: int, full_id: str) -> list[str]:
    return [*rest[:index], full_id, *rest[index + 1 :]]


def _status_anywhere(fleet: Fleet, job_id: str, rest: list[str], index: int) -> int | list[str]:
    """Discovery for ``vq status ID``; a host's status is read as soon as it lists the id.

    Only a read-only verb may start early: if the search ends ambiguous or elsewhere,
    the early answer is dropped unseen.
    """
    from vq.cli.remote_output import print_remote
    from vq.cli.remote_verbs import remote_words

    early: dict[str, tuple[str, list[str], Future[RunResult]]] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:

        def found(name: str, full_id: str) -> None:
            if name != LOCAL:
                words = remote_words("status", _with_id(rest, index, full_id))
                early[name] = (full_id, words, pool.submit(fleet.host(name).run, words))

        search = discover(
            fleet, job_id, local_listing, on_found=found, lanes=lane_drivers(), verb="status"
        )
        owner = search.owner()
        full_id = search.full_id(owner)
        if owner not in early or early[owner][0] != full_id:
            return _on(owner, "status", _with_id(rest, index, full_id))
        try:
            result = early[owner][2].result()
        except VqError:
            return _on(owner, "status", _with_id(rest, index, full_id))  # one honest retry
    return print_remote(fleet.host(owner), "status", early[owner][1], result)


def run_hostless(verb: str, rest: list[str], index: int | None) -> int | list[str] | None:
    """Route a hostless per-job verb (see the module docstring); None: run it locally."""
    if index is None:
        return None  # no job id (e.g. --all, --group): this queue
    job_id = rest[index]
    if not is_id_or_prefix(job_id):
        return None  # the local command refuses it with its usual message
    fleet = load_fleet()
    if verb == "status":
        if fleet.default_is_local and fleet.default_host is not None:
            return None
        return _status_anywhere(fleet, job_id, rest, index)
    default = fleet.remote_default
    if default is None:
        return None
    if fleet.hosts[default].down:
        search = discover(fleet, job_id, local_listing, lanes=lane_drivers(), verb=verb)
        owner = search.owner()
        return _on(owner, verb, _with_id(rest, index, search.full_id(owner)))
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
