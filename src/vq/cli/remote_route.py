"""Which queue a command line targets: this one, a named ``[hosts.NAME]``, or discovery.

``vq VERB HOST …`` names a host by its first positional word, when that word is a
configured host name (``localhost``/``local`` mean this queue and are dropped). The
check reads only the TOML files, so a command line without a host costs one small file
read. :func:`route` returns an exit status when the command was handled remotely, a new
argument list to run locally, or None to run the command line unchanged. The root
group's own options before the verb (``vq --debug VERB …``, :func:`global_count`) change
nothing about where the verb goes.
"""

from __future__ import annotations

import os

from vq.cli.host_words import HOST_VERBS, first_positional

__all__ = ["GLOBAL_FLAGS", "global_count", "route"]

#: The root group's flags that may come before the verb (``vq --debug submit …``).
GLOBAL_FLAGS = frozenset({"--debug"})


def _by_host(rest: list[str]) -> bool:
    return "--by=host" in rest or any(
        word == "--by" and rest[i + 1 : i + 2] == ["host"] for i, word in enumerate(rest)
    )


def _without_by(rest: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for word in rest:
        if skip:
            skip = False
        elif word == "--by":
            skip = True
        elif not word.startswith("--by="):
            out.append(word)
    return out


def _lane_route(verb: str, word: str, rest: list[str]) -> int | list[str] | None:
    """``vq submit LANE …`` for a scheduler lane this queue drives: a local submit with
    ``--scheduler-target LANE``. A lane whose ``scheduler_driver`` is another configured
    host is delegated: ``vq submit --scheduler-target LANE …`` runs on that host's queue
    over SSH (the source packed and sent as for ``vq submit HOST``), which must drive the
    lane itself. Any other verb naming a lane is refused (the lane's jobs are in the
    driver's queue: use the job id alone)."""
    from vq.config.host_names import configured_lanes, configured_names, is_local_name

    lanes = configured_lanes()
    if word not in lanes:
        return None
    from vq.errors import UsageError

    if verb != "submit":
        raise UsageError(
            f"{word} is a scheduler lane, not a vq host",
            hint=f"its jobs are in this queue: `vq {verb} ID` without the lane name",
        )
    driver = lanes[word]
    if is_local_name(driver):
        return ["submit", "--scheduler-target", word, *rest]
    if driver not in configured_names() or driver in lanes:
        raise UsageError(
            f"scheduler lane {word} is driven by {driver!r}, which is not a configured vq host",
            hint=f'add [hosts.{driver}] (its ssh), or set scheduler_driver = "localhost"',
        )
    from vq.cli.remote_verbs import run_remote

    return run_remote("submit", driver, ["--scheduler-target", word, *rest])


def global_count(args: list[str]) -> int:
    """How many of ``args``' first words are the root group's flags (:data:`GLOBAL_FLAGS`)."""
    count = 0
    while count < len(args) and args[count] in GLOBAL_FLAGS:
        count += 1
    return count


def route(args: list[str]) -> int | list[str] | None:
    """Handle ``args`` remotely (an exit status), rewrite them (a list), or leave them;
    the root group's flags before the verb are kept in front of a rewritten list."""
    lead = global_count(args)
    routed = _route(args[lead:])
    if isinstance(routed, list):
        return [*args[:lead], *routed]
    return routed


def _route(args: list[str]) -> int | list[str] | None:
    if not args or (args[0] not in HOST_VERBS and args[0] != "submit"):
        return None
    verb, rest = args[0], args[1:]
    index = first_positional(verb, rest)
    word = rest[index] if index is not None else None
    wants_all = verb in ("queue", "list", "overview") and "--all" in rest
    if verb == "usage" and _by_host(rest):
        from vq.cli.remote_fleet import run_usage_by_host

        return run_usage_by_host(_without_by(rest))
    from vq.config.host_names import configured_names

    names = configured_names()
    if word is not None and index is not None:
        from vq.config.host_names import is_local_name

        lane = _lane_route(verb, word, rest[:index] + rest[index + 1 :])
        if lane is not None:
            return lane
        if word in names:
            from vq.cli.remote_verbs import run_remote

            return run_remote(verb, word, rest[:index] + rest[index + 1 :])
        if is_local_name(word) and not (verb in ("submit", "fetch") and os.path.lexists(word)):
            return [verb, *rest[:index], *rest[index + 1 :]]
    if wants_all:
        from vq.cli.remote_fleet import run_fleet

        return run_fleet(verb, [w for w in rest if w != "--all"])
    if names and verb not in ("submit", "queue", "list", "top", "overview", "usage"):
        from vq.cli.remote_discover import run_hostless

        return run_hostless(verb, rest, index)
    return None
