"""The hostile-file matrix for the readers outside the daemon's own files: fetch records,
fetched snapshots' sidecars, runtime generation records, pack rosters and their inputs,
and the specs of a tree being imported.

Each case builds the real file its reader reads (the reader accepts it: the control test),
then plants one hostile shape in its place: a symlink to a valid copy, a FIFO, a file over
the reader's limit, or another user's file where the reader acts only on its own. The
reader must refuse it within a deadline (a FIFO opened blocking would hang it), leave it
exactly where it was (never followed, moved or deleted) and leave a link's target as it
was. These readers run as library calls; the daemon-side matrix is
``test_hostile_files.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vq.config.hosts import HostSettings
from vq.config.multi_user import MultiUserSettings
from vq.errors import Conflict, CorruptSpec, InvalidInput, UnsafeArchive
from vq.fetch.records import interrupted_fetches
from vq.fetch.remote import _acknowledge, _manifest
from vq.fetch.snapshot import (
    DIAGNOSIS_NAME,
    MANIFEST_NAME,
    SIDECAR_MAX_BYTES,
    fetch_manifest,
    previous_fetch,
)
from vq.packing.cases.rosters import (
    MAX_PACK_FILE_BYTES,
    MAX_TASK_FILE_BYTES,
    load_pack,
    open_pack,
    read_tasks_file,
)
from vq.packing.roster import MAX_STDIN_BYTES, Task
from vq.paths import StatePaths
from vq.remote.host import RemoteHost
from vq.services.import_tree import import_tree
from vq.services.runtime_generations import (
    RECORD_MAX_BYTES,
    Generation,
    deploy,
    generation_problem,
)
from vq.services.system_tree import account

#: A reader must answer within this; one blocked opening a FIFO is released and fails.
DEADLINE = 20.0
#: Over-limit files up to this size are valid content padded with spaces; larger limits
#: get a sparse file (its size alone must refuse it).
PAD_UP_TO = 8 << 20
#: 64 KiB: a fetch record's limit in ``vq.fetch.records``.
RECORD_LIMIT = 64 * 1024
NOBODY = 65534


@dataclass
class Case:
    """One reader on one real file: ``run`` reads it (an expected refusal is returned as
    the exception), ``refused`` tells a refusal from acceptance."""

    path: Path
    limit: int
    run: Callable[[], object]
    refused: Callable[[object], bool]


def _raising(call: Callable[[], object], kind: type[Exception]) -> Callable[[], object]:
    def run() -> object:
        try:
            return call()
        except kind as exc:
            return exc

    return run


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def fetch_record(tmp: Path) -> Case:
    fetches, area = tmp / "fetches", tmp / "area"
    fetches.mkdir()
    area.mkdir()
    staged = area / ".snap.vq-fetch-ab12"
    staged.mkdir()
    path = fetches / "record.json"
    path.write_text(json.dumps({"dest": str(area / "snap"), "pid": _dead_pid()}))
    return Case(
        path,
        RECORD_LIMIT,
        lambda: interrupted_fetches(fetches, execute=True),
        lambda answer: answer == [] and staged.is_dir(),
    )


def fetched_manifest(tmp: Path) -> Case:
    dest = tmp / "dest"
    (dest / "_vq").mkdir(parents=True)
    path = dest / "_vq" / MANIFEST_NAME
    manifest = fetch_manifest("a1b2c3d4e5f6", "workspace", "/src", [], datetime.now(UTC))
    path.write_text(json.dumps(manifest))
    return Case(
        path,
        SIDECAR_MAX_BYTES,
        _raising(lambda: previous_fetch(dest, "a1b2c3d4e5f6", "workspace"), Conflict),
        lambda answer: isinstance(answer, Conflict),
    )


def remote_diagnosis(tmp: Path) -> Case:
    """The streamed diagnosis a remote fetch acknowledges by (RUNNING: nothing to send,
    so the accepted read never reaches the host)."""
    dest = tmp / "dest"
    (dest / "_vq").mkdir(parents=True)
    path = dest / "_vq" / DIAGNOSIS_NAME
    path.write_text(json.dumps({"submitted_at": "2026-12-03T00:00:00+00:00", "state": "RUNNING"}))
    host = RemoteHost("h1", HostSettings(ssh="h1"), tmp / "state")
    return Case(
        path,
        SIDECAR_MAX_BYTES,
        lambda: _acknowledge(host, "a1b2c3d4e5f6", dest, {}),
        lambda answer: answer != 0,
    )


def runtime_generation(tmp: Path) -> Case:
    source, root = tmp / "runtime", tmp / "deployment"
    source.mkdir()
    (source / "run.sh").write_text("echo ready\n")
    digest = str(deploy(source, root, "2026-12-03T00:00:00Z")["digest"])
    return Case(
        Generation(root, digest).record,
        RECORD_MAX_BYTES,
        lambda: generation_problem(root, digest),
        lambda answer: isinstance(answer, str) and digest[:12] in answer,
    )


def pack_roster(tmp: Path) -> Case:
    paths = StatePaths(tmp / "state")
    open_pack(paths, "p1", [Task("k1", ("true",), b"")])
    return Case(
        paths.pack_file("p1"),
        MAX_PACK_FILE_BYTES,
        _raising(lambda: load_pack(paths, "p1"), CorruptSpec),
        lambda answer: isinstance(answer, CorruptSpec),
    )


def _tasks(tmp: Path) -> Path:
    (tmp / "in.txt").write_text("input\n")
    tasks = tmp / "tasks.jsonl"
    tasks.write_text(json.dumps({"key": "k1", "args": ["cat"], "stdin_file": "in.txt"}) + "\n")
    return tasks


def pack_stdin(tmp: Path) -> Case:
    tasks = _tasks(tmp)
    return Case(
        tmp / "in.txt",
        MAX_STDIN_BYTES,
        _raising(lambda: read_tasks_file(tasks), InvalidInput),
        lambda answer: isinstance(answer, InvalidInput),
    )


def pack_tasks(tmp: Path) -> Case:
    """The TASKS.jsonl the user names: a link to it is followed by design (not planted)."""
    tasks = _tasks(tmp)
    return Case(
        tasks,
        MAX_TASK_FILE_BYTES,
        _raising(lambda: read_tasks_file(tasks), InvalidInput),
        lambda answer: isinstance(answer, InvalidInput),
    )


def imported_spec(tmp: Path) -> Case:
    try:
        who = account("vqa")
    except Exception:
        pytest.skip("needs the vqa account of scripts/testbed/users.sh")
    if os.geteuid() != 0:
        pytest.skip("importing a tree needs root")
    old, system = tmp / "old", tmp / "system"
    (old / "queue").mkdir(parents=True)
    path = old / "queue" / "a1b2c3d4e5f6.json"
    path.write_text(json.dumps({"id": "a1b2c3d4e5f6", "workdir": str(old / "workdirs/x")}))
    policy = MultiUserSettings(enabled=True, privilege_drop="collector")
    tree = system / "users" / str(who.uid)

    def refused(answer: object) -> bool:
        return isinstance(answer, CorruptSpec) and not any((tree / "queue").iterdir())

    return Case(
        path,
        4 * 1024 * 1024,
        _raising(lambda: import_tree(old, system, policy, who), CorruptSpec),
        refused,
    )


#: (reader, the shapes it must refuse). ``foreign`` only where the reader acts on its
#: own files alone; ``symlink`` not for the file the user names on the command line.
READERS: list[tuple[Callable[[Path], Case], tuple[str, ...]]] = [
    (fetch_record, ("symlink", "fifo", "oversized", "foreign")),
    (fetched_manifest, ("symlink", "fifo", "oversized")),
    (remote_diagnosis, ("symlink", "fifo", "oversized")),
    (runtime_generation, ("symlink", "fifo", "oversized")),
    (pack_roster, ("symlink", "fifo", "oversized")),
    (pack_stdin, ("symlink", "fifo", "oversized")),
    (pack_tasks, ("fifo", "oversized")),
    (imported_spec, ("symlink", "fifo", "oversized")),
]
MATRIX = [
    pytest.param(reader, shape, id=f"{reader.__name__}-{shape}")
    for reader, shapes in READERS
    for shape in shapes
]


def _plant(path: Path, shape: str, limit: int, aside: Path) -> Path | None:
    """Put ``shape`` at ``path``; for a symlink, the valid original it points at."""
    original = path.read_bytes()
    if shape == "symlink":
        aside.mkdir()
        kept = aside / path.name
        os.rename(path, kept)
        path.symlink_to(kept)
        return kept
    if shape == "fifo":
        path.unlink()
        os.mkfifo(path, 0o600)
    elif shape == "oversized" and limit <= PAD_UP_TO:
        path.write_bytes(original + b" " * (limit + 1 - len(original)))  # still valid
    elif shape == "oversized":
        with open(path, "ab") as handle:
            handle.truncate(limit + 1)
    elif shape == "foreign":
        if os.geteuid() != 0:
            pytest.skip("handing a file to another user needs root")
        os.chown(path, NOBODY, NOBODY)
    return None


def _within_deadline(run: Callable[[], object], path: Path) -> object:
    """``run()``'s answer; a reader still blocked after the deadline is released (a
    writer opens the FIFO) and the case fails."""
    box: dict[str, object] = {}

    def body() -> None:
        try:
            box["answer"] = run()
        except BaseException as exc:  # re-raised below, in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    if thread.is_alive():
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(DEADLINE)
        pytest.fail(f"the reader of {path} blocked for {DEADLINE} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["answer"]


@pytest.mark.parametrize("reader", [reader for reader, _ in READERS], ids=lambda r: r.__name__)
def test_each_reader_accepts_its_file_as_written(
    reader: Callable[[Path], Case], tmp_path: Path
) -> None:
    case = reader(tmp_path)
    answer = _within_deadline(case.run, case.path)
    assert not case.refused(answer), answer


@pytest.mark.parametrize(("reader", "shape"), MATRIX)
def test_a_hostile_file_is_refused_left_in_place_and_never_followed(
    reader: Callable[[Path], Case], shape: str, tmp_path: Path
) -> None:
    case = reader(tmp_path)
    original = case.path.read_bytes()
    kept = _plant(case.path, shape, case.limit, tmp_path / "aside")
    planted = case.path.lstat()
    answer = _within_deadline(case.run, case.path)
    assert case.refused(answer), answer
    now = case.path.lstat()
    assert (stat.S_IFMT(now.st_mode), now.st_ino, now.st_uid, now.st_size) == (
        stat.S_IFMT(planted.st_mode),
        planted.st_ino,
        planted.st_uid,
        planted.st_size,
    )
    if kept is not None:
        assert os.readlink(case.path) == str(kept) and kept.read_bytes() == original


def test_a_streamed_manifest_is_read_without_following_and_never_written_through_a_link(
    tmp_path: Path,
) -> None:
    host = RemoteHost("h1", HostSettings(ssh="h1"), tmp_path / "state")
    stage = tmp_path / "stage"
    (stage / "_vq").mkdir(parents=True)
    streamed = json.dumps({"source_path": "/remote/ws", "skipped": []})
    (stage / "_vq" / MANIFEST_NAME).write_text(streamed)
    assert _manifest(stage, host, "a1b2c3d4e5f6", "workspace")["source_path"] == "/remote/ws"
    linked = tmp_path / "linked.json"
    linked.write_text(json.dumps({"source_path": "/elsewhere", "skipped": []}))
    (stage / "_vq" / MANIFEST_NAME).unlink()
    (stage / "_vq" / MANIFEST_NAME).symlink_to(linked)
    assert _manifest(stage, host, "a1b2c3d4e5f6", "workspace")["source_path"] == ""
    assert json.loads(linked.read_text())["source_path"] == "/elsewhere"
    other = tmp_path / "other-stage"
    other.mkdir()
    meta = tmp_path / "meta"
    meta.mkdir()
    (other / "_vq").symlink_to(meta)
    with pytest.raises(UnsafeArchive, match="_vq is a link or not a directory"):
        _manifest(other, host, "a1b2c3d4e5f6", "workspace")
    assert list(meta.iterdir()) == [] and (other / "_vq").is_symlink()
