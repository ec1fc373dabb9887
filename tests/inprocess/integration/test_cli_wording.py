"""First-day CLI papercuts: hints, did-you-mean, zero ages, tables instead of dicts."""

from __future__ import annotations

import json

from tests.conftest import Vq


def test_submit_without_double_dash_says_where_the_command_goes(vq: Vq) -> None:
    proc = vq.run("submit", "python3", "-c", "print(1)", check=False)
    assert proc.returncode == 2
    assert "No such option '-c'" in proc.stderr
    assert "hint: put the job's command after `--`" in proc.stderr
    assert not (vq.root / "queue").exists() or not list((vq.root / "queue").glob("*.json"))


def test_mistyped_verbs_get_a_did_you_mean(vq: Vq) -> None:
    proc = vq.run("stauts", "abcd", check=False)
    assert proc.returncode == 2
    assert "vq: error: no such command 'stauts'" in proc.stderr
    assert "hint: did you mean `vq status`?" in proc.stderr
    far = vq.run("frobnicate", check=False)
    assert far.returncode == 2 and "`vq --help` lists the commands" in far.stderr


def test_cleanup_older_than_zero_means_any_age(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "true")
    vq.run("wait", job)
    report = json.loads(vq.run("cleanup", "--older-than", "0s", "--json").stdout)
    assert [item["id"] for item in report["jobs"]] == [job]
    text = vq.run("cleanup", "--older-than", "0").stdout
    assert "would have their workdirs removed" in text and "would be workdir swept" not in text


def test_throttle_prints_a_table_not_a_dict(vq: Vq) -> None:
    vq.start_daemon("--max-jobs", "4")
    out = vq.run("daemon", "throttle", "--max-jobs", "1", "--for", "1h").stdout
    assert "{" not in out and "'max_jobs'" not in out
    lines = out.splitlines()
    assert lines[0].startswith("throttled until ")
    assert lines[1].split() == ["CAP", "THROTTLE", "EFFECTIVE"]
    assert lines[2].split() == ["max_jobs", "1", "1"]
    data = json.loads(vq.run("daemon", "throttle", "--max-jobs", "2", "--json").stdout)
    assert data["throttle"]["max_jobs"] == 2
    vq.run("daemon", "throttle", "--clear")


def test_pending_reason_is_not_said_twice(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "1")
    blocker = vq.submit("--", "sleep", "30")
    vq.wait_state(blocker, "RUNNING")
    job = vq.submit("--", "true")
    text = vq.run("status", job).stdout
    assert "waiting for CPUs" in text and "waiting for  waiting for" not in text
    assert "pending " in text
    vq.run("kill", blocker)


def test_submit_help_example_stays_on_one_line(vq: Vq) -> None:
    env = {**vq.env, "COLUMNS": "80"}
    out = Vq(vq.root, env).run("submit", "--help").stdout
    example = "vq submit --cpus 2 --mem-mb 500 --wall-time 10m -- python3 -c 'print(42)'"
    assert any(line.strip() == example for line in out.splitlines()), out


def test_mem_mb_with_a_unit_points_to_mem(vq: Vq) -> None:
    proc = vq.run("submit", "--mem-mb", "2G", "--", "true", check=False)
    assert proc.returncode == 2
    assert "'2G' is not a whole number of megabytes; for a size with a unit use --mem 2G" in (
        proc.stderr
    )
    assert "valid integer" not in proc.stderr and "Traceback" not in proc.stderr
    words = vq.run("submit", "--cpus", "two", "--", "true", check=False)
    assert words.returncode == 2 and "'two' is not a whole number" in words.stderr
    spec = json.loads(vq.run("submit", "--json", "--mem", "2G", "--", "true").stdout)
    assert spec["mem_mb"] == 2048
