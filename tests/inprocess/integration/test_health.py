"""``vq daemon health`` (§6.5): the lifecycle check a monitor can rely on."""

from __future__ import annotations

import json
import os
import signal

from tests.conftest import Vq, wait_until
from tests.health_support import check_named, failing_health

CHECKS = ["loop", "dispatch", "fork_server", "index", "state_root"]


def test_a_healthy_daemon_passes_everycheck_named(vq: Vq) -> None:
    assert vq.run("daemon", "health", check=False).returncode == 5  # no daemon
    offline = vq.run("daemon", "health", "--json", check=False)
    assert offline.returncode == 5 and json.loads(offline.stdout)["running"] is False
    vq.start_daemon()
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")
    answer = vq.json("daemon", "health")
    assert answer["ok"] is True and answer["running"] is True
    assert [c["name"] for c in answer["checks"]] == CHECKS
    assert all(c["ok"] for c in answer["checks"]), answer
    vq.run("daemon", "drain", "--reason", "maintenance")
    held = vq.json("daemon", "health")
    dispatch = next(c for c in held["checks"] if c["name"] == "dispatch")
    assert held["ok"] and dispatch["detail"] == "held: drain (new): maintenance"
    text = vq.run("daemon", "health").stdout
    assert "ok    loop" in text and text.rstrip().endswith("healthy")


def test_an_index_that_drifted_from_the_disk_fails(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--not-before", "2h", "--", "true")  # stays PENDING
    assert vq.json("daemon", "health")["ok"] is True
    path = vq.root / "queue" / f"{job}.json"
    spec = json.loads(path.read_text())
    spec["state"] = "KILLED"  # changed behind the daemon's back, no wake
    path.write_text(json.dumps(spec))
    result = wait_until(
        lambda: (r := vq.run("daemon", "health", "--json", check=False)).returncode == 1 and r
    )
    answer = json.loads(result.stdout)
    index = next(c for c in answer["checks"] if c["name"] == "index")
    assert answer["ok"] is False and index["ok"] is False
    assert f"{job} is KILLED on disk, PENDING in the index" in index["detail"]


def test_a_fork_server_that_does_not_answer_fails_itscheck_named(vq: Vq) -> None:
    vq.start_daemon()
    detail = check_named(vq.json("daemon", "health"), "fork_server")["detail"]
    pid = int(detail.split()[1])  # "pid N answers"
    os.kill(pid, signal.SIGSTOP)
    try:
        answer = failing_health(vq, "fork_server")
        assert check_named(answer, "fork_server")["detail"] == (
            f"the fork server (pid {pid}) does not answer"
        )
        text = vq.run("daemon", "health", check=False)
        assert text.returncode == 1 and "FAIL  fork_server" in text.stdout
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_until(lambda: vq.run("daemon", "health", check=False).returncode == 0)
