"""Runtime generations: immutable, verified runtime payloads under a deployment root.

``vq runtime deploy DIR --root ROOT`` copies DIR into a generation named by its digest:

    ROOT/generations/<digest>/generation.json   vq.runtime-generation/1 record
    ROOT/generations/<digest>/entries.json      the payload's entries as canonical JSON,
                                                whose SHA-256 is the digest (what a
                                                scheduler job script checks on the node)
    ROOT/generations/<digest>/payload/          the runtime (what VQ_RUNTIME_PAYLOAD names)
    ROOT/current -> generations/<digest>        what the deployment currently selects

The digest is the campaign tree digest of DIR (every entry's path, type, size and
SHA-256; :func:`vq.domain.artifact.entries_sha256`), so a node's ``runtime_digest`` is
exactly a generation's name. A generation is published atomically (:mod:`vq.publish`),
with group and world write bits cleared; a second deploy of the same bytes is a no-op.

:func:`generation_problem` is the one check of a generation, used by the deploy, by
``vq submit --runtime-root ROOT --runtime-artifact DIGEST`` and again right before
dispatch: ROOT absolute; the generation directory, its record and its payload real (no
links anywhere, no special files); nothing in it group or world writable; the record's
digest the name; the payload's digest the name. The record is read through
:func:`vq._fs.read_json_regular` (no link followed, no FIFO opened blocking, at most
:data:`RECORD_MAX_BYTES`), the payload descriptor-relative without following a link. Any
failure is a reason string: the job is refused (at submit) or fails (at dispatch) naming
it, and nothing found is changed.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from vq._fs import read_json_regular
from vq.domain.artifact import ArtifactEntry, entries_sha256
from vq.domain.canonical import canonical_bytes
from vq.errors import Conflict, InvalidInput, NotFound, UnsafeArchive
from vq.publish import Draft, copy_tree, publish
from vq.store.campaign_tree import descend, hash_strict

__all__ = [
    "GENERATION_SCHEMA",
    "DeployedGeneration",
    "Generation",
    "deploy",
    "generation_problem",
    "root_problem",
    "tree_digest",
]


class DeployedGeneration(TypedDict):
    """What :func:`deploy` did (``vq runtime deploy --json``)."""

    digest: str
    root: str
    generation: str
    payload: str
    entries: int
    created: bool


GENERATION_SCHEMA = "vq.runtime-generation/1"
#: ``generation.json`` is a few hundred bytes; a larger one is not a record.
RECORD_MAX_BYTES = 64 * 1024
_DIGEST_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Generation:
    """Where generation ``digest`` of deployment ``root`` lives."""

    deployment: Path
    digest: str

    @property
    def directory(self) -> Path:
        return self.deployment / "generations" / self.digest

    @property
    def payload(self) -> Path:
        return self.directory / "payload"

    @property
    def record(self) -> Path:
        return self.directory / "generation.json"


def tree_entries(path: Path, what: str) -> list[ArtifactEntry]:
    """The entries of the directory ``path``; links and special files are UnsafeArchive,
    a missing or non-directory ``path`` NotFound."""
    opened = descend(path, "", what)
    if opened is None:
        raise NotFound(f"{path} does not exist", hint="give an existing directory")
    fd, info = opened
    try:
        if not stat.S_ISDIR(info.st_mode):
            raise NotFound(f"{path} is not a directory", hint="give an existing directory")
        return hash_strict(fd, info, what)
    finally:
        os.close(fd)


def tree_digest(path: Path, what: str) -> tuple[str, int]:
    """The digest of the directory ``path`` and its entry count (see :func:`tree_entries`)."""
    entries = tree_entries(path, what)
    return entries_sha256(entries), len(entries)


def _writable_or_linked(top: Path) -> str | None:
    """The first entry under (and including) ``top`` that is a link, a special file, or
    group or world writable, as a reason; None when there is none."""
    pending = [top]
    while pending:
        path = pending.pop()
        info = os.lstat(path)
        shown = path.relative_to(top.parent)
        if stat.S_ISLNK(info.st_mode):
            return f"{shown} is a symbolic link"
        if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
            return f"{shown} is a special file"
        if info.st_mode & 0o022:
            return f"{shown} is group or world writable"
        if stat.S_ISDIR(info.st_mode):
            pending.extend(sorted(path.iterdir(), reverse=True))
    return None


def _generations_dir_problem(deployment: Path) -> str | None:
    """Why ``ROOT/generations`` cannot hold trusted generations (None: it can): it must
    be a real directory, not a link to one elsewhere, and neither it nor ``ROOT`` may be
    group or world writable (whoever could write there could swap a generation in). The
    root itself may be reached through a link: that is the administrator's layout."""
    if not deployment.exists():
        return None  # nothing is deployed: the generation check says so
    if deployment.stat().st_mode & 0o022:
        return f"the runtime root {deployment} is group or world writable"
    generations = deployment / "generations"
    try:
        info = os.lstat(generations)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return f"{generations} is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{generations} is not a directory"
    if info.st_mode & 0o022:
        return f"{generations} is group or world writable"
    return None


def root_problem(root: str) -> str | None:
    """Why ``root`` cannot name a deployment root anywhere (None: a plain absolute path
    without ``..`` or control characters)."""
    if not root.startswith("/") or ".." in root.split("/"):
        return f"the runtime root {root!r} must be an absolute path without '..'"
    if any(ord(char) < 32 or ord(char) == 127 for char in root):
        return "the runtime root contains a control character"
    return None


def generation_problem(root: str | Path, digest: str) -> str | None:
    """Why generation ``digest`` under ``root`` must not be used (None: it verifies)."""
    problem = root_problem(str(root))
    if problem is not None:
        return problem
    root = Path(root)
    if len(digest) != 64 or not set(digest) <= _DIGEST_CHARS:
        return f"the runtime artifact {digest!r} is not a SHA-256 digest (64 lower-case hex)"
    generation = Generation(root, digest)
    try:
        problem = _generations_dir_problem(root)
        if problem is not None:
            return problem
        if not generation.directory.is_dir() or generation.directory.is_symlink():
            return f"generation {digest[:12]} is not deployed under {root}"
        problem = _writable_or_linked(generation.directory)
        if problem is not None:
            return f"generation {digest[:12]}: {problem}"
        record = read_json_regular(generation.record, RECORD_MAX_BYTES)
        if not isinstance(record, dict) or record.get("schema_name") != GENERATION_SCHEMA:
            return f"generation {digest[:12]}: generation.json is not a {GENERATION_SCHEMA} record"
        if record.get("digest") != digest:
            return f"generation {digest[:12]}: its record names digest {record.get('digest')}"
        actual, _count = tree_digest(generation.payload, "runtime payload")
    except (OSError, ValueError) as exc:
        return f"generation {digest[:12]} cannot be read: {exc}"
    except (UnsafeArchive, NotFound) as exc:
        return f"generation {digest[:12]}: {exc.message}"
    if actual != digest:
        return f"generation {digest[:12]}: its payload was altered (its digest is {actual})"
    return None


def _clear_group_world_write(top: Path) -> None:
    for directory, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            os.chmod(path, mode & ~0o022, follow_symlinks=False)
    os.chmod(top, stat.S_IMODE(os.lstat(top).st_mode) & ~0o022)


def _point_current(deployment: Path, digest: str) -> None:
    """``ROOT/current`` → ``generations/<digest>``, replaced atomically."""
    temporary = deployment / f".current.{os.getpid()}"
    temporary.unlink(missing_ok=True)
    os.symlink(f"generations/{digest}", temporary)
    os.replace(temporary, deployment / "current")


def deploy(source: Path, root: Path, deployed_at: str) -> DeployedGeneration:
    """Deploy ``source`` as a generation under ``root`` and select it (module docstring).

    Returns ``{digest, root, generation, payload, entries, created}``; ``created`` is
    False when that generation was already deployed (and verifies). A deployed generation
    that no longer verifies is a Conflict: it is never overwritten.
    """
    if not root.is_absolute():
        raise InvalidInput(f"--root {root} must be an absolute path", hint="give /path/to/root")
    unsafe = _generations_dir_problem(root)
    if unsafe is not None:
        raise InvalidInput(
            f"cannot deploy under {root}: {unsafe}",
            hint="generations are trusted only in a directory no one else may write: "
            "`chmod go-w` it, or deploy to another --root",
        )
    entries = tree_entries(source, "runtime directory")
    digest, count = entries_sha256(entries), len(entries)
    generation = Generation(root, digest)
    created = not generation.directory.exists()
    if created:
        generation.directory.parent.mkdir(mode=0o755, parents=True, exist_ok=True)

        def build(draft: Draft) -> None:
            payload = draft.path / "payload"
            payload.mkdir()
            copy_tree(source, payload)
            record = {"schema_name": GENERATION_SCHEMA, "digest": digest, "entries": count}
            record["deployed_at"] = deployed_at
            (draft.path / "generation.json").write_text(json.dumps(record, indent=1) + "\n")
            # what a scheduler job script verifies on the node: its SHA-256 is the digest
            ordered = sorted(entries, key=lambda entry: entry.path)
            listed = canonical_bytes([entry.model_dump(mode="json") for entry in ordered])
            (draft.path / "entries.json").write_bytes(listed)
            _clear_group_world_write(draft.path)
            copied, _ = tree_digest(payload, "runtime payload copy")
            if copied != digest:
                raise InvalidInput(
                    f"{source} changed while it was copied", hint="deploy it again when quiet"
                )

        publish(generation.directory, build)
    problem = generation_problem(root, digest)
    if problem is not None:
        raise Conflict(
            problem,
            hint="a deployed generation is never overwritten; remove it by hand and deploy again",
        )
    _point_current(root, digest)
    return {
        "digest": digest,
        "root": str(root),
        "generation": str(generation.directory),
        "payload": str(generation.payload),
        "entries": count,
        "created": created,
    }
