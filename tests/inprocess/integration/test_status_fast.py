"""``vq status ID`` answered without Click (vq.cli.status_fast) prints exactly what the
Click command prints, and leaves every other case (no daemon, an unknown id, a prefix)
to the Click command and its error contract."""

from __future__ import annotations

import json
import subprocess

from tests.conftest import VQ_BIN, Vq


def _imports(vq: Vq, *args: str, columns: str = "80") -> set[str]:
    """The modules ``vq ARGS`` imports (Python's own import-time report)."""
    env = {**vq.env, "PYTHONPROFILEIMPORTTIME": "1", "COLUMNS": columns}
    proc = subprocess.run([VQ_BIN, *args], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if "|" in line}


def test_the_fast_answer_is_the_click_answer(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--job-name", "fast-path", "--", "sh", "-c", "exit 3")
    vq.wait_state(job, "FAILED")
    prefix = job[:11]  # a prefix is resolved by the Click command
    fast, slow = vq.run("status", job, "--json"), vq.run("status", prefix, "--json")
    assert json.loads(fast.stdout) == json.loads(slow.stdout)
    assert fast.stdout == slow.stdout
    human_fast, human_slow = vq.run("status", job), vq.run("status", prefix)
    assert human_fast.stdout == human_slow.stdout
    assert "fast-path" in human_fast.stdout and "FAILED" in human_fast.stdout
    assert vq.run("status", job, "--raw").stdout == vq.run("status", prefix, "--raw").stdout
    assert "click" not in _imports(vq, "status", job, "--json")  # the fast path answered
    assert "click" in _imports(vq, "status", prefix, "--json")
    # Piped, a table that fits (the temp root's paths need more than 80 columns) is
    # written without rich; one that would wrap is rich's.
    assert "rich.console" not in _imports(vq, "status", job, columns="200")
    assert "rich.console" in _imports(vq, "status", job, columns="20")


def test_an_unknown_id_keeps_the_error_contract(vq: Vq) -> None:
    vq.start_daemon()
    proc = vq.run("status", "0123456789ab", check=False)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.startswith("vq: error: ") and "hint:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_without_a_daemon_the_disk_answers(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")
    vq.stop_daemon()
    assert vq.json("status", job)["state"] == "COMPLETED"
