"""Which word of a ``vq VERB …`` command line may name a host (cheap to import).

:data:`HOST_VERBS` are the verbs that accept a HOST as their first positional word;
:func:`first_positional` finds that word, skipping each option and the value it takes.
A leaf of the CLI's routing: :mod:`vq.cli.remote_route` decides where a command line
goes with it, :mod:`vq.cli.remote_verbs` finds a remote submit's SOURCE with it.
"""

from __future__ import annotations

__all__ = ["HOST_VERBS", "first_positional"]

#: Options taking a value, per verb that accepts a HOST (to find the first positional).
HOST_VERBS: dict[str, frozenset[str]] = {
    "status": frozenset({"--group"}),
    "events": frozenset(),
    "logs": frozenset({"--tail", "--from-byte"}),
    "kill": frozenset({"--group"}),
    "pause": frozenset({"--tag"}),
    "resume": frozenset({"--tag"}),
    "wait": frozenset({"--group", "--timeout"}),
    "fetch": frozenset({"--name"}),
    "queue": frozenset({"--state", "--tag", "--name", "--since", "--group"}),
    "list": frozenset({"--state", "--tag", "--name", "--since", "--group"}),
    "top": frozenset({"--interval"}),
    "overview": frozenset(),
    "usage": frozenset({"--by", "--since"}),
}


def _submit_value_options() -> frozenset[str]:
    from vq.cli.submit_options import SUBMIT_OPTIONS

    return frozenset(option.flag for option in SUBMIT_OPTIONS if option.kind != "flag")


def first_positional(verb: str, rest: list[str]) -> int | None:
    """Index in ``rest`` of the first positional word (before any ``--``), or None."""
    takes_value = _submit_value_options() if verb == "submit" else HOST_VERBS.get(verb)
    if takes_value is None:
        return None
    skip = False
    for index, word in enumerate(rest):
        if skip:
            skip = False
            continue
        if word == "--":
            return None
        if word.startswith("-") and word != "-":
            skip = word in takes_value  # "--opt=value" carries its own value
            continue
        return index
    return None
