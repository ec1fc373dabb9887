"""The pure report models (§6.3): overview, usage accounting and the queue ETA."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

import pytest

from vq.domain.admission import Caps
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.services.reports import (
    active_seconds,
    build_overview,
    build_usage,
    caps_from_ping,
    eta_basis,
    is_over_capacity,
    queue_eta,
    report_row,
    state_counts,
)

NOW = datetime(2026, 5, 10, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
CAPS = Caps(max_jobs=None, max_cpus=8, max_mem_mb=16000, default_job_mem_mb=256)
_ids = count(1)


def row(state: str, **fields: Any) -> dict[str, Any]:
    """A ``list_row``-shaped row; times given as datetimes become ISO strings."""
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
    }
    base.update(fields)
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in base.items()}


def ran(state: str, start: datetime, end: datetime | None, **fields: Any) -> dict[str, Any]:
    return row(state, started_at=start, finished_at=end, **fields)


# --- overview --------------------------------------------------------------------------


def test_state_counts_list_every_state() -> None:
    counts = state_counts([row("PENDING"), row("PENDING"), row("FAILED")])
    assert list(counts) == [s.value for s in JobState]
    assert counts["PENDING"] == 2 and counts["FAILED"] == 1 and counts["RUNNING"] == 0


def test_overview_reservations_pending_and_over_capacity() -> None:
    rows = [
        ran("RUNNING", NOW - HOUR, None, cpus=2, mem_mb=1000),
        ran("SUSPENDED", NOW - HOUR, None, cpus=3),  # undeclared: the default 256 MB
        row("PENDING", cpus=4),
        row("PENDING", cpus=16),  # over max_cpus
        row("PENDING", cpus=1, mem_mb=32000),  # over max_mem_mb
        row("PENDING", cpus=32, scheduler_target="slurm"),  # scheduler: never local over-cap
        ran("COMPLETED", NOW - 3 * HOUR, NOW - 2 * HOUR),
        ran("FAILED", NOW - 3 * HOUR, NOW - 23 * HOUR + timedelta(minutes=1)),
        ran("KILLED", NOW - 30 * HOUR, NOW - 25 * HOUR),  # outside the 24 h window
    ]
    daemon = {"pid": 42, "version": "0.1.0", "uptime_seconds": 5.0, "cgroup_mode": "direct"}
    snap = build_overview(rows, CAPS, NOW, daemon, quarantined=1)
    assert snap["daemon"]["running"] is True and snap["daemon"]["pid"] == 42
    assert snap["daemon"]["cgroup_mode"] == "direct"
    assert snap["counts"]["PENDING"] == 4 and snap["total_jobs"] == 9
    assert snap["quarantined"] == 1
    assert snap["running"] == {"jobs": 1, "cpus": 2, "mem_mb": 1000}
    assert snap["reserved"] == {"jobs": 2, "cpus": 5, "mem_mb": 1256}
    assert snap["pending_cpus"] == 4 + 16 + 1 + 32
    assert snap["over_capacity_pending_jobs"] == 2
    assert snap["capacity"] == {
        "max_jobs": None,
        "max_cpus": 8,
        "max_mem_mb": 16000,
        "default_job_mem_mb": 256,
    }
    recent = snap["recent_terminal"]["counts"]
    assert recent["COMPLETED"] == 1 and recent["FAILED"] == 1 and recent["KILLED"] == 0
    assert snap["recent_terminal"]["window_hours"] == 24


def test_overview_without_daemon_has_unknown_caps() -> None:
    rows = [row("PENDING", cpus=64), ran("RUNNING", NOW - HOUR, None, cpus=2)]
    snap = build_overview(rows, None, NOW)
    assert snap["daemon"] == {
        "running": False,
        "pid": None,
        "version": None,
        "started_at": None,
        "uptime_seconds": None,
        "cgroup_mode": None,
    }
    assert snap["capacity"] is None
    assert snap["over_capacity_pending_jobs"] is None  # unknown, never a false 0
    assert snap["reserved"] == {"jobs": 1, "cpus": 2, "mem_mb": 0}
    assert snap["pending_cpus"] == 64


def test_over_capacity_is_zero_only_when_known() -> None:
    assert build_overview([row("PENDING")], CAPS, NOW)["over_capacity_pending_jobs"] == 0
    assert build_overview([], CAPS, NOW)["over_capacity_pending_jobs"] == 0
    assert is_over_capacity(row("RUNNING", cpus=99), CAPS) is None
    assert is_over_capacity(row("PENDING", cpus=99), None) is None
    assert is_over_capacity(row("PENDING", cpus=9), CAPS) is True
    assert is_over_capacity(row("PENDING", cpus=8), CAPS) is False


def test_caps_from_ping() -> None:
    ping = {"caps": {"max_jobs": 2, "max_cpus": 4, "max_mem_mb": None, "default_job_mem_mb": 1}}
    assert caps_from_ping(ping) == Caps(2, 4, None, 1)


# --- usage -----------------------------------------------------------------------------


def test_active_seconds_subtracts_pauses() -> None:
    done = ran("COMPLETED", NOW - 2 * HOUR, NOW - HOUR, paused_seconds_total=600.0)
    assert active_seconds(done, NOW) == 3000.0
    running = ran("RUNNING", NOW - HOUR, None)
    assert active_seconds(running, NOW) == 3600.0
    paused_now = ran(
        "SUSPENDED", NOW - HOUR, None, paused_seconds_total=60.0, paused_at=NOW - 10 * MINUTE
    )
    assert active_seconds(paused_now, NOW) == 3600.0 - 60 - 600
    assert active_seconds(row("PENDING"), NOW) is None
    retry_waiting = ran("PENDING", NOW - HOUR, None)  # the old attempt's end is unknown
    assert active_seconds(retry_waiting, NOW) is None


def test_usage_by_tag_counts_a_job_under_each_tag() -> None:
    rows = [
        ran("COMPLETED", NOW - 3 * HOUR, NOW - HOUR, cpus=4, tags=["scf", "big"]),
        ran("FAILED", NOW - HOUR, NOW - HOUR / 2, cpus=2, tags=["scf", "scf"]),
        ran("RUNNING", NOW - HOUR, None, cpus=1),
        row("PENDING", cpus=8, tags=["scf"]),  # never ran: not counted
    ]
    report = build_usage(rows, "tag", None, NOW)
    groups = {g["key"]: g for g in report["groups"]}
    assert groups["scf"] == {"key": "scf", "jobs": 2, "wall_hours": 2.5, "cpu_hours": 9.0}
    assert groups["big"] == {"key": "big", "jobs": 1, "wall_hours": 2.0, "cpu_hours": 8.0}
    assert groups[None] == {"key": None, "jobs": 1, "wall_hours": 1.0, "cpu_hours": 1.0}
    assert [g["key"] for g in report["groups"]] == ["scf", "big", None]  # CPU-hours desc
    assert report["total"] == {"jobs": 3, "wall_hours": 3.5, "cpu_hours": 10.0}
    assert report["by"] == "tag" and report["since"] is None


def test_usage_by_day_uses_the_utc_start_date_and_since_filters() -> None:
    late = datetime(2026, 5, 9, 23, 30, tzinfo=UTC)
    rows = [
        ran("COMPLETED", late, late + HOUR, cpus=2),  # crosses midnight: counts on the 9th
        ran("COMPLETED", late + HOUR, late + 2 * HOUR),
        ran("COMPLETED", late - 48 * HOUR, late - 47 * HOUR),
    ]
    report = build_usage(rows, "day", None, NOW)
    assert [(g["key"], g["jobs"], g["cpu_hours"]) for g in report["groups"]] == [
        ("2026-05-07", 1, 1.0),
        ("2026-05-09", 1, 2.0),
        ("2026-05-10", 1, 1.0),
    ]
    since = build_usage(rows, "day", late, NOW)
    assert since["since"] == late.isoformat()
    assert [g["key"] for g in since["groups"]] == ["2026-05-09", "2026-05-10"]
    assert build_usage(rows, "day", NOW, NOW)["total"] == {
        "jobs": 0,
        "wall_hours": 0.0,
        "cpu_hours": 0.0,
    }


def test_usage_by_name_and_state() -> None:
    rows = [
        ran("COMPLETED", NOW - 2 * HOUR, NOW - HOUR, job_name="opt"),
        ran("FAILED", NOW - 2 * HOUR, NOW - HOUR, job_name="opt", cpus=3),
        ran("COMPLETED", NOW - 2 * HOUR, NOW - HOUR),
    ]
    by_name = {g["key"]: g["cpu_hours"] for g in build_usage(rows, "name", None, NOW)["groups"]}
    assert by_name == {"opt": 4.0, None: 1.0}
    by_state = {g["key"]: g["jobs"] for g in build_usage(rows, "state", None, NOW)["groups"]}
    assert by_state == {"COMPLETED": 2, "FAILED": 1}
    with pytest.raises(ValueError, match="grouping"):
        build_usage(rows, "owner", None, NOW)
    rows[0]["submitter"] = "1003"
    by_submitter = {
        g["key"]: g["jobs"] for g in build_usage(rows, "submitter", None, NOW)["groups"]
    }
    assert by_submitter == {"1003": 1, None: 2}


def test_report_row_carries_the_accounting_fields() -> None:
    spec = JobSpec(
        id="0123456789ab",
        command=["x"],
        cpus=2,
        submitted_at=NOW - HOUR,
        state=JobState.SUSPENDED,
        started_at=NOW - HOUR,
        paused_at=NOW - 10 * MINUTE,
        paused_seconds_total=30.0,
    )
    data = report_row(spec, CAPS, NOW)
    assert data["paused_seconds_total"] == 30.0
    assert data["paused_at"] == (NOW - 10 * MINUTE).isoformat()
    assert data["scheduler_target"] is None and data["not_before"] is None
    assert active_seconds(data, NOW) == 3600.0 - 30 - 600


# --- queue ETA -------------------------------------------------------------------------


def _history(*minutes: float) -> list[dict[str, Any]]:
    return [
        ran("COMPLETED", NOW - 5 * HOUR, NOW - 5 * HOUR + timedelta(minutes=m)) for m in minutes
    ]


def test_eta_is_unavailable_for_an_over_capacity_job() -> None:
    job = row("PENDING", cpus=64)
    eta = queue_eta(job, [job, *_history(10)], CAPS, NOW)
    assert eta["eta_seconds"] is None and eta["basis"] == "over configured capacity"


def test_eta_needs_caps_and_says_free_capacity_when_it_fits() -> None:
    job = row("PENDING")
    assert queue_eta(job, [job], CAPS, NOW)["basis"] == "free capacity"
    assert queue_eta(job, [job, *_history(10)], None, NOW)["basis"] == "capacity unknown"
    running = ran("RUNNING", NOW - HOUR, None)
    assert queue_eta(running, [running], CAPS, NOW)["basis"] == "not pending"


def test_eta_replays_jobs_ahead_in_admission_order() -> None:
    caps = Caps(max_cpus=4)
    history = _history(10, 20, 30, 1000)  # median of the four: 25 min
    # Two running jobs without wall time, one hour in: of the recent runs only the
    # 1000-minute one lasted longer, so each is expected to run 940 more minutes.
    running = [ran("RUNNING", NOW - HOUR, None, cpus=2) for _ in range(2)]
    earlier = row("PENDING", cpus=2, submitted_at=NOW - 9 * HOUR)
    urgent = row("PENDING", cpus=2, submitted_at=NOW - HOUR, priority=5)
    later = row("PENDING", cpus=2, submitted_at=NOW - HOUR)
    impossible = row("PENDING", cpus=64, submitted_at=NOW - 11 * HOUR)  # never ahead
    job = row("PENDING", cpus=2, submitted_at=NOW - 2 * HOUR)
    rows = [*history, *running, earlier, urgent, later, impossible, job]
    eta = queue_eta(job, rows, caps, NOW)
    # At 940 min both running jobs end; urgent and earlier take the 4 CPUs for 25 min.
    assert eta == {
        "eta_seconds": (940 + 25) * 60.0,
        "basis": "dispatch history",
        "median_run_seconds": 25 * 60.0,
        "jobs_ahead": 2,
        "slots": 2,
    }
    assert queue_eta(urgent, rows, caps, NOW)["eta_seconds"] == 940 * 60.0
    assert queue_eta(later, rows, caps, NOW)["jobs_ahead"] == 3


def test_eta_counts_the_declared_wall_time_of_a_running_job() -> None:
    """The first-day report: behind `sleep 600 --wall-time 10m`, not "about 0.8s"."""
    caps = Caps(max_jobs=1)
    quick = [ran("COMPLETED", NOW - HOUR, NOW - HOUR + timedelta(seconds=0.8))]
    sleeper = ran("RUNNING", NOW - timedelta(seconds=10), None, wall_time_seconds=600)
    job = row("PENDING")
    eta = queue_eta(job, [*quick, sleeper, job], caps, NOW)
    assert eta["eta_seconds"] == 590.0 and eta["basis"] == "declared wall time"
    ahead = row("PENDING", submitted_at=NOW - 11 * HOUR, wall_time_seconds=120)
    both = queue_eta(job, [*quick, sleeper, ahead, job], caps, NOW)
    assert both["eta_seconds"] == 710.0 and both["jobs_ahead"] == 1


def test_eta_is_unknown_and_says_why() -> None:
    caps = Caps(max_jobs=1)
    job = row("PENDING")
    blocker = ran("RUNNING", NOW - HOUR, None)
    eta = queue_eta(job, [blocker, job], caps, NOW)
    assert eta["eta_seconds"] is None
    assert eta["basis"] == (
        f"unknown: running job {blocker['id']} declares no wall time and no job has "
        "finished yet to time it"
    )
    longer = queue_eta(job, [*_history(1, 2), blocker, job], caps, NOW)["basis"]
    assert longer.endswith("has run longer than any of the last 2 finished jobs")
    paused = ran("SUSPENDED", NOW - HOUR, None, wall_time_seconds=7200)
    assert queue_eta(job, [paused, job], caps, NOW)["basis"] == (
        f"unknown: running job {paused['id']} is paused"
    )
    # Room for it anyway: unknown ends elsewhere do not matter.
    assert queue_eta(job, [blocker, job], Caps(max_jobs=2), NOW)["eta_seconds"] == 0.0


def test_eta_is_zero_with_a_free_slot_but_respects_not_before() -> None:
    job = row("PENDING")
    rows = [*_history(10), job]
    assert queue_eta(job, rows, CAPS, NOW)["eta_seconds"] == 0.0
    delayed = row("PENDING", not_before=NOW + HOUR)
    assert queue_eta(delayed, [*rows, delayed], CAPS, NOW)["eta_seconds"] == 3600.0
    unlimited = queue_eta(job, rows, Caps(), NOW)
    assert unlimited["eta_seconds"] == 0.0 and unlimited["slots"] is None


def test_a_kept_eta_basis_gives_the_same_eta_as_the_rows() -> None:
    """The daemon keeps one basis per index generation; it must change no answer."""
    caps = Caps(max_jobs=3, max_cpus=6, max_mem_mb=4000, default_job_mem_mb=500)
    start = NOW - 5 * HOUR
    history = [ran("COMPLETED", start, start + (k % 7 + 1) * MINUTE) for k in range(30)]
    history += [ran("FAILED", start, start + k * MINUTE) for k in range(3)]
    history.append(row("KILLED", finished_at=NOW - HOUR))  # never ran: no run time
    history.append(ran("COMPLETED", start, NOW, scheduler_target="slurm"))  # not local
    running = [ran("RUNNING", NOW - HOUR, None), ran("SUSPENDED", NOW - HOUR, None)]
    pending = [
        row("PENDING", priority=k % 3, submitted_at=NOW - k * MINUTE, cpus=1 + k % 2)
        for k in range(12)
    ]
    pending.append(row("PENDING", cpus=64))  # over capacity: never ahead
    rows = [*history, *running, *pending]
    basis = eta_basis(rows, caps)
    for job in pending:
        assert queue_eta(job, (), caps, NOW, basis=basis) == queue_eta(job, rows, caps, NOW)
    # The job re-read with another priority than its indexed row: that row is not ahead.
    moved = {**pending[0], "priority": 9}
    assert queue_eta(moved, (), caps, NOW, basis=basis)["jobs_ahead"] == 0
    moved = {**pending[5], "priority": -9, "submitted_at": NOW.isoformat()}
    expected = sum(1 for r in pending[:-1] if r["id"] != moved["id"])
    assert queue_eta(moved, (), caps, NOW, basis=basis)["jobs_ahead"] == expected
    assert queue_eta(moved, rows, caps, NOW)["jobs_ahead"] == expected


def test_usage_by_total_is_one_group_equal_to_the_total() -> None:
    rows = [
        ran("COMPLETED", NOW - 2 * HOUR, NOW - HOUR, tags=["a", "b"], cpus=2),
        ran("FAILED", NOW - 2 * HOUR, NOW - HOUR),
        row("PENDING"),
    ]
    report = build_usage(rows, "total", None, NOW)
    assert report["by"] == "total"
    assert report["groups"] == [{"key": "total", **report["total"]}]
    assert report["total"] == {"jobs": 2, "wall_hours": 2.0, "cpu_hours": 3.0}
    assert build_usage([], "total", None, NOW)["groups"] == []
