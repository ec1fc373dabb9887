"""``vq submit --source-tar -`` (what ``vq submit HOST`` runs remotely) and local HOST words."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.conftest import VQ_BIN, Vq


def _tar(members: dict[str, bytes], link: tuple[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link is not None:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = tarfile.SYMTYPE, link[1]
            tar.addfile(info)
    return buffer.getvalue()


def _submit(vq: Vq, data: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [VQ_BIN, "submit", "--source-tar", "-", *args],
        input=data,
        env=vq.env,
        capture_output=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_the_tar_on_stdin_becomes_the_workspace(vq: Vq, daemon: bool) -> None:
    if daemon:
        vq.start_daemon()
    done = _submit(vq, _tar({"in/data.txt": b"\x00\xffbytes"}), "--", "true")
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.decode().strip()
    assert (vq.root / "jobs" / job_id / "in" / "data.txt").read_bytes() == b"\x00\xffbytes"
    assert vq.spec(job_id)["workspace_source"] == "ssh: source tar on stdin"
    assert not any((vq.root / "incoming").iterdir())  # the spooled copy is gone


def test_an_unsafe_tar_is_refused_and_nothing_is_kept(vq: Vq) -> None:
    done = _submit(vq, _tar({"a": b"x"}, link=("escape", "../../etc/passwd")), "--", "true")
    assert done.returncode == 4, done.stderr
    assert b"vq: error:" in done.stderr
    assert not list((vq.root / "queue").glob("*.json"))
    assert not any((vq.root / "incoming").iterdir())


def test_source_and_source_tar_together_are_a_usage_error(vq: Vq, tmp_path: Path) -> None:
    source = tmp_path / "f.txt"
    source.write_text("x")
    done = _submit(vq, b"", str(source), "--", "true")
    assert done.returncode == 2 and b"not both" in done.stderr


def test_localhost_names_this_queue(vq: Vq) -> None:
    job_id = vq.submit("localhost", "--", "true")
    assert vq.run("status", "localhost", job_id).returncode == 0
    assert (vq.root / "queue" / f"{job_id}.json").exists()


def test_the_same_contents_with_other_member_times_is_the_same_intent(vq: Vq) -> None:
    from vq.cli.submit_options import STDIN_TAR_LABEL
    from vq.services.idempotency import CONTENT_DIGEST_LABELS

    assert STDIN_TAR_LABEL in CONTENT_DIGEST_LABELS

    def packed(mtime: int) -> bytes:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo("a.txt")
            info.size, info.mtime = 3, mtime
            tar.addfile(info, io.BytesIO(b"abc"))
        return buffer.getvalue()

    args = ("--idempotency-key", "k-tar", "--", "true")
    first = _submit(vq, packed(1_000_000), *args)
    again = _submit(vq, packed(2_000_000), *args)
    assert first.returncode == again.returncode == 0, again.stderr
    assert first.stdout == again.stdout
    changed = subprocess.run(
        [VQ_BIN, "submit", "--source-tar", "-", *args],
        input=_tar({"a.txt": b"abd"}),
        env=vq.env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert changed.returncode == 6, changed.stderr
