"""``SpecStore.reader()`` (the start's pass over the queue: one directory fd, no path
objects) reads exactly what ``SpecStore.read`` reads and refuses exactly what it refuses,
with the same words: a FIFO, a symlink, a directory, an oversized file, malformed JSON, a
spec holding another id, a missing file, a name that is no job id."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from vq._fs import read_regular
from vq.domain.spec import JobSpec
from vq.errors import VqError
from vq.paths import StatePaths
from vq.store.specs import MAX_SPEC_BYTES, SpecStore, encode_spec


def _spec(job_id: str) -> JobSpec:
    return JobSpec.model_validate(
        {"id": job_id, "submitted_at": "2026-01-01T00:00:00+00:00", "command": ["true"], "cpus": 1}
    )


def _outcome(read: Callable[[str], JobSpec], job_id: str) -> tuple[str, object]:
    try:
        return "spec", read(job_id)
    except VqError as exc:
        return type(exc).__name__, exc.message


def test_the_reader_reads_and_refuses_as_read_does(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    store = SpecStore(paths)
    good = "00000000000a"
    store.create(_spec(good))
    fifo, link, folder, big, bad, other, gone = (f"00000000000{c}" for c in "bcdef01")
    os.mkfifo(paths.spec(fifo))
    os.symlink(paths.spec(good), paths.spec(link))
    os.mkdir(paths.spec(folder))
    paths.spec(big).write_bytes(b" " * (MAX_SPEC_BYTES + 1))
    paths.spec(bad).write_bytes(b'{"id": ')
    paths.spec(other).write_bytes(encode_spec(_spec(good)))
    ids = [good, fifo, link, folder, big, bad, other, gone, "not-an-id"]
    with store.reader() as read:
        outcomes = {job_id: _outcome(read, job_id) for job_id in ids}
    assert outcomes == {job_id: _outcome(store.read, job_id) for job_id in ids}
    assert outcomes[good] == ("spec", _spec(good))
    refused = {job_id: kind for job_id, (kind, _) in outcomes.items()}
    assert refused == {
        good: "spec",
        fifo: "CorruptSpec",
        link: "CorruptSpec",
        folder: "CorruptSpec",
        big: "CorruptSpec",
        bad: "CorruptSpec",
        other: "CorruptSpec",
        gone: "NotFound",
        "not-an-id": "InvalidInput",
    }
    scan = store.scan([good, fifo, link, big, gone])
    assert list(scan.specs) == [good]
    assert sorted(scan.quarantined) == sorted([fifo, link, big])


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 70_000, MAX_SPEC_BYTES])
def test_a_sized_read_returns_every_byte(tmp_path: Path, size: int) -> None:
    target = tmp_path / "f"
    data = os.urandom(size)
    target.write_bytes(data)
    assert read_regular(target, MAX_SPEC_BYTES) == data
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_regular("f", MAX_SPEC_BYTES, dir_fd=fd) == data
    finally:
        os.close(fd)
