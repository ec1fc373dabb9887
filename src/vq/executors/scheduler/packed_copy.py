"""A packed allocation's ended slots brought back into their elements' workspaces.

One copy-back tar (:meth:`vq.packing.cases.remote.PackRemote.collect`) holds, per ended
slot, ``logs/<slot>.out`` and ``logs/<slot>.err`` (the tails of its step's logs) and
``<slot>/…``, the slot's directory on the cluster. :func:`restore_slots` extracts each
slot's files into its element's local workspace through the same checks as a lane job's
copy-back: every entry passes the archive rules (:func:`~vq.domain.archive_rules
.check_members`; no absolute or escaping links, no special files) and is extracted by
:func:`vq._tar.extract_checked`. The slot's ``_vq/`` (its stdin and exit marker, the
batch script's own) never comes back, and a hard link to another slot's file is refused.

Slots are independent: one slot's refused or unwritable entry is that slot's error (its
element ends ``artifacts_unavailable``), never its neighbours'.
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

__all__ = ["SlotCopy", "restore_slots"]

_LOGS = "logs"


@dataclass(frozen=True)
class SlotCopy:
    """What came back of one slot besides its files: its logs' tails (None: no log)."""

    stdout: bytes | None
    stderr: bytes | None


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
        results[slot] = SlotCopy(logs.get(f"{slot}.out"), logs.get(f"{slot}.err"))
    return results


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
