"""Pack rosters on disk: ``vq pack open`` and ``vq pack seal``.

``<state-root>/packs/<name>/pack.json`` (mode 0600, directory 0700) is written atomically
and synced (:func:`vq._fs.atomic_write_bytes`) under the ``pack.json.lock`` flock, and
validated completely on every read. Open with the same tasks is a no-op; with the exact
registered tasks plus new ones it appends them (revision + 1); anything else is refused and
changes nothing. Seal is atomic, idempotent and final (revision + 1 the first time).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal

from vq._fs import FileTooLarge, atomic_write_bytes, fsync_dir, read_regular, spec_lock
from vq.errors import Conflict, CorruptSpec, InvalidInput, NotFound
from vq.packing.roster import (
    MAX_STDIN_BYTES,
    PACK_SCHEMA,
    PackDocument,
    RosterRefused,
    StoredTask,
    Task,
    compare_rosters,
    parse_task_lines,
    validate_pack_name,
)
from vq.paths import StatePaths

__all__ = [
    "OpenResult",
    "load_pack",
    "now_utc",
    "open_pack",
    "read_tasks_file",
    "read_tasks_stream",
    "seal_pack",
    "update_pack",
]

MAX_TASK_FILE_BYTES = 64 << 20
#: Far above any roster the limits allow in practice; a larger pack.json is not read.
MAX_PACK_FILE_BYTES = 1 << 30


@dataclass(frozen=True)
class OpenResult:
    name: str
    action: Literal["created", "unchanged", "appended"]
    revision: int
    tasks: int
    added: int
    sealed: bool

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "action": self.action,
            "revision": self.revision,
            "tasks": self.tasks,
            "added": self.added,
            "sealed": self.sealed,
        }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_utc() -> str:
    """Whole seconds, UTC, in the form Slurm's accounting prints (``sacct`` windows)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _name(name: str) -> str:
    try:
        return validate_pack_name(name)
    except RosterRefused as exc:
        raise InvalidInput(str(exc), hint="name packs like files: letters, digits, ._-") from None


def read_tasks_file(path: Path) -> list[Task]:
    """Tasks from a TASKS.jsonl file; every ``stdin_file`` is read relative to it.

    The file the user named may be reached through a link; a FIFO, device or directory is
    refused without blocking, like every file vq reads (:func:`vq._fs.read_regular`):
    tasks piped in come through :func:`read_tasks_stream` (``-`` on the command line)."""
    try:
        data = read_regular(path, MAX_TASK_FILE_BYTES, follow=True)
    except FileNotFoundError:
        raise NotFound(f"{path} does not exist", hint="give the path of a TASKS.jsonl") from None
    except FileTooLarge:
        raise InvalidInput(f"{path} is larger than {MAX_TASK_FILE_BYTES} bytes") from None
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {path}: {exc.strerror}",
            hint="give the path of a regular TASKS.jsonl, or - and pipe the tasks on stdin",
        ) from None
    return _tasks_of(data, str(path), path.parent)


def read_tasks_stream(stream: BinaryIO, base: Path) -> list[Task]:
    """Tasks read from ``stream`` (standard input: ``vq pack open NAME -``), at most
    :data:`MAX_TASK_FILE_BYTES`; every ``stdin_file`` is read relative to ``base`` (the
    working directory)."""
    data = stream.read(MAX_TASK_FILE_BYTES + 1)
    if len(data) > MAX_TASK_FILE_BYTES:
        raise InvalidInput(f"standard input holds more than {MAX_TASK_FILE_BYTES} bytes")
    return _tasks_of(data, "standard input", base)


def _tasks_of(data: bytes, where: str, base: Path) -> list[Task]:
    try:
        lines = parse_task_lines(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput(f"{where} is not UTF-8") from None
    except RosterRefused as exc:
        raise InvalidInput(
            f"{where}: {exc}",
            hint='each line: {"key": "k", "args": ["prog", "arg"], "stdin_file": null}',
        ) from None
    tasks = []
    for line in lines:
        stdin = b""
        if line.stdin_file is not None:
            stdin = _read_stdin(base / line.stdin_file, where, line.line)
        tasks.append(Task(line.key, line.args, stdin))
    return tasks


def _read_stdin(stdin_path: Path, tasks_source: str, line: int) -> bytes:
    where = f"{tasks_source}: line {line}"
    try:
        return read_regular(stdin_path, MAX_STDIN_BYTES)
    except FileNotFoundError:
        raise NotFound(f"{where}: {stdin_path} does not exist") from None
    except FileTooLarge:
        raise InvalidInput(f"{where}: stdin over {MAX_STDIN_BYTES} bytes") from None
    except OSError as exc:
        raise InvalidInput(
            f"{where}: cannot read {stdin_path}: {exc.strerror}",
            hint="stdin_file must be a regular file (links are not followed)",
        ) from None


def load_pack(paths: StatePaths, name: str) -> PackDocument:
    """Read and validate ``pack.json`` completely.

    Read through :func:`vq._fs.read_regular`: a link, FIFO, directory or file over
    :data:`MAX_PACK_FILE_BYTES` is refused as CorruptSpec, never followed, never opened
    blocking and left where it is."""
    path = paths.pack_file(_name(name))
    try:
        data = read_regular(path, MAX_PACK_FILE_BYTES)
    except FileNotFoundError:
        raise NotFound(
            f"no pack named {name!r}", hint=f"create it with `vq pack open {name} TASKS.jsonl`"
        ) from None
    except OSError as exc:
        raise CorruptSpec(
            f"{path} cannot be read: {exc.strerror}",
            hint="vq writes a regular file there and never follows a link; move it aside",
        ) from None
    try:
        document = PackDocument.from_bytes(data)
    except ValueError as exc:
        raise CorruptSpec(
            f"{path} is not a valid pack file: {exc}",
            hint="restore it from a backup; vq never writes a partial pack file",
        ) from None
    if document.name != name:
        raise CorruptSpec(f"{path} belongs to pack {document.name!r}, not {name!r}")
    return document


def _write(paths: StatePaths, document: PackDocument) -> None:
    atomic_write_bytes(paths.pack_file(document.name), document.to_bytes(), mode=0o600)


def _pack_dir(paths: StatePaths, name: str) -> Path:
    paths.root.mkdir(parents=True, exist_ok=True, mode=0o700)
    paths.packs_dir.mkdir(exist_ok=True, mode=0o700)
    directory = paths.packs_dir / name
    if not directory.exists():
        directory.mkdir(mode=0o700)
        fsync_dir(paths.packs_dir)
    return directory


def open_pack(paths: StatePaths, name: str, tasks: list[Task]) -> OpenResult:
    """Create the pack, or confirm/append its roster (see the module contract)."""
    _name(name)
    _pack_dir(paths, name)
    with spec_lock(paths.pack_file(name)):
        if not os.path.lexists(paths.pack_file(name)):  # a link there is refused, not replaced
            now = _now()
            document = PackDocument(
                schema=PACK_SCHEMA,
                name=name,
                pack_id=secrets.token_hex(16),
                revision=1,
                sealed=False,
                created_at=now,
                updated_at=now,
                tasks=[StoredTask.of(task) for task in tasks],
            )
            _write(paths, document)
            return OpenResult(name, "created", 1, len(tasks), len(tasks), False)
        document = load_pack(paths, name)
        registered = document.roster()
        try:
            action = compare_rosters(registered, tasks, sealed=document.sealed)
        except RosterRefused as exc:
            raise Conflict(
                f"pack {name!r}: {exc}",
                hint="pass the complete registered task file, with new tasks only at its end",
                reference="pack-roster-changed",
            ) from None
        if action == "same":
            return OpenResult(name, "unchanged", document.revision, len(tasks), 0, document.sealed)
        added = tasks[len(registered) :]
        updated = document.model_copy(
            update={
                "revision": document.revision + 1,
                "updated_at": _now(),
                "tasks": [*document.tasks, *(StoredTask.of(task) for task in added)],
            }
        )
        _write(paths, updated)
        return OpenResult(name, "appended", updated.revision, len(tasks), len(added), False)


def seal_pack(paths: StatePaths, name: str) -> tuple[PackDocument, bool]:
    """Seal the roster; returns the document and whether this call sealed it."""
    _name(name)
    if not paths.pack_file(name).parent.is_dir():
        load_pack(paths, name)  # raises NotFound with the hint
    with spec_lock(paths.pack_file(name)):
        document = load_pack(paths, name)
        if document.sealed:
            return document, False
        sealed = document.model_copy(
            update={"sealed": True, "revision": document.revision + 1, "updated_at": _now()}
        )
        _write(paths, sealed)
        return sealed, True


def update_pack(
    paths: StatePaths, name: str, change: Callable[[PackDocument], PackDocument | None]
) -> PackDocument:
    """Reread the pack under its lock, apply ``change`` and write its answer durably.

    ``change`` sees the current document and returns the new one, or None to write
    nothing; it may raise to refuse (nothing is written). Returns the document now on disk.
    """
    _name(name)
    if not paths.pack_file(name).parent.is_dir():
        load_pack(paths, name)  # raises NotFound with the hint
    with spec_lock(paths.pack_file(name)):
        document = load_pack(paths, name)
        changed = change(document)
        if changed is None:
            return document
        changed = changed.model_copy(update={"updated_at": _now()})
        _write(paths, changed)
        return changed
