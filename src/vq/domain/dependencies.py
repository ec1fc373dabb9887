"""Dependency gates (§4.3): when may a PENDING job with predecessors start? Pure.

* ``depends_on`` (``--after``): start once every predecessor is COMPLETED. A predecessor
  that ended any other way — or whose spec no longer exists — cascade-fails the
  dependent to FAILED with a reason naming it; the cascade continues level by level.
* ``depends_on_any`` (``--after-any``): start once every predecessor is terminal,
  whatever its outcome; nothing propagates.

A predecessor whose spec is unreadable (quarantined) is neither success nor failure: the
dependent waits and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vq.domain.states import JobState

__all__ = ["Gate", "evaluate"]

#: What the gate knows of a predecessor: its state, None when its spec is gone, or the
#: string "unreadable" when the spec exists but cannot be parsed.
Lookup = Callable[[str], "JobState | str | None"]


@dataclass(frozen=True)
class Gate:
    """``ready``; else ``cascade`` (fail with ``reason``) or wait (``reason`` says why)."""

    ready: bool
    cascade: bool = False
    reason: str | None = None


READY = Gate(True)


def evaluate(depends_on: Sequence[str], depends_on_any: Sequence[str], lookup: Lookup) -> Gate:
    waiting: list[str] = []
    for job_id in depends_on:
        state = lookup(job_id)
        if state is None:
            return Gate(False, True, f"dependency {job_id} no longer exists")
        if state == "unreadable":
            waiting.append(f"{job_id} (unreadable spec)")
        elif isinstance(state, JobState) and state.is_terminal:
            if state is not JobState.COMPLETED:
                return Gate(False, True, f"dependency {job_id} ended {state.value}")
        else:
            waiting.append(f"{job_id} ({state})" if isinstance(state, str) else job_id)
    for job_id in depends_on_any:
        state = lookup(job_id)
        if state is None or (isinstance(state, JobState) and state.is_terminal):
            continue  # a vanished predecessor has certainly ended
        waiting.append(job_id)
    if waiting:
        return Gate(False, False, "waiting for " + ", ".join(waiting))
    return READY
