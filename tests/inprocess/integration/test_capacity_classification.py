"""The configured-cap classification (§4.3, §5.1): base caps only, daemon or not."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Vq


def _row(vq: Vq, job: str) -> dict[str, Any]:
    return next(r for r in vq.json("list")["jobs"] if r["id"] == job)


def test_a_throttle_is_an_ordinary_blocker_not_an_overage(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "2", "--max-jobs", "4")
    vq.run("daemon", "throttle", "--max-cpus", "1")
    ping = vq.json("daemon", "status")
    assert ping["caps"]["max_cpus"] == 2 and ping["effective_caps"]["max_cpus"] == 1

    submitted = json.loads(vq.run("submit", "--json", "--cpus", "2", "--", "true").stdout)
    assert submitted["capacity_warnings"] == []
    job = submitted["id"]
    view = vq.status(job)
    assert view["state"] == "PENDING"
    assert view["pending_over_capacity"] is False
    assert view["configured_capacity_overages"] == []
    assert view["pending_reason"].startswith("throttled: max_cpus is 1 (throttled from 2)")
    assert view["queue_eta"]["basis"] != "over configured capacity"
    assert _row(vq, job)["pending_over_capacity"] is False
    assert vq.json("overview")["over_capacity_pending_jobs"] == 0
    assert "over cap" not in vq.run("list").stdout

    vq.run("daemon", "throttle", "--clear")  # the job was only waiting
    vq.wait_state(job, "COMPLETED")


def test_without_a_daemon_the_last_advertised_caps_classify(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "2")
    big = vq.submit("--cpus", "4", "--", "true")
    small = vq.submit("--cpus", "1", "--", "sleep", "0")
    vq.wait_state(small, "COMPLETED")
    vq.stop_daemon()
    snapshot = json.loads((vq.root / "daemon_capacity.json").read_text())
    assert snapshot["max_cpus"] == 2 and snapshot["effective"]["max_cpus"] == 2
    # The caller's own configuration would let the job fit: it must not decide.
    config = vq.root.parent / "config"
    config.mkdir(exist_ok=True)
    (config / "config.toml").write_text("[daemon]\nmax_cpus = 64\n")

    assert vq.status(big)["pending_over_capacity"] is True
    assert vq.status(big)["configured_capacity_overages"] == [
        {"resource": "cpus", "requested": 4, "capacity": 2}
    ]
    assert _row(vq, big)["pending_over_capacity"] is True
    assert vq.json("overview")["over_capacity_pending_jobs"] == 1
    assert "PENDING ⚠ over cap" in vq.run("list").stdout
    human = " ".join(vq.run("overview").stdout.split())  # unwrapped
    assert "read from disk; caps as last advertised" in human
    assert "1 pending job(s) exceed the configured capacity (max_cpus 2" in human

    (vq.root / "daemon_capacity.json").write_text("{ torn")
    assert vq.status(big)["pending_over_capacity"] is None
    assert _row(vq, big)["pending_over_capacity"] is None
    assert vq.json("overview")["over_capacity_pending_jobs"] is None
    assert "read from disk; caps unknown" in " ".join(vq.run("overview").stdout.split())
    (vq.root / "daemon_capacity.json").unlink()
    assert vq.status(big)["pending_over_capacity"] is None
