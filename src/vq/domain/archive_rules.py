"""Which entries of a submitted source may enter a job workspace. Pure: no I/O.

The workspace is a fresh, empty directory and the job later writes inside it, so an entry is
accepted only if, once written, every path it creates (and every path its link leads to)
stays inside the workspace. Contract of :func:`check_member` (one entry):

* the name is non-empty, has no NUL, is relative (no leading ``/`` or ``\\``, no ``C:``
  drive) and has no ``..`` component at all; no component is longer than NAME_MAX bytes,
  the whole name not longer than MAX_RELATIVE_PATH, nor deeper than MAX_PATH_DEPTH;
* devices, FIFOs and other special files are refused;
* a symlink target is non-empty, relative, and its ``..`` components (if any) all come
  first and do not climb above the workspace from the link's own directory. A ``..`` after
  a name (``d/../x``) is refused even when it looks harmless, because ``d`` may itself be a
  symlink, and then the kernel's resolution differs from the textual one;
* a hardlink target (relative to the workspace root) obeys the name rules;
* a top-level ``_vq`` is refused: vq keeps its metadata there;
* only a directory may name the root itself (``.``; callers skip it) or end in ``/`` or
  ``/.``.

:func:`check_members` adds the rules that need the whole entry list: no duplicate names
(except repeated directories), nothing nested under a non-directory (so no entry is ever
written through a symlink), and a hardlink must point at a regular file listed before it.
Under these rules a symlink inside the workspace can only lead to paths inside it.

Every refusal raises :class:`~vq.errors.UnsafeArchive` naming the entry and the reason.
"""

from __future__ import annotations

import enum
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from vq.errors import UnsafeArchive

__all__ = [
    "MAX_PATH_DEPTH",
    "MAX_RELATIVE_PATH",
    "META_DIR",
    "NAME_MAX",
    "Member",
    "MemberKind",
    "MemberLedger",
    "check_member",
    "check_members",
    "normalize_name",
]

#: Top-level workspace directory reserved for vq's own metadata.
META_DIR = "_vq"
#: The longest name component (bytes) Linux filesystems accept.
NAME_MAX = 255
#: The longest relative path (bytes) of an entry: PATH_MAX (4096) less room for the
#: state root and ``<id>/`` prefix, so every accepted entry can be written.
MAX_RELATIVE_PATH = 3072
#: The deepest nesting of an entry (below the tree walker's MAX_DEPTH, so outputs and
#: fetch see every entry a source brought in).
MAX_PATH_DEPTH = 100

_RECREATE = "re-create the archive from a plain directory with relative paths"


class MemberKind(enum.Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    HARDLINK = "hardlink"
    DEVICE = "device"
    FIFO = "fifo"
    OTHER = "other"


@dataclass(frozen=True)
class Member:
    """One entry of a source: its raw name, its kind and, for links, the raw link target."""

    name: str
    kind: MemberKind
    link_target: str | None = None


def _refuse(name: str, reason: str, hint: str = _RECREATE) -> UnsafeArchive:
    return UnsafeArchive(f"entry {name!r} {reason}", hint=hint)


def _is_absolute(text: str) -> bool:
    drive = len(text) >= 2 and text[1] == ":" and text[0].isascii() and text[0].isalpha()
    return drive or text.startswith(("/", "\\"))


def _relative_parts(name: str, text: str, what: str, hint: str = _RECREATE) -> list[str]:
    """The non-trivial components of a relative path ``text``; refuse malformed ones.

    ``what`` is ``"name"`` when ``text`` is the entry's own name, else e.g. ``"link target"``.
    """
    shown = "" if what == "name" else f" {text!r}"
    if not text:
        raise _refuse(name, f"has an empty {what}")
    if "\0" in text:
        raise _refuse(name, f"has a NUL byte in its {what}")
    if _is_absolute(text):
        raise _refuse(name, f"has an absolute {what}{shown}", hint)
    return [part for part in text.split("/") if part not in ("", ".")]


def _check_lengths(name: str, parts: list[str], what: str) -> None:
    """Refuse what the filesystem would refuse, before anything is written."""
    for part in parts:
        if len(part.encode("utf-8", "surrogateescape")) > NAME_MAX:
            raise _refuse(
                _shown(name),
                f"has a {what} component longer than {NAME_MAX} bytes",
                hint="shorten the file or directory name",
            )
    if len("/".join(parts).encode("utf-8", "surrogateescape")) > MAX_RELATIVE_PATH:
        raise _refuse(
            _shown(name),
            f"has a {what} longer than {MAX_RELATIVE_PATH} bytes",
            hint="flatten the directory tree of the source",
        )
    if len(parts) > MAX_PATH_DEPTH:
        raise _refuse(
            _shown(name),
            f"is nested {len(parts)} levels deep (at most {MAX_PATH_DEPTH})",
            hint="flatten the directory tree of the source",
        )


def _shown(name: str) -> str:
    return name if len(name) <= 80 else name[:77] + "..."


def normalize_name(name: str) -> str:
    """The one normal form of a member name (``./a//b/`` → ``a/b``; the root is ``.``).

    Every check that keys entries by name (duplicates, link targets, size accounting)
    uses this form, so two spellings of one path are always the same entry.
    """
    return _normalize(name, name, "name")


def _normalize(name: str, text: str, what: str) -> str:
    parts = _relative_parts(name, text, what)
    if ".." in parts:
        shown = "" if what == "name" else f" {text!r}"
        raise _refuse(name, f"has a '..' component in its {what}{shown}, escaping the workspace")
    _check_lengths(name, parts, what)
    return "/".join(parts) or "."


def _check_symlink_target(name: str, normalized: str, target: str | None) -> None:
    if target is None:
        raise _refuse(name, "is a symbolic link without a target")
    hint = "make the link point inside the source, or replace it by its target (cp -L, tar -h)"
    parts = _relative_parts(name, target, "link target", hint)
    ups = 0
    while ups < len(parts) and parts[ups] == "..":
        ups += 1
    if ".." in parts[ups:]:
        raise _refuse(
            name,
            f"is a symbolic link whose target {target!r} uses '..' after a name",
            hint="write the link target without 'name/..' detours",
        )
    depth = normalized.count("/")  # components of the link's own directory
    if ups > depth:
        raise _refuse(name, f"is a symbolic link to {target!r}, outside the workspace", hint)


def _check_hardlink_target(name: str, target: str | None) -> None:
    if target is None or _normalize(name, target, "link target") == ".":
        raise _refuse(name, "is a hard link that does not name a file")


def check_member(name: str, kind: MemberKind, link_target: str | None = None) -> str:
    """Validate one entry; return its normalized relative POSIX name (``"."`` = the root)."""
    normalized = _normalize(name, name, "name")
    if kind in (MemberKind.DEVICE, MemberKind.FIFO, MemberKind.OTHER):
        raise _refuse(
            name,
            f"is a special file ({kind.value}): device files and FIFOs are not allowed",
            hint="remove special files from the source",
        )
    if normalized == ".":
        if kind is MemberKind.DIR:
            return normalized
        raise _refuse(name, "names the workspace root itself but is not a directory")
    if kind is not MemberKind.DIR and name.rsplit("/", 1)[-1] in ("", "."):
        raise _refuse(name, f"is a {kind.value} but its name ends like a directory's")
    if normalized.split("/", 1)[0] == META_DIR:
        raise _refuse(
            name,
            f"uses the top-level name {META_DIR!r}, which is reserved for vq metadata",
            hint=f"rename the top-level {META_DIR!r} entry in the source",
        )
    if kind is MemberKind.SYMLINK:
        _check_symlink_target(name, normalized, link_target)
    elif kind is MemberKind.HARDLINK:
        _check_hardlink_target(name, link_target)
    return normalized


class MemberLedger:
    """The whole-list rules of :func:`check_members`, applied one entry at a time.

    For a reader of a tar *stream*, which must refuse an entry before writing it and
    cannot see the entries still to come: :meth:`add` checks one entry against every
    entry added before it (no duplicates except repeated directories, a hardlink names
    an earlier regular file, nothing under a non-directory, no non-directory where
    earlier entries implied a directory) and returns its normalized name.
    """

    def __init__(self) -> None:
        self._kinds: dict[str, MemberKind] = {}
        self._implied_dirs: dict[str, str] = {}  # parent name -> the entry that implied it

    def add(self, member: Member) -> str:
        name = check_member(member.name, member.kind, member.link_target)
        kinds = self._kinds
        previous = kinds.get(name)
        both_dirs = previous is MemberKind.DIR and member.kind is MemberKind.DIR
        if previous is not None and not both_dirs:
            raise _refuse(member.name, "appears more than once")
        if member.kind is not MemberKind.DIR and name in self._implied_dirs:
            child = self._implied_dirs[name]
            raise _refuse(child, f"lies under {name!r}, which is not a directory")
        if member.kind is MemberKind.HARDLINK:
            target = _normalize(member.name, member.link_target or "", "link target")
            if kinds.get(target) is not MemberKind.FILE:
                raise _refuse(member.name, f"is a hard link to {target!r}, not an earlier file")
        parent = posixpath.dirname(name)
        while parent:
            if kinds.get(parent, MemberKind.DIR) is not MemberKind.DIR:
                raise _refuse(member.name, f"lies under {parent!r}, which is not a directory")
            self._implied_dirs.setdefault(parent, member.name)
            parent = posixpath.dirname(parent)
        kinds[name] = member.kind
        return name


def check_members(members: Iterable[Member]) -> list[str]:
    """Validate a whole source in order; return the normalized names, one per member."""
    ledger = MemberLedger()
    return [ledger.add(member) for member in members]
