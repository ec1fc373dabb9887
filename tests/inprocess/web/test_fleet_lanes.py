"""Scheduler lanes in the fleet console: the host's lane summaries (pure), and a host
whose snapshot carries lanes shows them under its row and its lane jobs' ``lane``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.inprocess.web.test_fleet_source import ScriptedFleet, ScriptedHost
from vq.config.hosts import HostSettings
from vq.hosts.health import HostHealth
from vq.web.fleet.lanes import lane_summaries
from vq.web.fleet.source import FleetSource
from vq.web.fleet.views import host_rows
from vq.web.pages.render import ENV


def _lane(name: str, dialect: str, accounting: str = "sacct") -> Any:
    settings = HostSettings(
        ssh="login.lab",
        scheduler_dialect=dialect,
        scheduler_accounting=accounting,
        scratch_root="/scratch/vq",
    )
    lane = settings.lane(name)
    assert lane is not None
    return lane


def test_lane_summaries_count_the_lanes_unfinished_jobs_and_carry_health() -> None:
    lanes = {"gpu": _lane("gpu", "slurm", "none"), "old": _lane("old", "torque")}
    rows = [
        {"id": "a" * 12, "state": "PENDING", "scheduler_target": "gpu"},
        {
            "id": "b" * 12,
            "state": "RUNNING",
            "scheduler_target": "gpu",
            "scheduler_state": "queued",
        },
        {
            "id": "c" * 12,
            "state": "RUNNING",
            "scheduler_target": "gpu",
            "scheduler_state": "running",
        },
        {"id": "d" * 12, "state": "RUNNING", "scheduler_target": None},
    ]
    health = {"gpu": HostHealth("gpu", "ok", last_ok_at="2026-01-01T00:00:00+00:00")}
    warning = {"code": "lane_blind", "message": "m", "hint": "h"}
    summaries = lane_summaries(lanes, rows, health, {"c" * 12: warning})
    assert [s["name"] for s in summaries] == ["gpu", "old"]
    gpu, old = summaries
    assert (gpu["kind"], gpu["tracked"], gpu["queued"], gpu["running"]) == ("slurm", 3, 2, 1)
    assert gpu["status"] == "ok" and gpu["last_ok_at"] == "2026-01-01T00:00:00+00:00"
    assert gpu["warnings"] == [{"job": "c" * 12, **warning}]
    assert (old["kind"], old["tracked"], old["status"], old["warnings"]) == (
        "torque",
        0,
        "unknown",
        [],
    )


def test_a_hosts_lanes_show_under_it_and_its_lane_jobs_name_their_lane(tmp_path: Path) -> None:
    warning = {"job": "a" * 12, "code": "lane_blind", "message": "gone quiet", "hint": "sacct"}
    lane = {
        "name": "gpu",
        "kind": "slurm",
        "tracked": 1,
        "queued": 0,
        "running": 1,
        "status": "ok",
        "last_ok_at": "2026-01-01T00:00:00+00:00",
        "last_error": None,
        "warnings": [warning],
    }
    shown = {"cpus": 1, "tags": [], "submitted_at": None, "elapsed_seconds": 1}
    rows = [
        {"id": "a" * 12, "state": "RUNNING", "scheduler_target": "gpu", **shown},
        {"id": "b" * 12, "state": "RUNNING", "scheduler_target": None, **shown},
    ]
    snapshot = {"summary": {}, "jobs": rows, "total_jobs": 2, "lanes": [lane]}
    older = {"summary": {}, "jobs": [], "total_jobs": 0}  # a vq without lane reports
    hosts = {"h1": ScriptedHost(snapshot), "h2": ScriptedHost(older)}
    source = FleetSource(lambda: ScriptedFleet(tmp_path, hosts))
    h1, h2 = source.hosts()
    assert h1.as_dict()["lanes"] == [lane] and h2.as_dict()["lanes"] == []
    assert [(r["id"][0], r["lane"]) for r in h1.jobs] == [("a", "gpu"), ("b", None)]
    assert host_rows([h1])[0]["lanes"] == [lane]
    assert sum(host.calls for host in hosts.values()) == 2  # the one snapshot read per host
    page = ENV.get_template("fleet/_fleet.html").render(
        hosts=host_rows([h1, h2]), jobs=h1.jobs, total=2, pages=1, page=1, incomplete=[]
    )
    card = page.split('data-host="h1"', 1)[1].split("</section>", 1)[0]
    assert 'data-lane="gpu"' in card and "slurm" in card and "gone quiet" in card
    assert 'data-lane-count="running">1<' in card
    assert "lane" not in page.split('data-host="h2"', 1)[1].split("</section>", 1)[0]
    # job a's LANE cell; job b is no lane job
    assert page.count('<span class="lane" data-lane="gpu">gpu</span>') == 1
    source.close()
