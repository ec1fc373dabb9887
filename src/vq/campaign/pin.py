"""``vq campaign pin FILE``: write each node's ``sources.sha256`` into the campaign file.

Contracts:

* FILE is read and checked as ``vq campaign validate`` reads it (NotFound: exit 3; bad
  JSON or a refused campaign: exit 4). A node's ``sources`` may leave ``sha256`` out:
  pinning adds it.
* Every sources directory is hashed exactly as ``validate`` hashes it
  (:func:`vq.campaign.files.check_sources`). A directory that is missing, holds a link or
  a special file (also as a component of ``sources.path``), or puts a file where an input
  or output is staged is not pinned: :class:`SourcesUnpinnable` (exit 1) and nothing is
  written. A pin is never a way around a check ``validate`` makes.
* Only ``sources.sha256`` values change. When every pin already matches, nothing is
  written (a rerun changes nothing, not even the file's mtime). Otherwise the file is
  replaced atomically (a temporary file in its directory, fsync, rename, fsync of the
  directory; its permission bits kept) with its formatting kept: the pins are replaced
  in place when that yields exactly the pinned document, else the document is written
  again with the file's indentation, key order, separators and final newline.
* A FILE that is a symbolic link is refused (the rename would replace the link).
"""

from __future__ import annotations

import copy
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from vq._fs import atomic_write_bytes
from vq.campaign.checks import check_campaign
from vq.campaign.files import LoadedCampaign, SourcesCheck, check_sources, read_json_file
from vq.campaign.model import CampaignRefused, campaign_sha256, parse_campaign
from vq.campaign.problems import Problem
from vq.errors import InvalidInput, VqError

__all__ = ["PinResult", "SourcesUnpinnable", "pin_campaign", "pinned_text"]

#: What stands in for an absent ``sha256`` while the file is checked (never written).
_ABSENT = "unpinned"
#: A ``"sha256": "…"`` member in JSON text (the value group is the JSON string's body).
_PIN_MEMBER = re.compile(r'("sha256"\s*:\s*)"((?:[^"\\]|\\.)*)"')


class SourcesUnpinnable(VqError):
    """A sources directory ``pin`` cannot pin (what ``validate`` refuses; exit 1)."""

    exit_code = 1
    default_reference = "campaign-sources-unpinnable"


class PinnedSourceJSON(TypedDict):
    """One node's pin in ``vq campaign pin --json``'s ``sources``."""

    node: str
    path: str
    sha256: str
    previous_sha256: str | None
    entries: int
    changed: bool


@dataclass(frozen=True)
class PinnedSource:
    node: str
    path: str
    sha256: str
    previous: str | None
    entries: int

    @property
    def changed(self) -> bool:
        return self.sha256 != self.previous

    def as_dict(self) -> PinnedSourceJSON:
        return {
            "node": self.node,
            "path": self.path,
            "sha256": self.sha256,
            "previous_sha256": self.previous,
            "entries": self.entries,
            "changed": self.changed,
        }


@dataclass(frozen=True)
class PinResult:
    """What ``pin`` did: each node's pin, whether the file was written, the new digest."""

    path: Path
    sources: list[PinnedSource]
    written: bool
    campaign_sha256: str


def pin_campaign(path: Path) -> PinResult:
    """Pin every node's sources in the campaign file ``path`` (see the module contract)."""
    if path.is_symlink():
        raise InvalidInput(
            f"the campaign file {path} is a symbolic link; pin writes the file itself",
            hint=f"pin the file it points to: vq campaign pin {os.path.realpath(path)}",
        )
    raw = read_json_file(path, "campaign file")
    previous = _previous_pins(raw)
    checkable = copy.deepcopy(raw)
    for node in _nodes_with_sources(checkable):
        node["sources"].setdefault("sha256", _ABSENT)
    campaign = parse_campaign(checkable, source=str(path))
    problems = check_campaign(campaign)
    if problems:
        raise CampaignRefused(str(path), problems)
    checks = check_sources(LoadedCampaign(campaign, campaign_sha256(campaign), path))
    _refuse_unpinnable(path, checks)
    pins = [
        PinnedSource(c.node, c.path, str(c.actual), previous.get(c.node), c.entries) for c in checks
    ]
    pinned = copy.deepcopy(raw)
    for node, pin in zip(_nodes_with_sources(pinned), pins, strict=True):
        node["sources"]["sha256"] = pin.sha256
    digest = campaign_sha256(parse_campaign(pinned, source=str(path)))
    if not any(pin.changed for pin in pins):
        return PinResult(path, pins, False, digest)
    original = path.read_bytes().decode("utf-8", errors="replace")
    try:
        unchanged = json.loads(original) == raw
    except ValueError:
        unchanged = False
    if not unchanged:
        raise InvalidInput(
            f"the campaign file {path} changed while it was being pinned; nothing was written",
            hint="pin it again once nothing else is writing it",
        )
    mode = stat.S_IMODE(os.stat(path).st_mode)
    atomic_write_bytes(path, pinned_text(original, pinned).encode("utf-8"), mode=mode)
    return PinResult(path, pins, True, digest)


class _RawSources(TypedDict, total=False):
    """A node's ``sources`` object as decoded (before the model checked it)."""

    path: str
    sha256: str


class _RawNode(TypedDict, total=False):
    """The part of a decoded node object that pinning reads and writes."""

    id: str
    sources: _RawSources


def _nodes_with_sources(raw: object) -> list[_RawNode]:
    """The node objects of a decoded campaign whose ``sources`` is an object, in order
    (the very objects of ``raw``: a change to one is a change to ``raw``)."""
    nodes = raw.get("nodes") if isinstance(raw, dict) else None
    if not isinstance(nodes, list):
        return []
    found = [n for n in nodes if isinstance(n, dict) and isinstance(n.get("sources"), dict)]
    return cast(list[_RawNode], found)


def _previous_pins(raw: Any) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for node in _nodes_with_sources(raw):
        value = node["sources"].get("sha256")
        found[str(node.get("id"))] = value if isinstance(value, str) else None  # as decoded
    return found


def _refuse_unpinnable(path: Path, checks: list[SourcesCheck]) -> None:
    """Every problem but a pin that differs from the digest refuses the pin."""
    blocking: list[Problem] = [
        problem
        for check in checks
        for problem in check.problems
        if problem.field != "sources.sha256" or check.actual is None
    ]
    if blocking:
        more = f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else ""
        raise SourcesUnpinnable(
            f"{path}: {blocking[0].text()}{more}; nothing was pinned",
            hint="fix the sources directory (`vq campaign validate FILE` lists every "
            "problem), then pin again",
        )


def pinned_text(original: str, pinned: Any) -> str:
    """``pinned`` (the decoded document with its new pins) as the text of a file that was
    ``original``: the pins replaced in place when that gives exactly ``pinned``, else
    ``pinned`` written with ``original``'s layout (:func:`_same_layout`). Pure."""
    members = list(_PIN_MEMBER.finditer(original))
    values = [node["sources"].get("sha256") for node in _nodes_with_sources(pinned)]
    if len(members) == len(values) and all(isinstance(v, str) for v in values):
        parts: list[str] = []
        last = 0
        for member, value in zip(members, values, strict=True):
            parts += [original[last : member.start(2)], json.dumps(value)[1:-1]]
            last = member.end(2)
        text = "".join(parts) + original[last:]
        try:
            if json.loads(text) == pinned:
                return text
        except ValueError:
            pass
    return _same_layout(original, pinned)


def _same_layout(original: str, document: Any) -> str:
    """``document`` as JSON laid out as ``original`` was: its indentation (or one line with
    its separators), non-ASCII kept when it had any, its final newline."""
    indent_match = re.search(r"\n([ \t]+)\S", original)
    body = original.strip()
    if indent_match is not None:
        indent: str | int | None = indent_match.group(1)
    elif "\n" in body:
        indent = 0
    else:
        indent = None
    spaced = indent is not None or re.search(r'":\s', body) is not None
    text = json.dumps(
        document,
        indent=indent,
        separators=(", " if indent is None else ",", ": ") if spaced else (",", ":"),
        ensure_ascii=original.isascii(),
    )
    return text + "\n" if original.endswith("\n") else text
