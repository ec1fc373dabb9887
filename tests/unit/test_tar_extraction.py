"""Every tar reader extracts through ``vq._tar.extract_checked``, with tar's ``data`` filter
and as on a Python without it (Debian 12's 3.11.2): submit sources (``store.workspace``),
SSH snapshot streams (``remote.snapshot_stream``) and the HTTP client's outputs
(``api_client``). Each case checks what the filter guarantees: no special mode bits, no
group/other write, and the extracting user as owner."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import vq._tar
from vq._tar import extract_checked
from vq.api_client import extract_outputs
from vq.errors import UnsafeArchive
from vq.remote.snapshot_stream import extract_stream
from vq.store.workspace import materialize
from vq.transport.local import LocalRunner


@pytest.fixture(params=[True, False], ids=["data-filter", "no-data-filter"])
def tar_filter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param and not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tar data filter")
    monkeypatch.setattr(vq._tar, "HAS_DATA_FILTER", request.param)
    return bool(request.param)


def _archive(path: Path, prefix: str = "", *, compress: bool = False) -> Path:
    """A tar holding a directory, a set-uid group-writable file owned by someone else."""
    with tarfile.open(path, "w:gz" if compress else "w") as tar:
        if prefix:
            top = tarfile.TarInfo(prefix.rstrip("/"))
            top.type, top.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(top)
        folder = tarfile.TarInfo(f"{prefix}sub")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o777
        tar.addfile(folder)
        info = tarfile.TarInfo(f"{prefix}sub/tool")
        info.size, info.mode, info.uid, info.gid = 2, 0o6777, 4242, 4242
        tar.addfile(info, io.BytesIO(b"hi"))
    return path


def _assert_data_like(root: Path) -> None:
    tool = root / "sub" / "tool"
    assert tool.read_bytes() == b"hi"
    mode = stat.S_IMODE(tool.stat().st_mode)
    assert mode & (stat.S_ISUID | stat.S_ISGID) == 0
    assert mode & 0o022 == 0
    assert mode & 0o600 == 0o600
    assert stat.S_IMODE((root / "sub").stat().st_mode) & 0o022 == 0
    assert tool.stat().st_uid == os.getuid()


def _via_workspace(tar: Path, into: Path) -> Path:
    materialize(tar, into)
    return into


def _via_stream(tar: Path, into: Path) -> Path:
    into.mkdir()
    stream = LocalRunner().open_stream(["cat", str(tar)], deadline_s=30)
    try:
        extract_stream(stream, into)
    finally:
        stream.close()
    return into


def _via_api_client(tar: Path, into: Path) -> Path:
    return extract_outputs(tar.read_bytes(), into)


READERS: dict[str, tuple[Callable[[Path, Path], Path], str, bool]] = {
    "workspace": (_via_workspace, "", False),
    "snapshot-stream": (_via_stream, "", False),
    "api-client": (_via_api_client, "job/", True),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_each_reader_extracts_as_the_data_filter_would(
    tmp_path: Path, tar_filter: bool, reader: str
) -> None:
    extract, prefix, compress = READERS[reader]
    tar = _archive(tmp_path / "in.tar", prefix, compress=compress)
    _assert_data_like(extract(tar, tmp_path / "out"))


@pytest.mark.parametrize("reader", sorted(READERS))
def test_each_reader_refuses_an_escaping_entry(
    tmp_path: Path, tar_filter: bool, reader: str
) -> None:
    extract, prefix, compress = READERS[reader]
    tar = tmp_path / "in.tar"
    with tarfile.open(tar, "w:gz" if compress else "w") as out:
        if prefix:
            top = tarfile.TarInfo(prefix.rstrip("/"))
            top.type = tarfile.DIRTYPE
            out.addfile(top)
        info = tarfile.TarInfo(f"{prefix}../escape")
        info.size = 1
        out.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(UnsafeArchive):
        extract(tar, tmp_path / "out")
    assert not (tmp_path / "escape").exists()


def test_extract_checked_consumes_a_stream_of_members_once_and_lazily(
    tmp_path: Path, tar_filter: bool
) -> None:
    tar_path = _archive(tmp_path / "in.tar")
    seen: list[str] = []
    with tarfile.open(tar_path, "r|") as tar:

        def members() -> Iterator[tarfile.TarInfo]:
            for info in tar:
                seen.append(info.name)
                yield info

        extract_checked(tar, tmp_path / "out", members())
    assert seen == ["sub", "sub/tool"]
    _assert_data_like(tmp_path / "out")
