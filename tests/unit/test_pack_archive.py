"""The staging tar of a packed allocation: one directory per slot, the script beside."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from vq.executors.scheduler.remote import pack_archive


def _workspace(root: Path, name: str, text: str) -> Path:
    workspace = root / name
    (workspace / "data").mkdir(parents=True)
    (workspace / "data" / "input.txt").write_text(text)
    (workspace / "_vq").mkdir()
    (workspace / "_vq" / "events.jsonl").write_text("{}\n")  # the driver's own records
    (workspace / "stdout.log").write_text("")
    os.symlink("data/input.txt", workspace / "link")
    return workspace


def test_each_slot_gets_its_workspace_without_driver_records_and_the_script(
    tmp_path: Path,
) -> None:
    workspaces = [_workspace(tmp_path, f"w{n}", f"input {n}\n") for n in range(2)]
    data = pack_archive(workspaces, b"#!/bin/bash\ntrue\n", "_vq/job.sh")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == [
            "0/data",
            "0/data/input.txt",
            "0/link",
            "0/stdout.log",
            "1/data",
            "1/data/input.txt",
            "1/link",
            "1/stdout.log",
            "_vq",
            "_vq/job.sh",
        ]
        assert members["0/link"].issym() and members["0/link"].linkname == "data/input.txt"
        assert members["_vq/job.sh"].mode == 0o700
        script = tar.extractfile("_vq/job.sh")
        assert script is not None and script.read() == b"#!/bin/bash\ntrue\n"
        second = tar.extractfile("1/data/input.txt")
        assert second is not None and second.read() == b"input 1\n"


def test_an_element_without_a_workspace_stages_nothing_but_the_script(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    data = pack_archive([missing], b"x", "_vq/job.sh")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.getnames() == ["_vq", "_vq/job.sh"]
