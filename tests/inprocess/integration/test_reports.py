"""``vq overview`` and ``vq usage`` (§6.3) end to end: real daemon, real jobs, real CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import Vq


def test_overview_counts_unreadable_specs(vq: Vq) -> None:
    vq.root.joinpath("queue").mkdir(parents=True)
    (vq.root / "queue" / "bbbbbbbbbbbb.json").write_text("{ truncated")
    snap = vq.json("overview")
    assert snap["quarantined"] == 1 and snap["total_jobs"] == 0
    assert "1 unreadable spec file(s)" in vq.run("overview").stdout


def test_usage_groups_wall_and_cpu_hours(vq: Vq) -> None:
    vq.start_daemon()
    both = vq.submit("--cpus", "2", "--tag", "x", "--tag", "y", "--", "sleep", "0.3")
    only_x = vq.submit("--tag", "x", "--job-name", "n", "--", "true")
    untagged = vq.submit("--job-name", "n", "--", "sh", "-c", "exit 1")
    for job in (both, only_x, untagged):
        vq.wait_state(job, "COMPLETED", "FAILED")

    report = vq.json("usage")
    assert report["by"] == "tag" and report["since"] is None
    groups = {g["key"]: g for g in report["groups"]}
    assert set(groups) == {"x", "y", None}
    assert groups["x"]["jobs"] == 2 and groups["y"]["jobs"] == 1 and groups[None]["jobs"] == 1
    y = groups["y"]
    assert y["wall_hours"] >= 0.3 / 3600
    assert y["cpu_hours"] == pytest.approx(2 * y["wall_hours"], abs=2e-6)
    assert report["total"]["jobs"] == 3
    spec = vq.spec(both)
    wall = datetime.fromisoformat(spec["finished_at"]) - datetime.fromisoformat(spec["started_at"])
    assert y["wall_hours"] == pytest.approx(wall.total_seconds() / 3600, abs=2e-6)

    by_state = {g["key"]: g["jobs"] for g in vq.json("usage", "--by", "state")["groups"]}
    assert by_state == {"COMPLETED": 2, "FAILED": 1}
    by_name = {g["key"]: g["jobs"] for g in vq.json("usage", "--by", "name")["groups"]}
    assert by_name == {"n": 2, None: 1}
    days = {
        datetime.fromisoformat(vq.spec(job)["started_at"]).astimezone(UTC).date().isoformat()
        for job in (both, only_x, untagged)
    }
    by_day = vq.json("usage", "--by", "day")["groups"]
    assert [g["key"] for g in by_day] == sorted(days)
    assert sum(g["jobs"] for g in by_day) == 3

    assert vq.json("usage", "--since", "1h")["total"]["jobs"] == 3
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert vq.json("usage", "--since", future)["total"]["jobs"] == 0
    assert "no jobs have run since then" in vq.run("usage", "--since", future).stdout
    bad = vq.run("usage", "--since", "yesterday-ish", check=False)
    assert bad.returncode == 4 and "neither an ISO time nor a duration" in bad.stderr
    by_host = vq.run("usage", "--by", "host")  # no hosts configured: this queue alone
    assert by_host.stdout.split("\n")[1].split()[:2] == ["localhost", "3"]
    total = vq.json("usage", "--by", "total")
    assert total["groups"] == [{"key": "total", **total["total"]}]
    assert total["total"]["jobs"] == 3

    text = vq.run("usage").stdout
    assert "TAG" in text and "total" in text and "(none)" in text

    vq.stop_daemon()  # usage reads the spec files: no daemon needed
    assert vq.json("usage")["total"] == report["total"]


def test_queue_eta_follows_the_queue_between_status_calls(vq: Vq) -> None:
    """The daemon keeps the ETA's basis between calls; every change must reach it."""
    vq.start_daemon("--max-jobs", "1")
    vq.run("wait", vq.submit("--", "true"))  # history: one finished run
    blocker = vq.submit("--wall-time", "2m", "--", "sleep", "60")
    vq.wait_state(blocker, "RUNNING")
    job = vq.submit("--", "true")

    def ahead() -> int:
        eta = vq.status(job)["queue_eta"]
        assert eta["basis"] in ("declared wall time", "declared wall time and dispatch history")
        return int(eta["jobs_ahead"])

    assert ahead() == 0
    assert ahead() == 0  # asked again: the same answer
    urgent = vq.submit("--priority", "5", "--", "true")
    assert ahead() == 1
    vq.run("kill", urgent)
    assert ahead() == 0
    vq.run("kill", blocker)
    vq.wait_state(job, "COMPLETED")
    assert "queue_eta" not in vq.status(job)
