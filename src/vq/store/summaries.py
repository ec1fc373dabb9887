"""The terminal index file: finished jobs' summaries, so a daemon start parses no
finished spec whose file is unchanged.

``<state root>/terminal-index.jsonl`` holds, per terminal job, the spec file's signature
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
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from vq._fs import LOG_MODE, atomic_write_chunks, open_regular_path
from vq.domain.summary import RECORD_FIELDS, JobSummary, summary_from_record, summary_record

from .specs import Signature

__all__ = ["FORMAT", "load_summaries", "save_summaries"]

FORMAT = "vq.terminal-index/2"
_COMMAND_AT = RECORD_FIELDS.index("command")
_TAGS_AT = RECORD_FIELDS.index("tags")
#: Lines parsed at once (a few hundred KB: the document is never in memory whole).
_BATCH_LINES = 1024
_decode = json.JSONDecoder().decode


def load_summaries(path: Path) -> dict[str, tuple[Signature, JobSummary]]:
    """The summaries in ``path`` by job id with their signatures; empty when the file is
    missing or not one this version wrote (never an error: the specs are read instead).

    Read a batch of lines at a time, so the whole document is never in memory at once
    (a daemon's resident size keeps the peak of its start).
    """
    try:
        fd = open_regular_path(path)
    except OSError:
        return {}
    out: dict[str, tuple[Signature, JobSummary]] = {}
    shared: dict[tuple[str, ...], list[str]] = {}  # one list per distinct command or tags

    def take(lines: list[bytes]) -> None:
        # One parse per batch of lines (an array of them): the per-call cost of the
        # decoder, not the text, is most of a line's.
        for ino, size, mtime, *record in _decode("[" + b",".join(lines).decode() + "]"):
            if len(record) == len(RECORD_FIELDS):
                for at in (_COMMAND_AT, _TAGS_AT):
                    if isinstance(record[at], list):
                        record[at] = shared.setdefault(tuple(record[at]), record[at])
            summary = summary_from_record(record)
            if summary.is_terminal:
                out[summary.id] = ((int(ino), int(size), int(mtime)), summary)

    try:
        with os.fdopen(fd, "rb") as handle:
            header = json.loads(handle.readline())
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                return {}
            if header.get("fields") != list(RECORD_FIELDS):
                return {}
            batch: list[bytes] = []
            for line in handle:
                batch.append(line)
                if len(batch) == _BATCH_LINES:
                    take(batch)
                    batch = []
            if batch:
                take(batch)
    except (OSError, ValueError, TypeError, KeyError):
        return {}
    return out


def save_summaries(path: Path, entries: Iterable[tuple[Signature, JobSummary]]) -> int:
    """Replace ``path`` with ``entries`` (atomic, not durable); how many were written.
    An OSError (a full disk) propagates: the caller logs it, nothing depends on it.

    The file: a header line ``{"format", "fields"}``, then one JSON array per job: the
    signature's three numbers, then the summary's fields in ``fields`` order.
    """
    encode = json.JSONEncoder(separators=(",", ":")).encode
    count = 0

    def lines() -> Iterator[bytes]:
        nonlocal count
        yield (encode({"format": FORMAT, "fields": list(RECORD_FIELDS)}) + "\n").encode()
        for signature, summary in entries:
            count += 1
            yield (encode([*signature, *summary_record(summary)]) + "\n").encode()

    # It names every owner's finished jobs: never world-readable (vq._fs.LOG_MODE).
    atomic_write_chunks(path, lines(), mode=LOG_MODE, durable=False)
    return count
