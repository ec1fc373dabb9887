"""A smoke test per verb through the installed console script and a daemon process.

The answers and state behind each verb are tested in-process (``tests/inprocess``); these
check that every verb still starts as a user starts it (entry point, lazy imports, exit
codes, a daemon process over its socket), including the verbs whose other tests all
moved in-process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Vq

#: Verbs whose real use needs a campaign, a lane, a root tree or a configured program:
#: their help must still load (the lazy import of their module) and exit 0.
HELP_ONLY = ("campaign", "pack", "publish", "runtime", "scheduler", "admin", "web", "config")


def test_the_everyday_verbs_answer_through_the_console_script(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    done = vq.submit("--job-name", "smoke", "--", "sh", "-c", "echo out > result.txt")
    vq.wait_state(done, "COMPLETED")
    assert "smoke" in vq.run("queue").stdout
    assert done in vq.run("list").stdout
    assert vq.status(done)["state"] == "COMPLETED"
    events = vq.json("events", done)
    kinds = [event["kind"] for event in events]
    assert kinds[0] == "submitted" and len(kinds) > 1, events  # and what followed
    vq.run("logs", done)
    assert vq.run("wait", done).returncode == 0
    again = vq.run("resubmit", done).stdout.split()[0]
    vq.wait_state(again, "COMPLETED")
    vq.run("fetch", done, str(tmp_path / "fetched"))
    assert (tmp_path / "fetched").exists()
    sleeper = vq.submit("--", "sleep", "300")
    vq.wait_state(sleeper, "RUNNING")
    vq.run("pause", sleeper)
    vq.wait_state(sleeper, "SUSPENDED")
    vq.run("resume", sleeper)
    vq.wait_state(sleeper, "RUNNING")
    vq.run("kill", sleeper)
    vq.wait_state(sleeper, "KILLED")
    for verb in ("overview", "usage", "profiles", "programs", "hosts", "cleanup", "doctor"):
        proc = vq.run(verb, check=False)
        assert proc.returncode in (0, 1), (verb, proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr, (verb, proc.stderr)
    vq.json("top")


@pytest.mark.parametrize("verb", HELP_ONLY)
def test_the_other_verbs_load_their_help(vq: Vq, verb: str) -> None:
    assert "Usage: vq " + verb in vq.run(verb, "--help").stdout
