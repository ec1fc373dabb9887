"""Records of ``vq fetch`` runs in progress, so a fetch killed while staging is found.

``vq fetch`` stages into ``.DEST.vq-fetch-*`` next to DEST, which may be anywhere: without a
record nothing in the state root knows where to look. :func:`recorded_fetch` writes
``<state-root>/fetches/<token>.json`` (DEST, the fetching process's pid and start ticks)
before staging begins and removes it when the fetch ends, however it ends, short of
being killed. A record that outlives its process therefore names a DEST whose staging
siblings belong to nobody: :func:`interrupted_fetches` reports them (``vq doctor``) and,
executing (``vq cleanup --execute``), removes them and then the record.

Contracts: a record is advisory — failing to write it never fails the fetch; a record
whose process still runs (same pid *and* start ticks), or that another user wrote, is
never acted on; only entries
named ``.<DEST name>.vq-fetch-*`` in DEST's own directory are removed, never followed
through a link.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from vq._fs import read_json_regular
from vq._proc_stat import read_stat

__all__ = ["FetchLeftover", "interrupted_fetches", "recorded_fetch", "staging_entries"]

#: A record is small; anything larger is not one of ours and is left alone.
_RECORD_MAX_BYTES = 64 * 1024


@contextlib.contextmanager
def recorded_fetch(fetches_dir: Path, target: Path) -> Iterator[None]:
    """Hold a record naming ``target`` while the body stages next to it (see module).

    The record is written through a descriptor of ``fetches_dir`` opened without following
    a link and owned by this user, so a fetch never writes where someone else's link
    points (root fetching from an owner's tree records nothing there)."""
    name = f"{secrets.token_hex(8)}.json"
    own = read_stat(os.getpid())
    body = json.dumps(
        {
            "dest": str(target),
            "pid": os.getpid(),
            "start_ticks": own.start_ticks if own is not None else None,
        }
    ).encode()
    dir_fd = _own_directory(fetches_dir)
    recorded = False
    if dir_fd is not None:
        try:
            fd = os.open(
                name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd
            )
            try:
                os.write(fd, body)
                os.fsync(fd)
            finally:
                os.close(fd)
            recorded = True
        except OSError:
            pass  # advisory: the fetch goes on unrecorded
    try:
        yield
    finally:
        if dir_fd is not None:
            if recorded:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
            os.close(dir_fd)


def _own_directory(path: Path) -> int | None:
    """A descriptor of directory ``path`` (made if missing), or None unless both it and
    its parent are this user's directories, reached without following a link there."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        parent = os.open(path.parent, flags)
    except OSError:
        return None
    try:
        if os.fstat(parent).st_uid != os.geteuid():
            return None
        with contextlib.suppress(FileExistsError):
            os.mkdir(path.name, 0o700, dir_fd=parent)
        fd = os.open(path.name, flags, dir_fd=parent)
    except OSError:
        return None
    finally:
        os.close(parent)
    if os.fstat(fd).st_uid != os.geteuid():
        os.close(fd)
        return None
    return fd


class FetchLeftover:
    """A staging entry of an interrupted fetch (``path``) and the record naming it."""

    __slots__ = ("path", "record")

    def __init__(self, path: Path, record: Path) -> None:
        self.path = path
        self.record = record


def _read_record(path: Path) -> dict[str, object] | None:
    """The record at ``path``, or None unless it is a small regular file of this user's
    holding a record (a link, FIFO, oversized or foreign file is left where it is)."""
    try:
        # only our own records: root never acts on a path a user named
        data = read_json_regular(path, _RECORD_MAX_BYTES, owner=os.geteuid())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("dest"), str) else None


def _still_running(record: dict[str, object]) -> bool:
    pid, ticks = record.get("pid"), record.get("start_ticks")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    now = read_stat(pid)
    return now is not None and now.alive and (ticks is None or now.start_ticks == ticks)


def staging_entries(dest: Path) -> list[Path]:
    """The ``.<dest name>.vq-fetch-*`` entries beside ``dest`` (the one naming rule)."""
    prefix = f".{dest.name}.vq-fetch-"
    try:
        names = os.listdir(dest.parent)
    except OSError:
        return []
    return [dest.parent / name for name in sorted(names) if name.startswith(prefix)]


def _remove(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a link is removed itself, never followed
    else:
        return False
    return not os.path.lexists(path)


def interrupted_fetches(fetches_dir: Path, *, execute: bool) -> list[tuple[FetchLeftover, str]]:
    """Staging entries of fetches whose process is gone, each with ``"removed"``,
    ``"kept"`` or ``"would remove"``; executing also drops records with nothing left."""
    found: list[tuple[FetchLeftover, str]] = []
    try:
        records = sorted(fetches_dir.glob("*.json"))
    except OSError:
        return found
    for record_path in records:
        record = _read_record(record_path)
        if record is None or _still_running(record):
            continue
        dest = Path(str(record["dest"]))
        kept = False
        for staging in staging_entries(dest):
            if not execute:
                found.append((FetchLeftover(staging, record_path), "would remove"))
                continue
            removed = _remove(staging)
            kept = kept or not removed
            found.append((FetchLeftover(staging, record_path), "removed" if removed else "kept"))
        if execute and not kept:
            with contextlib.suppress(OSError):
                record_path.unlink()
    return found
