"""A packed allocation's ended slots brought back into their elements' workspaces.

One copy-back tar (:meth:`vq.packing.cases.remote.PackRemote.collect`) holds, per ended
slot, ``logs/<slot>.out`` and ``logs/<slot>.err`` (the tails of its step's logs, each
with its ``.size`` and its ``.at`` check bytes: a :class:`SlotLog`) and ``<slot>/…``,
the slot's directory on the cluster. :func:`restore_slots` extracts each
slot's files into its element's local workspace through the same checks as a lane job's
copy-back: every entry passes the archive rules (:func:`~vq.domain.archive_rules
.check_members`; no absolute or escaping links, no special files) and is extracted by
:func:`vq._tar.extract_checked`. The slot's ``_vq/`` (its stdin and exit marker, the
batch script's own) never comes back, and a hard link to another slot's file is refused.

Slots are independent: one slot's refused or unwritable entry is that slot's error (its
element ends ``artifacts_unavailable``), never its neighbours'.

:func:`settled_log` is what the element's local log becomes: the live copy
(:mod:`.live_logs`, at most the copy-back's cap) continued by the tail, so a follower's
offset stays valid; where the two do not meet, a one-line marker says how many bytes
were not copied back. A live copy that is not a prefix of the slot's log is replaced.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vq._tar import extract_checked, tar_member
from vq.domain.archive_rules import META_DIR, check_members
from vq.errors import UnsafeArchive, VqError

from .live_logs import read_start

__all__ = ["SlotCopy", "SlotLog", "omitted_marker", "restore_slots", "settled_log"]

_LOGS = "logs"


@dataclass(frozen=True)
class SlotLog:
    """One log of a slot as copied back: its last bytes (``tail``), the log's ``size``
    when read (the tail ends there) and ``at``, its (up to) 64 bytes from the offset the
    copy-back was asked to check (:func:`~.live_logs.read_start` of the local copy)."""

    tail: bytes
    size: int
    at: bytes = b""


@dataclass(frozen=True)
class SlotCopy:
    """What came back of one slot besides its files: its logs (None: no log)."""

    stdout: SlotLog | None
    stderr: SlotLog | None


def omitted_marker(count: int, kept: int) -> bytes:
    """The one line standing where ``count`` bytes of a log were not copied back."""
    line = f"[vq: {count} bytes of this log were not copied back; its last {kept} follow]\n"
    return line.encode()


def settled_log(local: bytes, log: SlotLog, checked_from: int) -> bytes:
    """The element's log after copy-back, given its ``local`` live copy and the copied
    ``log`` whose ``at`` was read from ``checked_from``: ``local`` continued by the
    cluster's bytes after it (``local`` is kept byte for byte, so a follower prints
    nothing twice); where the tail starts beyond ``local``, :func:`omitted_marker` (on a
    line of its own) stands for the gap. A ``local`` that is not a prefix of the log (its
    check bytes differ, the log is shorter, the check was read from another offset) is
    replaced by the tail, itself after the marker when the log was cut."""
    start = log.size - len(log.tail)
    cut = omitted_marker(start, len(log.tail)) if start > 0 else b""
    size = len(local)
    if size == 0:
        return cut + log.tail
    overlap = size - read_start(size)
    prefix = (
        checked_from == read_start(size)
        and log.size >= size
        and log.at[:overlap] == local[size - overlap :]
        and (start >= size or log.tail[: size - start] == local[start:])
    )
    if not prefix:
        return cut + log.tail
    if start <= size:
        return local + log.tail[size - start :]
    newline = b"" if local.endswith(b"\n") else b"\n"
    return local + newline + omitted_marker(start - size, len(log.tail)) + log.tail


def restore_slots(
    archive: bytes, destinations: Mapping[int, Path]
) -> dict[int, SlotCopy | Exception]:
    """Extract each slot of ``archive`` into ``destinations[slot]``; per slot, its logs or
    the error that stopped its extraction. Entries of slots not asked for are ignored."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            return _restore(tar, destinations)
    except tarfile.TarError as exc:
        failure = UnsafeArchive(f"the copy-back archive is unreadable: {exc}")
        return dict.fromkeys(destinations, failure)


def _restore(
    tar: tarfile.TarFile, destinations: Mapping[int, Path]
) -> dict[int, SlotCopy | Exception]:
    logs: dict[str, bytes] = {}
    by_slot: dict[int, list[tarfile.TarInfo]] = {slot: [] for slot in destinations}
    for info in tar.getmembers():
        top, _, rest = info.name.removeprefix("./").partition("/")
        if top == _LOGS:
            stream = tar.extractfile(info) if info.isfile() and "/" not in rest else None
            if stream is not None:
                logs[rest] = stream.read()
        elif top.isdigit() and int(top) in by_slot and rest:
            by_slot[int(top)].append(info)
    results: dict[int, SlotCopy | Exception] = {}
    for slot, destination in destinations.items():
        try:
            _extract_slot(tar, slot, by_slot[slot], destination)
        except (VqError, OSError, tarfile.TarError) as exc:
            results[slot] = exc
            continue
        results[slot] = SlotCopy(_slot_log(logs, f"{slot}.out"), _slot_log(logs, f"{slot}.err"))
    return results


def _slot_log(logs: Mapping[str, bytes], name: str) -> SlotLog | None:
    """The log ``name`` of the archive's ``logs/`` (None: not there); a missing or
    unreadable size is the tail's own length (nothing known before it)."""
    tail = logs.get(name)
    if tail is None:
        return None
    size_text = logs.get(f"{name}.size", b"").strip()
    size = int(size_text) if size_text.isdigit() else len(tail)
    return SlotLog(tail, max(size, len(tail)), logs.get(f"{name}.at", b""))


def _extract_slot(
    tar: tarfile.TarFile, slot: int, members: list[tarfile.TarInfo], destination: Path
) -> None:
    """The slot's entries, renamed relative to its directory, checked, then extracted."""
    prefix = f"{slot}/"
    picked: list[tarfile.TarInfo] = []
    for info in members:
        name = info.name.removeprefix("./").removeprefix(prefix)
        if name.rstrip("/") == META_DIR or name.startswith(f"{META_DIR}/"):
            continue  # the batch script's stdin and exit marker
        if info.islnk():
            target = info.linkname.removeprefix("./")
            if not target.startswith(prefix):
                raise UnsafeArchive(f"slot {slot}: {name!r} is a hard link outside its slot")
            info.linkname = target.removeprefix(prefix)
        info.name = name
        picked.append(info)
    check_members(tar_member(info) for info in picked)
    destination.mkdir(parents=True, exist_ok=True)
    extract_checked(tar, destination, picked)
