"""Values a user can type get one `vq: error:` line and a documented exit code, never a
traceback (the CLI in-process; a real process where the argv must be raw bytes)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import VQ_BIN, Vq

CASES = [
    (["submit", "--not-before", "99999999999d", "--", "true"], 4),
    (["submit", "--not-before", "0001-01-01T00:00:00", "--", "true"], 4),
    (["list", "--since", "99999999999999d"], 4),
    (["usage", "--since", "0001-01-01"], 4),
    (["daemon", "throttle", "--max-jobs", "1", "--for", "99999999999999d"], 4),
    (["cleanup", "--older-than", "99999999999999999d"], 4),
    (["submit", "--cpus", "\u0661", "--", "true"], 2),
    (["submit", "--array", "", "--", "true"], 4),
    (["submit", "--wall-time", "10", "--", "true"], 4),
    (["submit", "--mem", "2X", "--", "true"], 4),
    (["submit", "--array-from", "/dev/zero", "--", "true"], 4),
]


@pytest.mark.parametrize(("args", "code"), CASES)
def test_hostile_values_are_one_error_line_and_a_documented_code(
    vq: Vq, args: list[str], code: int
) -> None:
    result = vq.run(*args, check=False, timeout=30)
    assert result.returncode == code, result.stderr
    assert result.stderr.startswith("vq: error: ") and "Traceback" not in result.stderr
    assert not (vq.root / "queue").exists() or not os.listdir(vq.root / "queue")


def test_a_non_utf8_argument_is_refused_clearly(vq: Vq) -> None:
    result = subprocess.run(
        [VQ_BIN.encode(), b"submit", b"--", b"echo", b"\xff"],
        env=vq.env,
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 4
    assert result.stderr.startswith(b"vq: error: ") and b"UTF-8" in result.stderr


def test_a_too_long_member_name_is_refused_before_anything_is_written(
    vq: Vq, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    deep = source.joinpath(*["d"] * 120)
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    result = vq.run("submit", str(source), "--", "true", check=False)
    assert result.returncode == 4 and "levels deep" in result.stderr
    assert not (vq.root / "jobs").exists() or not os.listdir(vq.root / "jobs")


def test_slurm_forms_and_memory_units_are_accepted(vq: Vq) -> None:
    job = vq.submit("--wall-time", "1-02:00:00", "--mem", "1.5G", "--", "true")
    spec = vq.spec(job)
    assert spec["wall_time_seconds"] == 93600 and spec["mem_mb"] == 1536


ESC_TITLE = "\x1b]0;owned\x07"


def test_resubmit_validates_the_job_name_like_submit(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")
    for name in ("../../x", "a/b", "evil\x1b[2J", ".."):
        result = vq.run("resubmit", job, "--job-name", name, check=False)
        assert result.returncode == 4, (name, result.stderr)
        assert result.stderr.startswith("vq: error: ") and "\x1b" not in result.stderr
        refused = vq.run("submit", "--job-name", name, "--", "true", check=False)
        assert refused.returncode == 4, (name, refused.stderr)
    ids = [row["id"] for row in vq.json("list")["jobs"]]
    assert ids == [job]  # nothing was created


def test_list_status_and_logs_escape_control_characters_unless_raw(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit(
        "--", "sh", "-c", f"printf '{ESC_TITLE}out'; printf 'bad{ESC_TITLE}\\n' >&2; exit 3"
    )
    vq.wait_state(job, "FAILED")
    for args in (("list",), ("status", job)):
        shown = vq.run(*args).stdout
        assert "\x1b" not in shown and "\x07" not in shown, shown
        assert "\\x1b" in shown
    assert "\\x1b" in vq.run("status", job).stdout.split("stderr tail")[1]
    assert "\x1b]0;owned" in vq.run("list", "--raw").stdout
    assert vq.json("status", job)["failure_tail"].startswith("bad\x1b]0;owned")
    # logs: exact bytes when piped, escaped on a terminal unless --raw
    assert vq.run("logs", job).stdout == f"{ESC_TITLE}out"
    assert _on_a_terminal(vq, "logs", job) == b"\\x1b]0;owned\\x07out"
    assert _on_a_terminal(vq, "logs", job, "--raw") == ESC_TITLE.encode() + b"out"


def _on_a_terminal(vq: Vq, *args: str) -> bytes:
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [VQ_BIN, *args], env=vq.env, stdout=follower, stderr=subprocess.PIPE, timeout=30
        )
        assert proc.returncode == 0, proc.stderr
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    return b"".join(chunks).replace(b"\r\n", b"\n")


def test_a_keyed_submit_of_a_special_file_is_refused_at_once(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    holder = tmp_path / "holder"
    holder.mkdir()
    (holder / "a.txt").write_text("a")
    os.mkfifo(holder / "pipe")  # no writer: reading it would block forever
    for source in ("/dev/zero", str(holder)):
        result = vq.run(
            "submit",
            source,
            "--idempotency-key",
            f"k-{len(source)}",
            "--",
            "true",
            check=False,
            timeout=30,
        )
        assert result.returncode == 4, result.stderr
        assert result.stderr.startswith("vq: error: ")
    job = vq.submit("--", "true")  # the daemon's threads are all free
    vq.wait_state(job, "COMPLETED", timeout=20)
    assert [row["id"] for row in vq.json("list")["jobs"]] == [job]


def test_a_fifo_campaign_file_is_refused_without_blocking(vq: Vq, tmp_path: Path) -> None:
    fifo = tmp_path / "campaign.json"
    os.mkfifo(fifo)
    result = vq.run("campaign", "validate", str(fifo), check=False, timeout=30)
    assert result.returncode == 4 and "FIFO" in result.stderr, result.stderr


def test_campaign_numbers_are_ascii(vq: Vq, tmp_path: Path) -> None:
    result = vq.run("campaign", "run", "x.json", str(tmp_path), "--interval", "nan", check=False)
    assert result.returncode == 2 and "finite" in result.stderr
