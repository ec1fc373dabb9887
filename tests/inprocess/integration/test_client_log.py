"""The CLI's ``client.log`` (§2.4): one line per mutating call, rotated at a size bound."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Vq
from vq.cli import client_log


def _lines(vq: Vq) -> list[dict[str, object]]:
    return [json.loads(line) for line in (vq.root / "client.log").read_text().splitlines()]


def test_mutating_calls_are_logged_with_verb_job_and_outcome(vq: Vq) -> None:
    job = vq.submit("--not-before", "1h", "--", "true")  # no daemon: the CLI writes
    vq.run("status", job)  # a read: not logged
    vq.run("list")
    vq.run("kill", job)
    again = vq.run("kill", job, check=False)  # already ended
    vq.run("daemon", "drain", "--reason", "x")
    lines = _lines(vq)
    assert [line["verb"] for line in lines] == ["submit", "kill", "kill", "daemon drain"]
    assert lines[0]["jobs"] == [job] and lines[0]["outcome"] == "ok"
    assert lines[1]["jobs"] == [job] and lines[1]["exit_code"] == 0
    assert lines[2]["outcome"] == ("ok" if again.returncode == 0 else "error")
    assert lines[2]["exit_code"] == again.returncode
    assert lines[3]["jobs"] == []
    assert all(str(line["ts"]).endswith("+00:00") for line in lines)
    assert (vq.root / "client.log").stat().st_mode & 0o777 == 0o600


def test_the_log_rotates_at_its_size_bound(tmp_path: Path) -> None:
    root = tmp_path / "state"
    root.mkdir()
    env = {"VQ_STATE_DIR": str(root)}
    log = root / "client.log"
    log.write_bytes(b"x" * client_log.MAX_BYTES)
    client_log.record(["kill", "0123456789ab"], 0, env)
    assert (root / "client.log.1").stat().st_size == client_log.MAX_BYTES
    (line,) = log.read_text().splitlines()
    assert json.loads(line)["jobs"] == ["0123456789ab"]
    client_log.record(["status", "0123456789ab"], 0, env)  # a read verb
    client_log.record(["--debug", "daemon", "throttle", "--max-jobs", "1"], 6, env)
    verbs = [json.loads(x)["verb"] for x in log.read_text().splitlines()]
    assert verbs == ["kill", "daemon throttle"]
    client_log.record(["kill", "0123456789ab"], 0, {"VQ_STATE_DIR": str(tmp_path / "none")})
    assert not (tmp_path / "none").exists()  # never creates a state root


def test_group_verbs_are_logged_by_their_full_name_and_reads_are_not(vq: Vq) -> None:
    vq.root.mkdir(parents=True)
    vq.run("web", "token", "list")  # a read inside a group of mutations
    vq.run("pack", "show", "sweep", check=False)  # a read
    vq.run("daemon", "health", check=False)  # a read
    refused = vq.run("pack", "seal", "sweep", check=False)  # no such pack: still logged
    resolve = vq.run("scheduler", "resolve", "0123456789ab", check=False)
    created = vq.run("web", "token", "create", "--scope", "read", "ci-reader", check=False)
    assert refused.returncode != 0 and resolve.returncode != 0
    lines = _lines(vq)
    assert [line["verb"] for line in lines] == [
        "pack seal",
        "scheduler resolve",
        "web token create",
    ]
    assert lines[0]["exit_code"] == refused.returncode and lines[0]["outcome"] == "error"
    assert lines[1]["jobs"] == ["0123456789ab"]
    assert lines[2]["exit_code"] == created.returncode
