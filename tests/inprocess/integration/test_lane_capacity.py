"""Scheduler lane jobs and this workstation's capacity (§6.3), through the CLI and the
console's JSON: ``vq top``, ``vq overview`` and ``GET /api/v1/queue`` never count a lane
job against this host's caps; ``vq usage`` charges the scheduler's wall time; a submit to
a lane never warns about this host's caps."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Vq
from tests.inproc_support import InprocWeb
from tests.lane_capacity_support import write_lane_jobs

LANE_CONFIG = """[hosts.cluster]
ssh = "vq-no-such-host.invalid"
scheduler_dialect = "slurm"
scratch_root = "/scratch/me"
"""


def _advertise_two_cpus(vq: Vq) -> None:
    """Leave the caps a daemon with ``--max-cpus 2`` advertised (then no daemon runs, so
    nothing touches the lane specs: the reports read the disk)."""
    vq.start_daemon("--max-cpus", "2")
    vq.stop_daemon()


def test_top_and_overview_never_count_lane_jobs_against_this_host(vq: Vq) -> None:
    _advertise_two_cpus(vq)
    write_lane_jobs(vq)

    top = vq.json("top")
    assert top["capacity"]["cpus"] == {"reserved": 0, "cap": 2}
    assert top["capacity"]["jobs"]["reserved"] == 0
    assert top["lanes"]["jobs"] == 2 and top["lanes"]["cpus"] == 5
    text = " ".join(vq.run("top").stdout.split())  # rich wraps at the terminal's width
    assert "0/2 reserved (0%)" in text
    assert "5/2" not in text and "150%" not in text and "250%" not in text
    assert "2 job(s), 5 cpus on clusters" in text
    assert "not counted against this host's caps" in text

    overview = vq.json("overview")
    assert overview["running"]["cpus"] == 0 and overview["reserved"]["cpus"] == 0
    assert overview["unconfirmed_scheduler_jobs"] == 1
    assert overview["unconfirmed_scheduler_cpus"] == 3
    assert overview["pending_cpus"] == 3  # the queued lane job, counted once
    assert overview["lanes"]["running_jobs"] == 1 and overview["lanes"]["running_cpus"] == 2
    text = " ".join(vq.run("overview").stdout.split())
    assert "cpus: 0/2 reserved (0%), 0 running, 3 pending" in text
    assert "1 running (2 cpus), 1 not confirmed running (3 cpus, in pending)" in text


def test_usage_charges_the_scheduler_wall_time_not_the_queue_wait(vq: Vq) -> None:
    write_lane_jobs(vq)
    usage = vq.json("usage", "--by", "name")
    groups = {group["key"]: group for group in usage["groups"]}
    # Claimed an hour before it ended, ran one second on the cluster (4 cpus).
    assert groups["packed"]["wall_hours"] == round(1 / 3600, 6)
    assert groups["packed"]["cpu_hours"] == round(4 / 3600, 6)
    assert groups["queued"]["wall_hours"] == 0  # still in Slurm's queue
    assert groups["running"]["wall_hours"] == round(300 / 3600, 6)


def test_the_consoles_capacity_json_counts_only_this_hosts_jobs(vq: Vq, web: InprocWeb) -> None:
    _advertise_two_cpus(vq)
    write_lane_jobs(vq)
    vq.start_daemon("--max-cpus", "2")  # the cockpit's caps come from a live daemon
    try:
        summary = web.http.get("/api/v1/queue").json()
        assert summary["caps"]["max_cpus"] == 2
        assert summary["local_active"] == 0 and summary["local_active_cpus"] == 0
        assert summary["lanes"]["jobs"] == 2 and summary["lanes"]["cpus"] == 5
        fragment = web.http.get("/fragments/summary").text
        assert 'data-lane-jobs="2"' in fragment
        assert "5\n          / 2" not in fragment and " full" not in fragment
    finally:
        vq.stop_daemon()


def test_a_lane_submit_never_warns_about_this_hosts_caps(vq: Vq) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(LANE_CONFIG)
    vq.start_daemon("--max-cpus", "2", "--max-mem-mb", "1000")
    try:
        lane = vq.run("submit", "cluster", "--cpus", "64", "--mem-mb", "64000", "--", "true")
        assert "exceeds the configured cap" not in lane.stderr
        assert "stays PENDING" not in lane.stderr
        answer = vq.json("submit", "cluster", "--cpus", "64", "--json", "--", "true")
        assert answer["capacity_warnings"] == []
        local = vq.run("submit", "--cpus", "64", "--", "true")  # this host's caps do apply
        assert "requested cpus 64 exceeds the configured cap 2" in local.stderr
    finally:
        vq.stop_daemon()
