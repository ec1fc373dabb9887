"""An atomic write sets its mode and owner on the temp file's descriptor, before the rename."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vq._fs import atomic_write_bytes


def test_the_mode_is_exact_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "spec.json"
    old = os.umask(0o077)
    try:
        atomic_write_bytes(target, b"{}", mode=0o640)
    finally:
        os.umask(old)
    assert target.read_bytes() == b"{}" and target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["spec.json"]  # no temp file left


@pytest.mark.skipif(os.geteuid() != 0, reason="only root gives a file away")
def test_root_writes_the_file_as_its_owner(tmp_path: Path) -> None:
    target = tmp_path / "spec.json"
    target.write_text("old")
    atomic_write_bytes(target, b"new", owner=4321)
    info = target.stat()
    assert (info.st_uid, target.read_bytes()) == (4321, b"new")
