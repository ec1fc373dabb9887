"""The terminal index file: finished jobs' summaries, so a daemon start parses no
finished spec whose file is unchanged.

``<state root>/terminal-index.json`` holds, per terminal job, the spec file's signature
``(inode, size, mtime_ns)`` when the summary was taken and the
:class:`~vq.domain.summary.JobSummary` itself. It is a cache, never a truth:

* a summary is used only while the spec file still has that signature (every spec
  write is a rename of a fresh file, so an equal signature means the same bytes);
  any other spec is read and parsed as before;
* the file is written atomically but not fsync'd (losing it costs one slower start);
  one that is missing, unreadable, of another format or of other fields is ignored
  and rewritten by the next daemon.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vq._fs import atomic_write_bytes, read_regular
from vq.domain.summary import RECORD_FIELDS, JobSummary, summary_from_record, summary_record

from .specs import Signature

__all__ = ["FORMAT", "load_summaries", "save_summaries"]

FORMAT = "vq.terminal-index/2"
#: Larger files are ignored rather than read (about 25 times the size of 100,000 jobs).
MAX_BYTES = 1024 * 1024 * 1024
_COMMAND_AT = RECORD_FIELDS.index("command")


def load_summaries(path: Path) -> dict[str, tuple[Signature, JobSummary]]:
    """The summaries in ``path`` by job id with their signatures; empty when the file is
    missing or not one this version wrote (never an error: the specs are read instead)."""
    try:
        data: Any = json.loads(read_regular(path, MAX_BYTES))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    if data.get("fields") != list(RECORD_FIELDS) or not isinstance(data.get("entries"), list):
        return {}
    out: dict[str, tuple[Signature, JobSummary]] = {}
    commands: dict[tuple[str, ...], list[str]] = {}  # one list per distinct command
    try:
        for entry in data["entries"]:
            ino, size, mtime, *record = entry
            if len(record) == len(RECORD_FIELDS) and isinstance(record[_COMMAND_AT], list):
                command = record[_COMMAND_AT]
                record[_COMMAND_AT] = commands.setdefault(tuple(command), command)
            summary = summary_from_record(record)
            if not summary.is_terminal:
                continue
            out[summary.id] = ((int(ino), int(size), int(mtime)), summary)
    except (ValueError, TypeError, KeyError):
        return {}
    return out


def save_summaries(path: Path, entries: Iterable[tuple[Signature, JobSummary]]) -> int:
    """Replace ``path`` with ``entries`` (atomic, not durable); how many were written.
    An OSError (a full disk) propagates: the caller logs it, nothing depends on it."""
    rows = [[*signature, *summary_record(summary)] for signature, summary in entries]
    document = {"format": FORMAT, "fields": list(RECORD_FIELDS), "entries": rows}
    payload = json.dumps(document, separators=(",", ":")).encode()
    atomic_write_bytes(path, payload, durable=False)
    return len(rows)
