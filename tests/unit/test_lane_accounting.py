"""Scheduler lane jobs in the pure reports (§6.3): they never count against this host's
capacity, overview splits confirmed running from unconfirmed, and usage charges the
scheduler-reported wall time, never the time spent in the cluster's queue."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

from vq.dialects._values import format_slurm_duration, slurm_duration_seconds
from vq.dialects.slurm_alloc import parse_sacct
from vq.domain.admission import Caps
from vq.packing.evidence import attempt_evidence, slot_elapsed
from vq.services.reports import build_overview, build_usage
from vq.services.top import build_top

NOW = datetime(2026, 5, 10, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
CAPS = Caps(max_jobs=4, max_cpus=2, max_mem_mb=4000, default_job_mem_mb=None)
_ids = count(1)


def row(state: str, lane: str | None = None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": f"{next(_ids):012x}",
        "job_name": None,
        "state": state,
        "command": ["true"],
        "tags": [],
        "cpus": 1,
        "mem_mb": None,
        "priority": 0,
        "submitted_at": NOW - 10 * HOUR,
        "started_at": None,
        "finished_at": None,
        "scheduler_target": lane,
        "scheduler_state": None,
        "wall_time_seconds": None,
    }
    base.update(fields)
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in base.items()}


def _mixed() -> list[dict[str, Any]]:
    """One local job of 1 cpu, and three lane jobs: 4 cpus confirmed running, 8 cpus
    queued in Slurm, 16 cpus finishing; plus a pending lane job of 32 cpus."""
    return [
        row("RUNNING", cpus=1, mem_mb=100, started_at=NOW - HOUR),
        row("RUNNING", "cluster", cpus=4, scheduler_state="running", started_at=NOW - HOUR),
        row("RUNNING", "cluster", cpus=8, scheduler_state="queued", started_at=NOW - HOUR),
        row("RUNNING", "cluster", cpus=16, scheduler_state="finishing", started_at=NOW - HOUR),
        row("PENDING", "cluster", cpus=32),
    ]


def test_top_reserves_only_this_hosts_jobs_and_counts_lane_jobs_apart() -> None:
    snap = build_top(_mixed(), {}, CAPS, NOW)
    assert snap["capacity"]["cpus"] == {"reserved": 1, "cap": 2}
    assert snap["capacity"]["mem_mb"] == {"reserved": 100, "cap": 4000}
    assert snap["capacity"]["jobs"] == {"reserved": 1, "cap": 4}
    assert len(snap["jobs"]) == 4  # every live job is still listed
    assert snap["lanes"] == {
        "jobs": 3,
        "cpus": 28,
        "running_jobs": 1,
        "running_cpus": 4,
        "unconfirmed_scheduler_jobs": 2,
        "unconfirmed_scheduler_cpus": 24,
    }


def test_overview_gives_lane_jobs_the_confirmed_and_unconfirmed_fields() -> None:
    snap = build_overview(_mixed(), CAPS, NOW)
    assert snap["running"] == {"jobs": 1, "cpus": 1, "mem_mb": 100}
    assert snap["reserved"] == {"jobs": 1, "cpus": 1, "mem_mb": 100}
    assert snap["unconfirmed_scheduler_jobs"] == 2
    assert snap["unconfirmed_scheduler_cpus"] == 24
    # The unconfirmed subset stays in the pending total, once (§6.3).
    assert snap["pending_cpus"] == 32 + 24
    assert snap["lanes"]["running_jobs"] == 1 and snap["lanes"]["running_cpus"] == 4


def test_usage_charges_a_lane_jobs_scheduler_wall_time_not_its_queue_wait() -> None:
    # Claimed an hour before it ended; Slurm says it ran one second (the trial's packed task).
    packed = row(
        "COMPLETED",
        "cluster",
        cpus=4,
        started_at=NOW - HOUR,
        finished_at=NOW,
        scheduler_state="ended",
        scheduler_walltime_used="0:00:01",
    )
    local = row("COMPLETED", cpus=2, started_at=NOW - HOUR, finished_at=NOW)
    report = build_usage([packed, local], "total", None, NOW)
    assert report["total"]["jobs"] == 2
    assert report["total"]["wall_hours"] == round((1 + 3600) / 3600, 6)
    assert report["total"]["cpu_hours"] == round((4 * 1 + 2 * 3600) / 3600, 6)


def test_usage_charges_nothing_for_a_lane_job_still_in_the_clusters_queue() -> None:
    queued = row("RUNNING", "cluster", cpus=8, started_at=NOW - HOUR, scheduler_state="queued")
    running = row(
        "RUNNING",
        "cluster",
        cpus=2,
        started_at=NOW - HOUR,
        scheduler_state="running",
        scheduler_walltime_used="10:00",
    )
    unobserved = row("COMPLETED", "cluster", started_at=NOW - HOUR, finished_at=NOW)
    report = build_usage([queued, running, unobserved], "total", None, NOW)
    # queued: 0; running: 10 min as squeue reported; nothing reported at all: vq's times.
    assert report["total"]["wall_hours"] == round((0 + 600 + 3600) / 3600, 6)
    assert report["total"]["cpu_hours"] == round((0 + 2 * 600 + 3600) / 3600, 6)


def test_a_slurm_duration_reads_back() -> None:
    for seconds in (0, 1, 59, 61, 3599, 3600, 86399, 86400, 90061, 40 * 86400 + 7):
        text = format_slurm_duration(seconds)
        assert slurm_duration_seconds(text) == seconds, text
    assert format_slurm_duration(1) == "0:00:01"
    assert format_slurm_duration(90061) == "1-01:01:01"


ALLOC = "0123456789abcdef"
SACCT = (
    f"4242|vqp-{ALLOC}|vq-pack:{ALLOC}|COMPLETED|0:0|2026-05-10T11:00:00|2026-05-10T11:59:50"
    "|2026-05-10T12:00:02\n"
    f"4242.batch|batch||COMPLETED|0:0|2026-05-10T11:59:50|2026-05-10T11:59:50"
    "|2026-05-10T12:00:02\n"
    f"4242.0|vqp-{ALLOC}-0||COMPLETED|0:0|2026-05-10T11:59:51|2026-05-10T11:59:51"
    "|2026-05-10T11:59:52\n"
    f"4242.1|vqp-{ALLOC}-1||COMPLETED|0:0|2026-05-10T11:59:51|2026-05-10T11:59:51"
    "|Unknown\n"
)


def test_a_packed_slots_wall_time_is_its_steps_not_the_allocations_queue_wait() -> None:
    records = parse_sacct(SACCT, ALLOC)
    assert slot_elapsed(records[0], ALLOC) == {0: 1.0}  # slot 1's step has no end yet
    evidence = attempt_evidence(ALLOC, "4242", ["a", "b"], None, records, {0: 0, 1: 0})
    assert [task.elapsed_seconds for task in evidence.tasks] == [1.0, None]
    assert evidence.start == "2026-05-10T11:59:50"
