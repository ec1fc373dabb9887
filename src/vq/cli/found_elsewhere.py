"""Where else a job is: the hint for an id the queue asked does not hold (§2.2).

When ``vq VERB [HOST] ID`` finds no job ``ID`` (a full id or a prefix) on the queue it
asked — this one, or a named host — :func:`hint_elsewhere` looks for it on every other
configured authority and answers the hint naming the exact command, e.g.
``found on h2: `vq logs h2 7009```. The look is read-only and bounded: the durable
listings (``vq list --json``) of this queue and of every host not marked down and not
already asked, read in parallel, each within its host's ``ssh_timeout``
(:func:`vq.remote.discovery.discover`). A host that cannot be read is simply not named:
the original "not found" stands, never replaced by an error about another host.
"""

from __future__ import annotations

from vq.errors import VqError

__all__ = ["PER_JOB_VERBS", "hint_elsewhere", "with_elsewhere"]

#: The verbs whose first positional word is one job's id (or prefix): the ones to hint for.
PER_JOB_VERBS = frozenset({"status", "events", "logs", "kill", "pause", "resume", "wait", "fetch"})


def _command(verb: str, owner: str, job_id: str) -> str:
    return f"`vq {verb} {owner} {job_id}`"


def hint_elsewhere(verb: str, job_id: str, asked: str) -> str | None:
    """``found on OWNER: `vq VERB OWNER ID``` for each other authority that lists
    ``job_id`` (``asked``: the authority already asked, ``localhost`` for this queue);
    None when no other authority is configured or none lists it."""
    from vq.config.host_names import configured_names

    if not configured_names():
        return None
    from vq.cli.authorities import lane_drivers, local_listing
    from vq.remote.discovery import LOCAL, discover
    from vq.remote.fleet import load_fleet

    try:
        fleet = load_fleet()
        local = local_listing if asked != LOCAL else None
        search = discover(fleet, job_id, local, lanes=lane_drivers(), verb=verb, skip=asked)
    except VqError:
        return None  # the look is a courtesy: its failure never changes the answer
    wanted = job_id.strip().lower()
    found: list[str] = []
    for owner in search.owners:
        ids = search.matched.get(owner, [])
        named = [wanted] if len(ids) == 1 else ids
        found += [f"found on {owner}: {_command(verb, owner, i)}" for i in named]
    return "; ".join(found) or None


def with_elsewhere(exc: VqError, verb: str, job_id: str, asked: str) -> VqError:
    """``exc`` (a not-found answer) with :func:`hint_elsewhere`'s hint in front of its own."""
    hint = hint_elsewhere(verb, job_id, asked)
    if hint is not None:
        exc.hint = hint if not exc.hint else f"{hint} ({exc.hint})"
    return exc
