"""Event records for ``_vq/events.jsonl`` (§6.1). Pure builders; the store appends them.

Every record has ``ts`` (ISO-8601 UTC), ``kind`` and ``jobid``, plus kind-specific fields.
The timeline is best-effort observability, never the state authority.

State names inside a record (``from``/``to`` of a transition, ``state`` of the others) are
written in lower case, as in the spec's records (``"to": "oom_killed"``). Files written
before that carry upper-case names; :func:`normalize_event` reads both the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, NotRequired, Required, TypedDict, cast

__all__ = [
    "EVENT_KINDS",
    "STATE_FIELDS",
    "Event",
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

#: One timeline record: ``kind`` always; ``ts`` and ``jobid`` in every record vq writes;
#: ``from``/``to`` in a transition, ``state`` in the others; then the kind's own fields
#: (``reason``, ``resubmit_of``, ``parent_jobid``...), which pass through as written.
Event = TypedDict(
    "Event",
    {
        "ts": str,
        "kind": Required[str],
        "jobid": str,
        "from": NotRequired[str],
        "to": NotRequired[str],
        "state": NotRequired[str],
    },
    total=False,
)


def normalize_event(record: Event) -> Event:
    """The record with its state names in lower case (old upper-case lines read alike)."""
    before, after, state = record.get("from"), record.get("to"), record.get("state")
    if isinstance(before, str):
        record["from"] = before.lower()
    if isinstance(after, str):
        record["to"] = after.lower()
    if isinstance(state, str):
        record["state"] = state.lower()
    return record


def make_event(kind: EventKind, jobid: str, ts: datetime, **fields: Any) -> Event:
    """One event record. ``None`` fields are dropped to keep lines short; state names
    (:data:`STATE_FIELDS`) are written in lower case."""
    kept = {key: value for key, value in fields.items() if value is not None}
    return normalize_event(
        cast(Event, {"ts": ts.isoformat(), "kind": kind, "jobid": jobid, **kept})
    )


def transition_event(jobid: str, ts: datetime, before: str, after: str, **fields: Any) -> Event:
    """A ``state_transition`` record (``from``/``to`` are reserved words in Python)."""
    return make_event("state_transition", jobid, ts, **{"from": before, "to": after}, **fields)
