"""Fleet fan-out (§6.3): one read verb on this queue and every configured host at once.

:func:`fan_out` runs ``vq WORDS… --json`` on every configured host (plus this queue through
an injected local reader) with bounded concurrency, each within its own ``ssh_timeout``,
so the whole call takes about as long as the slowest host that answers, and an unreachable
host costs at most its deadline. A host marked ``down`` is not contacted. Each answer is
validated against the verb's model (:mod:`vq.protocol.remote_answers`): a host whose
answer is not valid is an ``invalid`` row with the reason, never a payload. The result has
one :class:`HostAnswer` per authority, in name order with this queue first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypedDict

from pydantic import BaseModel

from vq.errors import VqError
from vq.hosts.health import mark_down, read_health
from vq.remote.fleet import Fleet

__all__ = ["LOCAL", "HostAnswer", "fan_out"]

LOCAL = "localhost"
_MAX_PARALLEL = 8


class AnswerSummary(TypedDict):
    """A :class:`HostAnswer` in a fleet verb's ``hosts``."""

    name: str
    status: str
    error: str | None
    last_ok_at: str | None


@dataclass
class HostAnswer:
    """One authority's answer: its payload, or why there is none."""

    name: str
    status: str  # ok | unreachable | invalid | down
    payload: Any = None
    error: str | None = None
    last_ok_at: str | None = None

    def summary(self) -> AnswerSummary:
        return {
            "name": self.name,
            "status": self.status,
            "error": self.error,
            "last_ok_at": self.last_ok_at,
        }


def fan_out(
    fleet: Fleet,
    words: Sequence[str],
    answer: type[BaseModel],
    local: Callable[[], Any] | None,
) -> list[HostAnswer]:
    """Run ``vq WORDS`` (a ``--json`` verb whose answer is ``answer``) everywhere (see
    the module docstring)."""

    def ask(name: str) -> HostAnswer:
        if name == LOCAL and local is not None:
            try:
                return HostAnswer(name, "ok", local())
            except VqError as exc:
                return HostAnswer(name, "invalid", error=exc.message)
        if fleet.hosts[name].down:
            health = mark_down(fleet.state_root, name)
            return HostAnswer(name, "down", error="marked down", last_ok_at=health.last_ok_at)
        try:
            payload = fleet.host(name).run_json(list(words), answer)
        except VqError as exc:
            health = read_health(fleet.state_root, name)
            status = health.status if health.status in ("unreachable", "invalid") else "invalid"
            return HostAnswer(name, status, error=exc.message, last_ok_at=health.last_ok_at)
        return HostAnswer(
            name, "ok", payload, last_ok_at=read_health(fleet.state_root, name).last_ok_at
        )

    names = ([LOCAL] if local is not None else []) + fleet.names()
    with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL, len(names) or 1)) as pool:
        return list(pool.map(ask, names))
