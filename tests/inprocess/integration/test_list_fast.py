"""``vq list --json`` answered without Click (vq.cli.list_fast) prints exactly what the
Click command prints, and leaves every other form (another option, a bad state, no
daemon) to the Click command and its error contract."""

from __future__ import annotations

import json

from tests.conftest import Vq
from tests.inprocess.integration.test_status_fast import _imports


def test_the_fast_listing_is_the_click_listing(vq: Vq) -> None:
    vq.start_daemon()
    done = vq.submit("--job-name", "fast-list", "--", "true")
    vq.wait_state(done, "COMPLETED")
    for verb in ("list", "queue"):
        for states in (
            [],
            ["--state", "completed"],
            ["--state", "RUNNING", "--state", "COMPLETED"],
        ):
            fast = vq.run(verb, "--json", *states)
            slow = vq.run(verb, "--json", "--raw", *states)  # --raw: the Click command
            assert fast.stdout == slow.stdout
    rows = json.loads(vq.run("list", "--json", "--state", "COMPLETED").stdout)["jobs"]
    assert [row["id"] for row in rows] == [done]
    assert json.loads(vq.run("list", "--json", "--state", "RUNNING").stdout)["jobs"] == []
    assert "click" not in _imports(vq, "list", "--json", "--state", "RUNNING")
    assert "click" in _imports(vq, "list", "--json", "--raw")


def test_a_bad_state_keeps_the_error_contract(vq: Vq) -> None:
    vq.start_daemon()
    proc = vq.run("list", "--json", "--state", "NOPE", check=False)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.startswith("vq: error: ") and "hint:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_without_a_daemon_the_disk_answers(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")
    vq.stop_daemon()
    rows = vq.json("list", "--state", "COMPLETED")["jobs"]
    assert [row["id"] for row in rows] == [job]
