"""Upload validation counts what extraction would write, not what headers claim."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from vq.web.errors import ApiError
from vq.web.uploads_store import UnpackLimits, UploadStore, check_tar


def archive(path: Path, *members: tuple[tarfile.TarInfo, bytes | None]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def regular(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def hardlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.LNKTYPE, target
    return info


def refusal(path: Path, limits: UnpackLimits) -> ApiError:
    with pytest.raises(ApiError) as refused:
        check_tar(path, limits)
    return refused.value


def test_unpacked_bytes_cap_counts_file_sizes(tmp_path: Path) -> None:
    # 64 KiB of zeros compress to ~100 bytes: the compressed size says nothing
    bomb = archive(tmp_path / "b.tar.gz", (regular("zeros"), b"\0" * 65536))
    assert bomb.stat().st_size < 1000
    check_tar(bomb, UnpackLimits(max_bytes=65536, max_members=10))
    error = refusal(bomb, UnpackLimits(max_bytes=65535, max_members=10))
    assert error.status == 413 and "65535" in error.message
    assert "upload_max_unpacked_bytes" in error.message


def test_hard_links_count_at_their_targets_size(tmp_path: Path) -> None:
    links = [(hardlink(f"l{i}", "big"), None) for i in range(9)]
    path = archive(tmp_path / "h.tar.gz", (regular("big"), b"x" * 1000), *links)
    check_tar(path, UnpackLimits(max_bytes=10_000, max_members=100))
    assert refusal(path, UnpackLimits(max_bytes=9_999, max_members=100)).status == 413


def test_member_count_cap(tmp_path: Path) -> None:
    files = [(regular(f"f{i}"), b"") for i in range(11)]
    path = archive(tmp_path / "m.tar.gz", *files)
    check_tar(path, UnpackLimits(max_bytes=1, max_members=11))
    error = refusal(path, UnpackLimits(max_bytes=1, max_members=10))
    assert error.status == 413 and "upload_max_members" in error.message and "10" in error.message


def test_sparse_members_are_refused(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    with open(source / "holey", "wb") as handle:
        handle.truncate(1 << 20)
        handle.seek(4096)
        handle.write(b"data")
    path = tmp_path / "s.tar.gz"
    subprocess.run(["tar", "-S", "-czf", str(path), "-C", str(source), "holey"], check=True)
    with tarfile.open(path) as tar:
        assert tar.getmember("holey").sparse is not None  # really sparse in the archive
    error = refusal(path, UnpackLimits(max_bytes=1 << 30, max_members=10))
    assert error.status == 400 and "sparse" in error.message


def test_publish_keeps_nothing_over_the_caps(tmp_path: Path) -> None:
    store = UploadStore(tmp_path / "root", ttl_seconds=60)
    part, out = store.open_incoming()
    with out:
        out.write(archive(tmp_path / "z.tar.gz", (regular("z"), os.urandom(300))).read_bytes())
    with pytest.raises(ApiError) as refused:
        store.publish(part, UnpackLimits(max_bytes=200, max_members=10))
    assert refused.value.status == 413
    assert list(store.dir.iterdir()) == []


def test_inline_staging_sweeps_stale_leftovers(tmp_path: Path) -> None:
    store = UploadStore(tmp_path / "root", ttl_seconds=1)
    store.ensure()
    stale = [store.dir / ".inline-0123456789abcdef", store.dir / ".incoming-0123.part"]
    busy = [store.dir / ".inline-fedcba9876543210", store.dir / ".incoming-4567.part"]
    for group, age in ((stale, 2 * 3600), (busy, 600)):
        group[0].mkdir()
        (group[0] / "run.sh").write_text("echo\n")
        group[1].write_bytes(b"partial")
        for path in group:
            os.utime(path, (time.time() - age, time.time() - age))
    fresh = store.stage_inline({"a.txt": b"x"})
    assert fresh.exists() and not any(path.exists() for path in stale)
    # a short TTL never removes work in progress (a slow upload, a submit being staged)
    assert all(path.exists() for path in busy)


@pytest.mark.parametrize(
    ("stored", "links_to"),
    [("././big", "big"), ("big", "././big"), ("./big", ".//big"), ("d//big", "./d/big")],
)
def test_hard_links_count_whatever_the_spelling_of_their_target(
    tmp_path: Path, stored: str, links_to: str
) -> None:
    """A 9 KB tar.gz with a 9 MB file and 40 hard links to it unpacks to 369 MB."""
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    if stored.startswith("d"):
        directory = tarfile.TarInfo("d")
        directory.type = tarfile.DIRTYPE
        members.append((directory, None))
    members.append((regular(stored), b"\0" * 9_000_000))
    members += [(hardlink(f"l{i}", links_to), None) for i in range(40)]
    path = archive(tmp_path / "links.tar.gz", *members)
    assert path.stat().st_size < 20_000
    refused = refusal(path, UnpackLimits(max_bytes=10_000_000, max_members=1000))
    assert refused.status == 413 and "upload_max_unpacked_bytes" in refused.message
