"""Event records for ``_vq/events.jsonl`` (§6.1). Pure builders; the store appends them.

Every record has ``ts`` (ISO-8601 UTC), ``kind`` and ``jobid``, plus kind-specific fields.
The timeline is best-effort observability, never the state authority.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

__all__ = ["EVENT_KINDS", "EventKind", "make_event", "transition_event"]

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


def make_event(kind: EventKind, jobid: str, ts: datetime, **fields: Any) -> dict[str, Any]:
    """One event record. ``None`` fields are dropped to keep lines short."""
    record: dict[str, Any] = {"ts": ts.isoformat(), "kind": kind, "jobid": jobid}
    record.update({key: value for key, value in fields.items() if value is not None})
    return record


def transition_event(
    jobid: str, ts: datetime, before: str, after: str, **fields: Any
) -> dict[str, Any]:
    """A ``state_transition`` record (``from``/``to`` are reserved words in Python)."""
    return make_event("state_transition", jobid, ts, **{"from": before, "to": after}, **fields)
