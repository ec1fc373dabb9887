"""Workspace materialization from files, directories and archives (real files, no mocks)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
import tempfile
import warnings
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vq.errors import Conflict, InvalidInput, NotFound, UnsafeArchive
from vq.store.workspace import detect_source_kind, materialize

CONTENT = {
    "top.txt": b"top\n",
    "sub/inner.txt": b"inner\n",
    "sub/deeper/data.bin": bytes(range(256)),
    "run.sh": b"#!/bin/sh\necho hi\n",
}


# --- builders -----------------------------------------------------------------------------
def build_tree(root: Path) -> Path:
    """A source directory with nested dirs, an executable and an internal symlink."""
    for name, data in CONTENT.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "run.sh").chmod(0o755)
    (root / "sub" / "link").symlink_to("../top.txt")
    return root


def tar_entry(
    name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"x", link: str = ""
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    if kind == tarfile.CHRTYPE:
        info.devmajor, info.devminor = 1, 3
    return info, data


def write_tar(path: Path, entries: list[tuple[tarfile.TarInfo, bytes]], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def zip_entry(name: str, data: bytes = b"x", mode: int = stat.S_IFREG | 0o644) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = mode << 16
    return info


def write_zip(path: Path, entries: list[tuple[zipfile.ZipInfo, bytes]]) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names warn; some tests want them
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for info, data in entries:
                archive.writestr(info, data)
    return path


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    directory = tmp_path / "jobs"
    directory.mkdir()
    return directory


def refused(error: type[Exception], source: Path | None, jobs: Path) -> Exception:
    """Materialize must raise ``error`` and leave nothing in ``jobs``."""
    workspace = jobs / "job1"
    with pytest.raises(error) as info:
        materialize(source, workspace)
    assert not workspace.exists()
    assert not list(jobs.glob(".staging-*"))
    assert list(jobs.iterdir()) == []
    return info.value


def assert_tree(workspace: Path, *, symlink: bool = True) -> None:
    for name, data in CONTENT.items():
        assert (workspace / name).read_bytes() == data
    assert (workspace / "run.sh").stat().st_mode & 0o100
    assert not (workspace / "top.txt").stat().st_mode & 0o100
    assert (workspace / "_vq").is_dir()
    assert list((workspace / "_vq").iterdir()) == []
    if symlink:
        assert os.readlink(workspace / "sub" / "link") == "../top.txt"
        assert (workspace / "sub" / "link").read_bytes() == CONTENT["top.txt"]


# --- good sources -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("suffix", "mode"),
    [
        (".tar", "w"),
        (".tar.gz", "w:gz"),
        (".tgz", "w:gz"),
        (".tar.bz2", "w:bz2"),
        (".tbz2", "w:bz2"),
        (".tar.xz", "w:xz"),
        (".txz", "w:xz"),
    ],
)
def test_tar_archives(tmp_path: Path, jobs: Path, suffix: str, mode: str) -> None:
    tree = build_tree(tmp_path / "src")
    archive = tmp_path / f"payload{suffix}"
    with tarfile.open(archive, mode) as tar:  # type: ignore[call-overload]
        tar.add(tree, arcname=".")
    assert detect_source_kind(archive) == "tar"
    assert materialize(archive, jobs / "job1") == "tar"
    assert_tree(jobs / "job1")
    assert sorted(p.name for p in jobs.iterdir()) == ["job1"]


def test_tar_hardlink_to_earlier_file(tmp_path: Path, jobs: Path) -> None:
    archive = write_tar(
        tmp_path / "a.tar",
        [tar_entry("a.txt", data=b"shared"), tar_entry("h", tarfile.LNKTYPE, link="a.txt")],
    )
    materialize(archive, jobs / "job1")
    assert (jobs / "job1" / "h").read_bytes() == b"shared"


def test_zip_archive(tmp_path: Path, jobs: Path) -> None:
    entries = [
        (zip_entry("sub/", mode=stat.S_IFDIR | 0o755), b""),
        (zip_entry("sub/deeper/", mode=stat.S_IFDIR | 0o755), b""),
        (zip_entry("top.txt"), CONTENT["top.txt"]),
        (zip_entry("sub/inner.txt"), CONTENT["sub/inner.txt"]),
        (zip_entry("sub/deeper/data.bin"), CONTENT["sub/deeper/data.bin"]),
        (zip_entry("run.sh", mode=stat.S_IFREG | 0o755), CONTENT["run.sh"]),
        (zip_entry("implicit/dir/file.txt", mode=0), b"dos"),
    ]
    archive = write_zip(tmp_path / "payload.zip", entries)
    assert detect_source_kind(archive) == "zip"
    assert materialize(archive, jobs / "job1") == "zip"
    assert_tree(jobs / "job1", symlink=False)
    assert (jobs / "job1" / "implicit" / "dir" / "file.txt").read_bytes() == b"dos"
    assert stat.S_IMODE((jobs / "job1" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((jobs / "job1" / "top.txt").stat().st_mode) == 0o644


def test_single_file(tmp_path: Path, jobs: Path) -> None:
    source = tmp_path / "data.csv"
    source.write_bytes(b"a,b\n1,2\n")
    source.chmod(0o640)
    assert detect_source_kind(source) == "file"
    assert materialize(source, jobs / "job1") == "file"
    copied = jobs / "job1" / "data.csv"
    assert copied.read_bytes() == b"a,b\n1,2\n"
    assert stat.S_IMODE(copied.stat().st_mode) == 0o640
    assert copied.stat().st_mtime_ns == source.stat().st_mtime_ns
    assert sorted(p.name for p in (jobs / "job1").iterdir()) == ["_vq", "data.csv"]


def test_plain_gz_is_a_file(tmp_path: Path, jobs: Path) -> None:
    source = tmp_path / "notes.gz"
    source.write_bytes(b"not really gzip")
    assert materialize(source, jobs / "job1") == "file"


def test_directory(tmp_path: Path, jobs: Path) -> None:
    tree = build_tree(tmp_path / "src")
    (tree / "empty").mkdir()
    (tree / "sub" / "dirlink").symlink_to("deeper")
    assert detect_source_kind(tree) == "dir"
    assert materialize(tree, jobs / "job1") == "dir"
    workspace = jobs / "job1"
    assert_tree(workspace)
    assert (workspace / "empty").is_dir()
    assert os.readlink(workspace / "sub" / "dirlink") == "deeper"
    assert (workspace / "sub" / "dirlink" / "data.bin").read_bytes() == bytes(range(256))
    assert sorted(p.name for p in workspace.iterdir()) == [
        "_vq",
        "empty",
        "run.sh",
        "sub",
        "top.txt",
    ]


def test_no_source_gives_empty_workspace(jobs: Path) -> None:
    assert materialize(None, jobs / "job1") is None
    assert [p.name for p in (jobs / "job1").iterdir()] == ["_vq"]
    assert list((jobs / "job1" / "_vq").iterdir()) == []


# --- hostile tar --------------------------------------------------------------------------
BAD_TARS = {
    "dotdot": [tar_entry("../evil")],
    "dotdot-inside": [tar_entry("a/../../evil")],
    "absolute": [tar_entry("/abs/evil")],
    "symlink-absolute": [tar_entry("link", tarfile.SYMTYPE, link="/etc/passwd")],
    "symlink-escape": [
        tar_entry("sub", tarfile.DIRTYPE),
        tar_entry("sub/link", tarfile.SYMTYPE, link="../../outside"),
    ],
    "symlink-detour": [
        tar_entry("sub", tarfile.DIRTYPE),
        tar_entry("sub/d", tarfile.SYMTYPE, link=".."),
        tar_entry("sub/l", tarfile.SYMTYPE, link="d/../outside"),
    ],
    "write-through-symlink": [
        tar_entry("d", tarfile.SYMTYPE, link="."),
        tar_entry("d/x", data=b"through"),
    ],
    "hardlink-escape": [tar_entry("h", tarfile.LNKTYPE, link="../x")],
    "hardlink-absolute": [tar_entry("h", tarfile.LNKTYPE, link="/etc/passwd")],
    "hardlink-to-symlink": [
        tar_entry("a", tarfile.DIRTYPE),
        tar_entry("a/b", tarfile.DIRTYPE),
        tar_entry("a/b/l", tarfile.SYMTYPE, link="../x"),
        tar_entry("h", tarfile.LNKTYPE, link="a/b/l"),
    ],
    "device": [tar_entry("dev", tarfile.CHRTYPE)],
    "block-device": [tar_entry("blk", tarfile.BLKTYPE)],
    "fifo": [tar_entry("fifo", tarfile.FIFOTYPE)],
    "reserved": [tar_entry("_vq/x")],
    "duplicate": [tar_entry("a"), tar_entry("a", tarfile.SYMTYPE, link="b")],
}


@pytest.mark.parametrize("case", sorted(BAD_TARS))
def test_hostile_tar_is_refused(tmp_path: Path, jobs: Path, case: str) -> None:
    archive = write_tar(tmp_path / "bad.tar.gz", [tar_entry("ok.txt"), *BAD_TARS[case]], "w:gz")
    error = refused(UnsafeArchive, archive, jobs)
    assert "bad.tar.gz" in str(error)
    assert not (tmp_path / "evil").exists()
    assert not (tmp_path / "x").exists()


def test_refusal_names_the_member(tmp_path: Path, jobs: Path) -> None:
    archive = write_tar(tmp_path / "bad.tar", [tar_entry("../evil")])
    error = refused(UnsafeArchive, archive, jobs)
    assert "'../evil'" in str(error)


# --- hostile zip --------------------------------------------------------------------------
BAD_ZIPS = {
    "dotdot": [(zip_entry("../evil"), b"x")],
    "absolute": [(zip_entry("/abs"), b"x")],
    "symlink": [(zip_entry("link", mode=stat.S_IFLNK | 0o777), b"target")],
    "device": [(zip_entry("dev", mode=stat.S_IFCHR | 0o644), b"")],
    "fifo": [(zip_entry("fifo", mode=stat.S_IFIFO | 0o644), b"")],
    "reserved": [(zip_entry("_vq/x"), b"x")],
    "duplicate": [(zip_entry("a"), b"1"), (zip_entry("a"), b"2")],
    "file-and-dir": [(zip_entry("a"), b"1"), (zip_entry("a/b"), b"2")],
}


@pytest.mark.parametrize("case", sorted(BAD_ZIPS))
def test_hostile_zip_is_refused(tmp_path: Path, jobs: Path, case: str) -> None:
    archive = write_zip(tmp_path / "bad.zip", [(zip_entry("ok.txt"), b"ok"), *BAD_ZIPS[case]])
    refused(UnsafeArchive, archive, jobs)
    assert not (tmp_path / "evil").exists()


def test_zip_symlink_message(tmp_path: Path, jobs: Path) -> None:
    archive = write_zip(tmp_path / "l.zip", BAD_ZIPS["symlink"])
    error = refused(UnsafeArchive, archive, jobs)
    assert "symbolic links in zip archives are not supported" in str(error)


# --- hostile directories ------------------------------------------------------------------
def test_directory_symlink_outside_is_refused(tmp_path: Path, jobs: Path) -> None:
    tree = build_tree(tmp_path / "src")
    (tree / "sub" / "escape").symlink_to("../../secret")
    error = refused(UnsafeArchive, tree, jobs)
    assert "sub/escape" in str(error)


def test_directory_absolute_symlink_is_refused(tmp_path: Path, jobs: Path) -> None:
    tree = build_tree(tmp_path / "src")
    (tree / "passwd").symlink_to("/etc/passwd")
    refused(UnsafeArchive, tree, jobs)


def test_directory_fifo_is_refused(tmp_path: Path, jobs: Path) -> None:
    tree = build_tree(tmp_path / "src")
    os.mkfifo(tree / "sub" / "pipe")
    error = refused(UnsafeArchive, tree, jobs)
    assert "device files and FIFOs are not allowed" in str(error)


def test_directory_with_top_level_vq_is_refused(tmp_path: Path, jobs: Path) -> None:
    tree = build_tree(tmp_path / "src")
    (tree / "_vq").mkdir()
    error = refused(UnsafeArchive, tree, jobs)
    assert "reserved for vq metadata" in str(error)


def test_file_named_vq_is_refused(tmp_path: Path, jobs: Path) -> None:
    source = tmp_path / "_vq"
    source.write_text("x")
    refused(UnsafeArchive, source, jobs)


# --- unreadable, missing, conflicting -----------------------------------------------------
def test_truncated_tar_gz(tmp_path: Path, jobs: Path) -> None:
    tree = tmp_path / "src"
    tree.mkdir()
    (tree / "random.bin").write_bytes(os.urandom(256 * 1024))
    archive = tmp_path / "cut.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree, arcname=".")
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    error = refused(InvalidInput, archive, jobs)
    assert not isinstance(error, UnsafeArchive)
    assert "not a readable archive" in str(error)


def test_truncated_plain_tar(tmp_path: Path, jobs: Path) -> None:
    archive = write_tar(tmp_path / "cut.tar", [tar_entry("big", data=os.urandom(64 * 1024))])
    data = archive.read_bytes()
    archive.write_bytes(data[:4096])
    error = refused(InvalidInput, archive, jobs)
    assert not isinstance(error, UnsafeArchive)


def test_zip_with_bad_crc(tmp_path: Path, jobs: Path) -> None:
    archive = tmp_path / "crc.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as out:
        out.writestr(zip_entry("f.txt"), b"A" * 100)
    data = bytearray(archive.read_bytes())
    data[data.index(b"A" * 100) + 50] = ord("B")
    archive.write_bytes(bytes(data))
    error = refused(InvalidInput, archive, jobs)
    assert not isinstance(error, UnsafeArchive)


@pytest.mark.parametrize("name", ["fake.tar.gz", "fake.tgz", "fake.tar", "fake.zip"])
def test_archive_named_file_that_is_not_an_archive(tmp_path: Path, jobs: Path, name: str) -> None:
    source = tmp_path / name
    source.write_bytes(b"just some text, not an archive\n" * 30)
    with pytest.raises(InvalidInput) as info:
        detect_source_kind(source)
    assert info.value.hint
    refused(InvalidInput, source, jobs)


def test_missing_source(tmp_path: Path, jobs: Path) -> None:
    missing = tmp_path / "nope.tar.gz"
    error = refused(NotFound, missing, jobs)
    assert "nope.tar.gz" in str(error)
    assert isinstance(error, NotFound)
    assert error.hint


def test_special_file_source(tmp_path: Path, jobs: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput):
        detect_source_kind(fifo)
    refused(InvalidInput, fifo, jobs)


def test_existing_workspace_conflicts(tmp_path: Path, jobs: Path) -> None:
    workspace = jobs / "job1"
    workspace.mkdir()
    (workspace / "keep").write_text("mine")
    with pytest.raises(Conflict):
        materialize(None, workspace)
    assert (workspace / "keep").read_text() == "mine"
    assert [p.name for p in jobs.iterdir()] == ["job1"]


# --- property: accepted archives never reach outside --------------------------------------
SEGMENT = st.sampled_from(["a", "b", ".", "..", "_vq"])
REL = st.lists(SEGMENT, min_size=1, max_size=4).map("/".join)
ENTRY = st.one_of(
    st.tuples(st.just(tarfile.REGTYPE), REL, st.just("")),
    st.tuples(st.just(tarfile.DIRTYPE), REL, st.just("")),
    st.tuples(st.just(tarfile.SYMTYPE), REL, REL),
    st.tuples(st.just(tarfile.LNKTYPE), REL, REL),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=st.lists(ENTRY, min_size=1, max_size=6))
def test_accepted_tar_stays_inside(entries: list[tuple[bytes, str, str]]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "jobs").mkdir()
        archive = write_tar(
            root / "p.tar", [tar_entry(name, kind, link=link) for kind, name, link in entries]
        )
        workspace = root / "jobs" / "w"
        try:
            materialize(archive, workspace)
        except UnsafeArchive as error:
            # our own rules, not tar's filter, must be what refuses hostile members
            assert "safety filter" not in str(error)
            assert not workspace.exists()
            return
        inside = os.path.realpath(workspace)
        for directory, dirnames, filenames in os.walk(workspace):
            for name in dirnames + filenames:
                real = os.path.realpath(os.path.join(directory, name, "probe"))
                assert os.path.commonpath([real, inside]) == inside
        assert sorted(p.name for p in (root / "jobs").iterdir()) == ["w"]
