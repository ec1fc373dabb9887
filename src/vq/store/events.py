"""The per-job event timeline ``<workspace>/_vq/events.jsonl`` (§6.1).

Opened through :mod:`vq._safe_open` (no symlink below the job's tree is followed: in
multi-user mode the tree belongs to the job's owner). Best-effort by contract: an append
failure or refusal is logged and swallowed, a missing file reads as an empty timeline, and
malformed lines are skipped. Never the state authority.
"""

from __future__ import annotations

import json
from typing import cast

from vq._fs import parse_json
from vq._safe_open import append_line_beneath, read_regular_beneath
from vq.domain.events import Event, normalize_event
from vq.paths import StatePaths

__all__ = ["append_event", "read_events"]

#: Lines longer than this are skipped on read (a corrupt or hostile file).
MAX_EVENT_LINE = 64 * 1024
#: A timeline larger than this is not read (a job writes a few kilobytes of events).
MAX_EVENTS_BYTES = 64 * 1024 * 1024


def append_event(paths: StatePaths, record: Event) -> bool:
    """Append one event record to its job's timeline. Never raises."""
    try:
        line = json.dumps(record, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return False
    job_id = str(record["jobid"])
    return append_line_beneath(paths.tree_of(job_id), paths.events(job_id), line)


def read_events(paths: StatePaths, job_id: str) -> list[Event]:
    """Every well-formed record of a job's timeline, in file order, with state names in
    lower case whichever way the line spelled them."""
    try:
        data = read_regular_beneath(paths.tree_of(job_id), paths.events(job_id), MAX_EVENTS_BYTES)
        lines = data.splitlines()
    except OSError:
        return []
    events: list[Event] = []
    for line in lines:
        if not line.strip() or len(line) > MAX_EVENT_LINE:
            continue
        try:
            record = parse_json(line)
        except ValueError:  # malformed, not UTF-8 or nested too deeply: skipped
            continue
        if isinstance(record, dict) and "kind" in record:
            events.append(normalize_event(cast(Event, record)))
    return events
