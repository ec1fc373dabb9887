"""A packed allocation's ended slots come back in one remote command (its shell script run
here by a real ``sh``, as on a login host) and each slot's files land in its element's
workspace through the archive rules: the slot's ``_vq/`` stays behind, a link out of the
workspace or a hard link into another slot fails that slot alone."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from vq.dialects.slurm_alloc import ObservationError
from vq.errors import UnsafeArchive
from vq.executors.scheduler.packed_copy import SlotCopy, SlotLog, restore_slots
from vq.packing.cases.remote import PackRemote
from vq.transport.local import LocalRunner


def _cluster(root: Path) -> tuple[Path, str]:
    """An allocation's work directory (slots 0, 1 and 3) and its logs' prefix."""
    work, logs = root / "work" / "a1", root / "logs"
    for slot in (0, 1, 3):
        (work / str(slot) / "_vq").mkdir(parents=True)
        (work / str(slot) / "_vq" / "exit-code").write_text("0\n")
        (work / str(slot) / "_vq" / "stdin").write_bytes(b"secret input")
    (work / "0" / "result.txt").write_text("zero\n")
    (work / "0" / "deep" / "er").mkdir(parents=True)
    (work / "0" / "deep" / "er" / "table.csv").write_text("a,b\n")
    (work / "1" / "result.txt").write_text("one\n")
    logs.mkdir()
    (logs / "a1-77-0.out").write_bytes(b"x" * 100 + b"tail of zero\n")
    (logs / "a1-77-0.err").write_text("warning zero\n")
    (logs / "a1-77-1.out").write_text("one out\n")
    return work, f"{logs}/a1-77-"


def test_one_command_brings_each_slot_back_into_its_own_workspace(tmp_path: Path) -> None:
    work, prefix = _cluster(tmp_path / "cluster")
    archive = PackRemote(LocalRunner()).collect(str(work), prefix, [0, 1, 2], 20)
    here = {slot: tmp_path / f"element-{slot}" for slot in (0, 1, 2)}
    restored = restore_slots(archive, here)
    zero_out = SlotLog(b"x" * 7 + b"tail of zero\n", 113, b"x" * 64)  # the last 20 bytes
    assert restored == {
        0: SlotCopy(zero_out, SlotLog(b"warning zero\n", 13, b"warning zero\n")),
        1: SlotCopy(SlotLog(b"one out\n", 8, b"one out\n"), None),
        2: SlotCopy(None, None),  # never started: no directory, no log
    }
    assert (here[0] / "result.txt").read_text() == "zero\n"
    assert (here[0] / "deep" / "er" / "table.csv").read_text() == "a,b\n"
    assert (here[1] / "result.txt").read_text() == "one\n"
    assert sorted(p.name for p in here[0].iterdir()) == ["deep", "result.txt"]  # no _vq
    assert sorted(p.name for p in here[1].iterdir()) == ["result.txt"]  # slot 3 not asked
    assert not (here[2]).exists() or not any(here[2].iterdir())


def test_a_missing_allocation_directory_brings_back_only_the_logs(tmp_path: Path) -> None:
    _, prefix = _cluster(tmp_path / "cluster")
    archive = PackRemote(LocalRunner()).collect(str(tmp_path / "gone"), prefix, [1], 1 << 20)
    one = SlotLog(b"one out\n", 8, b"one out\n")
    assert restore_slots(archive, {1: tmp_path / "e1"}) == {1: SlotCopy(one, None)}


def test_a_failed_remote_command_is_an_observation_error(tmp_path: Path) -> None:
    work, prefix = _cluster(tmp_path / "cluster")
    # no temporary directory can be made for the logs' tails: exit 95, nothing to extract
    runner = LocalRunner({"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path / "absent")})
    with pytest.raises(ObservationError, match="copying slots 0 back failed"):
        PackRemote(runner).collect(str(work), prefix, [0], 64)


def _tar(entries: list[tarfile.TarInfo], data: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info in entries:
            body = data.get(info.name)
            if body is not None:
                info.size = len(body)
            tar.addfile(info, io.BytesIO(body) if body is not None else None)
    return buffer.getvalue()


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    return info


def test_an_unsafe_slot_fails_alone_and_its_neighbour_comes_back(tmp_path: Path) -> None:
    archive = _tar(
        [
            _entry("logs/0.out"),
            _entry("logs/1.out"),
            _entry("0/ok.txt"),
            _entry("1/leak", tarfile.SYMTYPE, "/etc/passwd"),
            _entry("2/f"),
            _entry("3/copy", tarfile.LNKTYPE, "2/f"),  # a hard link into another slot
        ],
        {"logs/0.out": b"zero\n", "logs/1.out": b"one\n", "0/ok.txt": b"ok", "2/f": b"f"},
    )
    here = {slot: tmp_path / f"e{slot}" for slot in range(4)}
    restored = restore_slots(archive, here)
    assert restored[0] == SlotCopy(SlotLog(b"zero\n", 5), None)  # an archive without sizes
    assert (here[0] / "ok.txt").read_bytes() == b"ok"
    assert isinstance(restored[1], UnsafeArchive)
    assert not (here[1] / "leak").is_symlink()
    assert restored[2] == SlotCopy(None, None)
    assert isinstance(restored[3], UnsafeArchive)
    assert "outside its slot" in str(restored[3])


def test_a_hard_link_within_its_slot_is_kept(tmp_path: Path) -> None:
    archive = _tar([_entry("./0/f"), _entry("./0/g", tarfile.LNKTYPE, "./0/f")], {"./0/f": b"same"})
    assert restore_slots(archive, {0: tmp_path / "e0"}) == {0: SlotCopy(None, None)}
    assert (tmp_path / "e0" / "g").read_bytes() == b"same"
    assert (tmp_path / "e0" / "g").stat().st_ino == (tmp_path / "e0" / "f").stat().st_ino


def test_an_unreadable_archive_fails_every_slot(tmp_path: Path) -> None:
    restored = restore_slots(b"not a tar" * 100, {0: tmp_path / "e0", 1: tmp_path / "e1"})
    assert set(restored) == {0, 1}
    assert all(isinstance(error, UnsafeArchive) for error in restored.values())
