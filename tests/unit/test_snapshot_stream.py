"""A snapshot tar extracted as it arrives through a real pipe (vq.remote.snapshot_stream)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from vq.errors import UnsafeArchive
from vq.remote.snapshot_stream import extract_stream
from vq.transport.local import LocalRunner


def _add(tar: tarfile.TarFile, name: str, data: bytes = b"", **fields: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if data else None)


def _archive(path: Path, entries: list[tuple[str, bytes, dict[str, object]]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, fields in entries:
            _add(tar, name, data, **fields)
    return path


def _extract_piped(argv: list[str], into: Path) -> None:
    stream = LocalRunner().open_stream(argv, deadline_s=30)
    try:
        extract_stream(stream, into)
    finally:
        stream.close()


def test_a_whole_snapshot_with_its_sidecars_is_extracted_byte_for_byte(tmp_path: Path) -> None:
    blob = os.urandom(200_000)
    tar = _archive(
        tmp_path / "ok.tar",
        [
            ("./", b"", {"type": tarfile.DIRTYPE}),
            ("out/blob", blob, {}),
            ("out/link", b"", {"type": tarfile.SYMTYPE, "linkname": "blob"}),
            ("_vq/fetch-manifest.json", b"{}", {}),
        ],
    )
    into = tmp_path / "into"
    into.mkdir()
    _extract_piped(["cat", str(tar)], into)
    assert (into / "out" / "blob").read_bytes() == blob
    assert os.readlink(into / "out" / "link") == "blob"
    assert (into / "_vq" / "fetch-manifest.json").read_text() == "{}"


@pytest.mark.parametrize(
    ("hostile", "why"),
    [
        (("evil", b"", {"type": tarfile.SYMTYPE, "linkname": "../../etc"}), "outside"),
        (("/abs", b"x", {}), "absolute"),
        (("a/../../x", b"x", {}), "'..'"),
        (("dev", b"", {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}), "special"),
        (("hl", b"", {"type": tarfile.LNKTYPE, "linkname": "nowhere"}), "hard link"),
    ],
)
def test_a_hostile_entry_stops_the_stream_before_anything_after_it_is_written(
    tmp_path: Path, hostile: tuple[str, bytes, dict[str, object]], why: str
) -> None:
    tar = _archive(
        tmp_path / "bad.tar",
        [("first", b"1", {}), hostile, ("after", b"2", {})],
    )
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(UnsafeArchive) as refused:
        _extract_piped(["cat", str(tar)], into)
    assert why in refused.value.message
    assert sorted(p.name for p in into.iterdir()) == ["first"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tar", "into"]


def test_a_later_entry_cannot_turn_an_earlier_directory_into_a_link(tmp_path: Path) -> None:
    tar = _archive(
        tmp_path / "swap.tar",
        [("d/f", b"1", {}), ("d", b"", {"type": tarfile.SYMTYPE, "linkname": "."})],
    )
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(UnsafeArchive, match="not a directory"):
        _extract_piped(["cat", str(tar)], into)
    assert (into / "d").is_dir() and not (into / "d").is_symlink()


def test_a_pipe_cut_inside_a_file_is_refused(tmp_path: Path) -> None:
    tar = _archive(tmp_path / "big.tar", [("big", os.urandom(300_000), {})])
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(UnsafeArchive, match="not a valid tar"):
        _extract_piped(["head", "-c", "150000", str(tar)], into)
