"""Event records for ``_vq/events.jsonl`` (§6.1). Pure builders; the store appends them.

Every record has ``ts`` (ISO-8601 UTC), ``kind`` and ``jobid``, plus kind-specific fields.
The timeline is best-effort observability, never the state authority.

State names inside a record (``from``/``to`` of a transition, ``state`` of the others) are
written in lower case, as in the spec's records (``"to": "oom_killed"``). Files written
before that carry upper-case names; :func:`normalize_event` reads both the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

__all__ = [
    "EVENT_KINDS",
    "STATE_FIELDS",
    "EventKind",
    "make_event",
    "normalize_event",
    "transition_event",
]

EventKind = Literal[
    "submitted", "dispatched", "state_transition", "kill_requested", "watchdog_kill"
]
EVENT_KINDS: tuple[str, ...] = (
    "submitted",
    "dispatched",
    "state_transition",
    "kill_requested",
    "watchdog_kill",
)

#: Record fields that hold a job state name.
STATE_FIELDS: tuple[str, ...] = ("from", "to", "state")


def normalize_event(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its state names in lower case (old upper-case lines read alike)."""
    for key in STATE_FIELDS:
        value = record.get(key)
        if isinstance(value, str):
            record[key] = value.lower()
    return record


def make_event(kind: EventKind, jobid: str, ts: datetime, **fields: Any) -> dict[str, Any]:
    """One event record. ``None`` fields are dropped to keep lines short; state names
    (:data:`STATE_FIELDS`) are written in lower case."""
    record: dict[str, Any] = {"ts": ts.isoformat(), "kind": kind, "jobid": jobid}
    record.update({key: value for key, value in fields.items() if value is not None})
    return normalize_event(record)


def transition_event(
    jobid: str, ts: datetime, before: str, after: str, **fields: Any
) -> dict[str, Any]:
    """A ``state_transition`` record (``from``/``to`` are reserved words in Python)."""
    return make_event("state_transition", jobid, ts, **{"from": before, "to": after}, **fields)
