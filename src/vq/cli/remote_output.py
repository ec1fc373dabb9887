"""Printing what a remote vq answered to ``vq VERB HOST …`` (status, events, queue, the
actions, wait), the one place its output reaches this terminal.

- With ``--json`` and status 0 the answer is read against the verb's model
  (:mod:`vq.protocol.remote_answers`, through :meth:`~vq.remote.host.RemoteHost.read`: a
  bad answer is a protocol error naming the host and nothing of it is printed) and
  printed as this vq prints JSON (ASCII, indented: the same text an honest remote sent).
- Any other output is printed with control characters escaped
  (:func:`vq.domain.text.escape_control_bytes`: newlines and tabs kept), unless the user
  asked for ``--raw``; the remote's stderr always is.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pydantic import BaseModel

from vq.cli.output import echo_json
from vq.domain.text import escape_control_bytes
from vq.protocol.remote_answers import (
    ActionAnswer,
    EventsAnswer,
    GroupStatusAnswer,
    ListAnswer,
    StatusAnswer,
    WaitAnswer,
)
from vq.remote.host import RemoteHost
from vq.transport.runner import RunResult

__all__ = ["answer_model", "print_remote"]

_MODELS: dict[str, type[BaseModel]] = {
    "status": StatusAnswer,
    "events": EventsAnswer,
    "list": ListAnswer,
    "queue": ListAnswer,
    "kill": ActionAnswer,
    "pause": ActionAnswer,
    "resume": ActionAnswer,
    "wait": WaitAnswer,
}


def answer_model(verb: str, words: Sequence[str]) -> type[BaseModel] | None:
    """The model of ``vq VERB WORDS…``'s answer, None when it prints no JSON."""
    if "--json" not in words:
        return None
    if verb == "status" and any(w == "--group" or w.startswith("--group=") for w in words):
        return GroupStatusAnswer
    return _MODELS.get(verb)


def print_remote(host: RemoteHost, verb: str, words: Sequence[str], result: RunResult) -> int:
    """Print ``result`` of ``vq VERB WORDS…`` on ``host`` (see the module docstring);
    returns the remote exit status."""
    model = answer_model(verb, words)
    if result.rc == 0 and model is not None:
        echo_json(host.read(words, result.stdout, model))
    else:
        raw = "--raw" in words
        sys.stdout.buffer.write(result.stdout if raw else escape_control_bytes(result.stdout))
        sys.stdout.flush()
    sys.stderr.buffer.write(escape_control_bytes(result.stderr))
    sys.stderr.flush()
    return result.rc
