"""The pure and file-level parts of a scheduler lane: outcomes, the token bucket, the
staging archive and the copy-back extraction (with tar's ``data`` filter, and as on a
Python without it, Debian 12's 3.11.2)."""

from __future__ import annotations

import io
import stat
import tarfile
from pathlib import Path

import pytest

import vq._tar
from vq.domain.states import JobState
from vq.errors import UnsafeArchive
from vq.executors.scheduler.outcome import TokenBucket, ending
from vq.executors.scheduler.remote import SCRIPT_NAME, extract, stage_archive


@pytest.mark.parametrize(
    ("marker", "abnormal", "state", "code"),
    [
        (0, None, None, 0),
        (3, None, None, 3),
        (0, JobState.OOM_KILLED, JobState.OOM_KILLED, 0),
        (0, JobState.TIME_EXCEEDED, JobState.TIME_EXCEEDED, 0),
        (None, JobState.TIME_EXCEEDED, JobState.TIME_EXCEEDED, None),
        (None, None, JobState.ABORTED_BY_QUEUE, None),
        (None, JobState.ABORTED_BY_QUEUE, JobState.ABORTED_BY_QUEUE, None),
        (137, JobState.ABORTED_BY_QUEUE, None, 137),  # the marker is the authority
    ],
)
def test_ending(
    marker: int | None, abnormal: JobState | None, state: JobState | None, code: int | None
) -> None:
    verdict = ending(marker, abnormal, "RAW")
    assert (verdict.state, verdict.exit_code) == (state, code)
    assert (verdict.reason is None) == (state is None)


def test_token_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(6, lambda: now[0])
    assert all(bucket.take() for _ in range(6))
    assert not bucket.take()
    assert bucket.wait_seconds() == pytest.approx(10.0)
    now[0] = 9.9
    assert not bucket.take()
    now[0] = 10.0
    assert bucket.take() and not bucket.take()
    now[0] = 1000.0  # never more than one minute's worth saved up
    assert sum(bucket.take() for _ in range(10)) == 6


def test_stage_archive_carries_the_workspace_and_script_not_driver_records(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "in.txt").write_bytes(b"data\xff")
    (tmp_path / "_vq").mkdir()
    (tmp_path / "_vq" / "events.jsonl").write_text("{}\n")
    (tmp_path / "_vq" / "scheduler-intent.json").write_text("{}")
    data = stage_archive(tmp_path, "#!/bin/sh\ntrue\n")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = set(tar.getnames())
        script = tar.extractfile(SCRIPT_NAME)
        assert script is not None and script.read() == b"#!/bin/sh\ntrue\n"
    assert {"sub", "sub/in.txt", "_vq", SCRIPT_NAME} <= names
    assert "_vq/events.jsonl" not in names and "_vq/scheduler-intent.json" not in names


def _tar(*entries: tuple[str, bytes | None, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data, link in entries:
            info = tarfile.TarInfo(name)
            if link:
                info.type, info.linkname = tarfile.SYMTYPE, link
                tar.addfile(info)
            elif data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(params=[True, False], ids=["data-filter", "no-data-filter"])
def tar_filter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Each copy-back test runs with tar's ``data`` filter and as without it."""
    if request.param and not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no tar data filter")
    monkeypatch.setattr(vq._tar, "HAS_DATA_FILTER", request.param)
    return bool(request.param)


def test_copy_back_extracts_payload_and_markers_but_keeps_driver_records(
    tmp_path: Path, tar_filter: bool
) -> None:
    (tmp_path / "_vq").mkdir()
    (tmp_path / "_vq" / "events.jsonl").write_text("mine\n")
    archive = _tar(
        (".", None, ""),
        ("./out.txt", b"result", ""),
        ("./_vq", None, ""),
        ("./_vq/exit-code", b"0\n", ""),
        ("./_vq/events.jsonl", b"theirs\n", ""),
    )
    extract(archive, tmp_path)
    assert (tmp_path / "out.txt").read_bytes() == b"result"
    assert (tmp_path / "_vq" / "exit-code").read_text() == "0\n"
    assert (tmp_path / "_vq" / "events.jsonl").read_text() == "mine\n"


@pytest.mark.parametrize(
    "entry",
    [
        ("../escape", b"x", ""),
        ("/abs", b"x", ""),
        ("link", None, "/etc/passwd"),
        ("_vq/deep/file", b"x", ""),
        ("_vq/link", None, "../x"),
    ],
)
def test_copy_back_refuses_hostile_entries(
    tmp_path: Path, entry: tuple[str, bytes | None, str], tar_filter: bool
) -> None:
    with pytest.raises(UnsafeArchive):
        extract(_tar(entry), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_copy_back_drops_special_mode_bits(tmp_path: Path, tar_filter: bool) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("tool")
        info.size, info.mode, info.uid, info.gid = 2, 0o6777, 4242, 4242
        tar.addfile(info, io.BytesIO(b"hi"))
    extract(buffer.getvalue(), tmp_path)
    extracted = (tmp_path / "tool").stat()
    assert stat.S_IMODE(extracted.st_mode) == 0o755
    assert (tmp_path / "tool").read_bytes() == b"hi"
    assert extracted.st_uid != 4242
