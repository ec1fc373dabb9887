"""``vq campaign cleanup``: list, and with ``apply`` remove, what a run directory no
longer needs (rules: :mod:`vq.campaign.cleanup_rules`).

Contracts: it holds the run directory's lock throughout, reads only the campaign, the
journal and the run directory (never a host, never the sources), never follows a link,
and never touches the journal, a manifest, or anything outside the run directory.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from vq.campaign.cleanup_rules import accepted_payloads, intermediate_outputs
from vq.campaign.files import LoadedCampaign
from vq.campaign.planner import plan
from vq.campaign.rundir import RunDir, hold_lock, read_journal

__all__ = ["CleanupItem", "CleanupReport", "cleanup"]

#: Suffixes of the directories an interrupted stage or publish leaves behind.
LEFTOVER_SUFFIXES = (".staging", ".copy")
#: In the name of a hidden stage an interrupted :mod:`vq.publish` commit leaves behind.
STAGE_MARK = ".vqstage-"


class CleanupItemJSON(TypedDict):
    """A :class:`CleanupItem` in ``vq campaign cleanup --json``."""

    path: str
    size: int
    reason: str
    removed: bool
    error: str | None


class CleanupReportJSON(TypedDict):
    """``vq campaign cleanup --json``."""

    applied: bool
    items: list[CleanupItemJSON]
    bytes_listed: int
    bytes_freed: int


@dataclass
class CleanupItem:
    path: Path
    size: int
    reason: str
    removed: bool = False
    error: str | None = None

    def as_dict(self) -> CleanupItemJSON:
        return {
            "path": str(self.path),
            "size": self.size,
            "reason": self.reason,
            "removed": self.removed,
            "error": self.error,
        }


@dataclass
class CleanupReport:
    applied: bool
    items: list[CleanupItem] = field(default_factory=list)

    @property
    def bytes_listed(self) -> int:
        return sum(item.size for item in self.items)

    @property
    def bytes_freed(self) -> int:
        return sum(item.size for item in self.items if item.removed)

    def as_dict(self) -> CleanupReportJSON:
        return {
            "applied": self.applied,
            "items": [item.as_dict() for item in self.items],
            "bytes_listed": self.bytes_listed,
            "bytes_freed": self.bytes_freed,
        }


def cleanup(
    loaded: LoadedCampaign, run_dir: RunDir, *, intermediate: bool, apply: bool
) -> CleanupReport:
    """The cleanup plan of ``run_dir``, carried out when ``apply`` (module contract)."""
    with hold_lock(run_dir):
        journal = read_journal(run_dir.journal, loaded)
        report = CleanupReport(applied=apply)
        found: dict[Path, str] = {}
        for node, attempt in accepted_payloads(journal):
            found[run_dir.payload(node, attempt)] = (
                f"payload of {node} attempt {attempt}, which the queue accepted"
            )
        for path in _leftovers(run_dir):
            found.setdefault(path, "left by an interrupted publish or stage")
        if intermediate:
            current = plan(loaded.campaign, loaded.digest, journal)
            for item in intermediate_outputs(loaded.campaign, journal, current):
                consumers = ", ".join(item.consumers)
                found[run_dir.artifact(item.node, item.attempt, item.output)] = (
                    f"intermediate output {item.node}.{item.output} of attempt {item.attempt}; "
                    f"every consumer ({consumers}) succeeded"
                )
        for path, reason in found.items():
            if os.path.lexists(path):
                report.items.append(CleanupItem(path, _size(path), reason))
        if apply:
            for entry in report.items:
                _remove(entry)
        return report


def _leftovers(run_dir: RunDir) -> list[Path]:
    """Everything under incoming/<node>/<attempt>, and *.staging / *.copy entries (and
    hidden publish stages) under payloads/ and artifacts/ (down to <node>/<attempt>/<entry>)."""
    out: list[Path] = []
    incoming = run_dir.root / "incoming"
    for node_dir in _children(incoming):
        out.extend(_children(node_dir))
    for top in ("payloads", "artifacts"):
        for node_dir in _children(run_dir.root / top):
            for attempt_dir in _children(node_dir):
                if attempt_dir.name.endswith(LEFTOVER_SUFFIXES):
                    out.append(attempt_dir)
                    continue
                out.extend(
                    entry
                    for entry in _children(attempt_dir)
                    if entry.name.endswith(LEFTOVER_SUFFIXES) or STAGE_MARK in entry.name
                )
    return out


def _children(path: Path) -> list[Path]:
    """The entries of a real directory (never through a link); [] otherwise."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return []
        return sorted(path / name for name in os.listdir(path))
    except OSError:
        return []


def _size(path: Path) -> int:
    """Bytes below ``path`` (lstat sizes; links are counted, never followed)."""
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    if not stat.S_ISDIR(info.st_mode):
        return info.st_size
    total = 0
    for parent, dirs, files in os.walk(path, followlinks=False):
        for name in dirs + files:
            try:
                entry = os.lstat(os.path.join(parent, name))
            except OSError:
                continue
            if not stat.S_ISDIR(entry.st_mode):
                total += entry.st_size
    return total


def _remove(item: CleanupItem) -> None:
    try:
        if stat.S_ISDIR(os.lstat(item.path).st_mode):
            shutil.rmtree(item.path)
        else:
            os.unlink(item.path)
    except OSError as exc:
        item.error = exc.strerror or str(exc)
        return
    item.removed = True
