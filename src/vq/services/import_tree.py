"""``vq admin import-tree OLD_ROOT --uid UID`` (§2.3): move a single-user tree into
``users/<uid>`` of the multi-user system root, explicitly and with its daemon stopped.

The old tree's daemon lock is held for the whole move, so a daemon that still runs (or
starts meanwhile) refuses it. Every destination is checked before anything moves: an id
that already exists in the user's tree refuses the whole import (:class:`Conflict`), and
nothing is merged; so does a spec in the old ``queue/`` that is not a readable regular
file (a link, FIFO, directory, oversized or malformed file is named and left where it
is, never followed). Entries are renamed (same filesystem only), then owned by the user
without following symlinks. Each moved spec gets ``submitter`` = the uid (the owner
directory is the authority in multi-user mode) and its absolute paths below the old root
(``workdir``, ``cwd``, ``archive_path``) are rewritten to the new tree; anything else in
the spec is kept as it was.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from vq._fs import atomic_write_json, read_json_regular, try_lock_file
from vq.config.multi_user import MultiUserSettings
from vq.errors import Conflict, CorruptSpec, InvalidInput
from vq.paths import StateLayout
from vq.services.system_tree import USER_DIRS, Account, provision_user

__all__ = ["ImportResult", "import_tree"]

_PATH_FIELDS = ("workdir", "cwd", "archive_path")
_MAX_SPEC_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ImportResult:
    tree: Path
    moved: dict[str, int]
    specs: int


def _plan(old: Path, tree: Path) -> list[tuple[Path, Path]]:
    moves = []
    daemon_lock = StateLayout(old).daemon_lock
    for sub in USER_DIRS:
        source = old / sub
        if not source.is_dir() or source.is_symlink():
            continue
        for name in sorted(os.listdir(source)):
            if source / name == daemon_lock:
                continue
            target = tree / sub / name
            if os.path.lexists(target):
                raise Conflict(
                    f"{target} already exists; nothing was imported",
                    hint="an id in both trees: move one of them aside first",
                    reference="import-collision",
                )
            if _is_spec(target):
                _read_spec(source / name)  # an unreadable spec refuses the import, unmoved
            moves.append((source / name, target))
    return moves


def _own(path: Path, who: Account) -> None:
    os.lchown(path, who.uid, who.gid)
    if path.is_dir() and not path.is_symlink():
        for parent, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                os.lchown(os.path.join(parent, name), who.uid, who.gid)


def _read_spec(path: Path) -> dict[str, object]:
    """The spec object at ``path``, read through :func:`vq._fs.read_json_regular` (a link,
    FIFO, directory or file over 4 MiB is refused, never followed or opened blocking);
    CorruptSpec naming the file otherwise."""
    try:
        data = read_json_regular(path, _MAX_SPEC_BYTES)
    except (OSError, ValueError) as exc:
        raise CorruptSpec(
            f"{path}: not a readable spec: {exc}",
            hint="move that file out of the old queue/ (vq leaves it as it is) and import again",
        ) from None
    if not isinstance(data, dict):
        raise CorruptSpec(f"{path}: not a spec object")
    return data


def _is_spec(target: Path) -> bool:
    return target.parent.name == "queue" and target.suffix == ".json"


def _rewrite_spec(path: Path, old: Path, tree: Path, who: Account) -> None:
    data = _read_spec(path)
    data["submitter"] = str(who.uid)
    prefix = str(old) + "/"
    for field in _PATH_FIELDS:
        value = data.get(field)
        if isinstance(value, str) and value.startswith(prefix):
            data[field] = str(tree) + "/" + value[len(prefix) :]
    atomic_write_json(path, data)
    os.lchown(path, who.uid, who.gid)


def import_tree(old: Path, root: Path, policy: MultiUserSettings, who: Account) -> ImportResult:
    """Move ``old``'s queue, jobs, workdirs and archive into ``root/users/<uid>``."""
    old = old.absolute()
    if not old.is_dir() or old.is_symlink() or not StateLayout(old).queue_dir.is_dir():
        raise InvalidInput(
            f"{old} is not a single-user state root (no queue/ directory)",
            hint="give the directory that holds queue/ and jobs/",
        )
    lock = try_lock_file(StateLayout(old).daemon_lock)
    if lock is None:
        raise Conflict(
            f"a vq daemon still runs for {old}",
            hint="stop it first (`VQ_STATE_DIR=OLD vq daemon stop`)",
            reference="daemon-running",
        )
    try:
        tree = provision_user(root, policy, who)
        moves = _plan(old, tree)
        moved: dict[str, int] = {}
        specs = 0
        for source, target in moves:
            try:
                os.rename(source, target)
            except OSError as exc:
                if exc.errno == errno.EXDEV:
                    raise InvalidInput(
                        f"{old} and {root} are on different filesystems",
                        hint="copy the old tree next to the system root first",
                    ) from None
                raise
            _own(target, who)
            moved[target.parent.name] = moved.get(target.parent.name, 0) + 1
            if _is_spec(target):
                _rewrite_spec(target, old, tree, who)
                specs += 1
        return ImportResult(tree, moved, specs)
    finally:
        os.close(lock)
