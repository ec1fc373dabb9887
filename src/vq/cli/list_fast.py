"""``vq list --json`` / ``vq queue --json`` (optionally ``--state S`` …) without Click.

A script polling its queue repeats this read; Click and the gateway cost more to import
than the daemon takes to answer. So ``vq list|queue --json`` with nothing else but
``--state NAME`` options (each a known state, in either case) is asked of the local
daemon with the stdlib client and printed as the Click command prints it
(:func:`vq.cli.output.echo_json` of the daemon's answer, which the gateway passes on
unchanged when it has ``counts``).

Returns None (so Click takes over, and says whatever there is to say) for anything
else: another option or word, a state name that is not one, the cases
:func:`vq.cli.fast_daemon.local_daemon_socket` leaves to Click, an answer of another
shape, or any error. ``list`` changes nothing, so asking again on the Click path is
harmless.
"""

from __future__ import annotations

from vq.cli.fast_daemon import local_daemon_socket
from vq.domain.states import JobState

__all__ = ["run_list_fast"]

_STATES = frozenset(state.value for state in JobState)


def _states(rest: list[str]) -> list[str] | None:
    """The ``--state`` values of ``rest`` (upper-cased, as the Click command sends them),
    or None unless ``rest`` is exactly ``--json`` once plus ``--state NAME`` pairs."""
    if rest.count("--json") != 1:
        return None
    words = [word for word in rest if word != "--json"]
    if len(words) % 2:
        return None
    states: list[str] = []
    for flag, value in zip(words[::2], words[1::2], strict=True):
        if flag != "--state" or value.upper() not in _STATES:
            return None
        states.append(value.upper())
    return states


def run_list_fast(rest: list[str]) -> int | None:
    """Answer ``vq list`` + ``rest`` and return 0, or None to let Click handle it."""
    states = _states(rest)
    if states is None:
        return None
    socket_path = local_daemon_socket()
    if socket_path is None:
        return None
    from vq.errors import VqError

    params = {"states": states, "tags": [], "name": None, "since": None, "group": None}
    try:
        from vq.client import Client

        result = Client(socket_path).call("list", params)
    except (VqError, OSError, ValueError):
        return None
    if not isinstance(result, dict) or "counts" not in result or "jobs" not in result:
        return None
    from vq.cli.output import echo_json

    echo_json(dict(result))
    return 0
