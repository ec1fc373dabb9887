"""The ``vq top`` read model: percentages, staleness, missing samples, caps; the tail reader."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vq.domain.admission import Caps
from vq.services.top import STALE_SECONDS, TAIL_BYTES, build_top, read_latest_sample

NOW = datetime(2026, 5, 9, 12, 0, 0, tzinfo=UTC)


def _row(job_id: str, state: str = "RUNNING", **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": job_id,
        "job_name": None,
        "state": state,
        "cpus": 1,
        "mem_mb": None,
        "wall_time_seconds": None,
        "started_at": (NOW - timedelta(seconds=10)).isoformat()
        if state in ("RUNNING", "SUSPENDED")
        else None,
    }
    row.update(fields)
    return row


def _sample(age: float, **fields: Any) -> dict[str, Any]:
    sample: dict[str, Any] = {
        "ts": (NOW - timedelta(seconds=age)).isoformat(),
        "elapsed_seconds": 42.0,
        "rss_mb": 50.0,
        "cpu_percent": 97.5,
    }
    sample.update(fields)
    return sample


def _one(rows: list[dict[str, Any]], samples: dict[str, Any], caps: Caps | None = None) -> Any:
    snap = build_top(rows, samples, caps, NOW)
    assert len(snap["jobs"]) == 1
    return snap["jobs"][0]


def test_percentages_from_sample_and_declared_limits() -> None:
    job = _one(
        [_row("a", mem_mb=200, wall_time_seconds=600, job_name="sim", cpus=2, cpu_affinity=[4, 5])],
        {"a": _sample(3, elapsed_seconds=60.0, rss_mb=50.0)},
        Caps(max_cpus=8),
    )
    assert job == {
        "id": "a",
        "job_name": "sim",
        "state": "RUNNING",
        "cpus": 2,
        "cpu_affinity": [4, 5],
        "cpu_percent": 97.5,
        "rss_mb": 50.0,
        "mem_limit_mb": 200,
        "mem_percent": 25.0,
        "elapsed_seconds": 60.0,
        "wall_time_seconds": 600,
        "wall_percent": 10.0,
        "sample_age_seconds": 3.0,
        "stale": False,
        "phase": None,
        "phase_label": None,
    }


def test_default_job_memory_is_the_limit_when_none_is_declared() -> None:
    job = _one([_row("a")], {"a": _sample(1, rss_mb=300.0)}, Caps(default_job_mem_mb=1000))
    assert job["mem_limit_mb"] == 1000
    assert job["mem_percent"] == 30.0


def test_no_limit_means_no_percentages() -> None:
    job = _one([_row("a")], {"a": _sample(1)}, Caps())
    assert job["mem_limit_mb"] is None and job["mem_percent"] is None
    assert job["wall_time_seconds"] is None and job["wall_percent"] is None
    assert job["rss_mb"] == 50.0


def test_stale_when_the_latest_sample_is_old() -> None:
    fresh = _one([_row("a")], {"a": _sample(STALE_SECONDS)})
    old = _one([_row("a")], {"a": _sample(STALE_SECONDS + 0.5)})
    assert fresh["stale"] is False
    assert old["stale"] is True and old["sample_age_seconds"] == STALE_SECONDS + 0.5


def test_missing_sample_uses_started_at_and_goes_stale_after_the_threshold() -> None:
    young = _one([_row("a", wall_time_seconds=100)], {})
    assert young["cpu_percent"] is None and young["rss_mb"] is None
    assert young["sample_age_seconds"] is None
    assert young["elapsed_seconds"] == 10.0 and young["wall_percent"] == 10.0
    assert young["stale"] is False

    started = (NOW - timedelta(seconds=STALE_SECONDS + 5)).isoformat()
    old = _one([_row("a", started_at=started)], {"a": None})
    assert old["stale"] is True
    assert old["elapsed_seconds"] == STALE_SECONDS + 5


def test_running_job_without_start_time_or_sample_is_not_stale() -> None:
    job = _one([_row("a", started_at=None)], {})
    assert job["stale"] is False and job["elapsed_seconds"] is None


def test_suspended_jobs_are_listed_but_never_stale() -> None:
    job = _one([_row("s", state="SUSPENDED")], {"s": _sample(600)})
    assert job["state"] == "SUSPENDED"
    assert job["sample_age_seconds"] == 600.0 and job["stale"] is False


def test_sample_with_null_or_odd_readings_yields_none() -> None:
    job = _one(
        [_row("a", mem_mb=100)],
        {"a": _sample(1, rss_mb=None, cpu_percent="high", elapsed_seconds=True)},
    )
    assert job["rss_mb"] is None and job["mem_percent"] is None
    assert job["cpu_percent"] is None
    assert job["elapsed_seconds"] == 10.0  # not the bogus boolean: started_at instead


def test_counts_capacity_and_only_live_rows() -> None:
    rows = [
        _row("p1", state="PENDING", cpus=4, mem_mb=4000),
        _row("r1", cpus=2, mem_mb=200),
        _row("r2", cpus=1),  # reserves the default memory
        _row("s1", state="SUSPENDED", cpus=3, mem_mb=300),
        _row("c1", state="COMPLETED", cpus=8, mem_mb=8000),
    ]
    caps = Caps(max_jobs=4, max_cpus=8, max_mem_mb=16000, default_job_mem_mb=1000)
    snap = build_top(rows, {}, caps, NOW, daemon_pid=4242)
    assert [job["id"] for job in snap["jobs"]] == ["r1", "r2", "s1"]
    assert snap["counts"]["PENDING"] == 1
    assert snap["counts"]["RUNNING"] == 2
    assert snap["counts"]["SUSPENDED"] == 1
    assert snap["counts"]["COMPLETED"] == 1
    assert snap["counts"]["FAILED"] == 0  # every state is present
    assert snap["capacity"] == {
        "cpus": {"reserved": 6, "cap": 8},
        "mem_mb": {"reserved": 1500, "cap": 16000},
        "jobs": {"reserved": 3, "cap": 4},
    }
    assert snap["daemon"] == {"running": True, "pid": 4242}
    assert snap["generated_at"] == NOW.isoformat()
    json.dumps(snap)  # plain JSON data


def test_unlimited_job_cap_is_null_but_the_daemon_runs() -> None:
    snap = build_top([_row("a")], {}, Caps(max_cpus=2, max_mem_mb=1000), NOW, 1)
    assert snap["capacity"]["jobs"] == {"reserved": 1, "cap": None}
    assert snap["capacity"]["cpus"] == {"reserved": 1, "cap": 2}
    assert snap["daemon"]["running"] is True


def test_without_a_daemon_caps_are_unknown_and_memory_is_declared_only() -> None:
    snap = build_top([_row("a", mem_mb=200), _row("b")], {}, None, NOW)
    assert snap["daemon"] == {"running": False, "pid": None}
    assert snap["capacity"] == {
        "cpus": {"reserved": 2, "cap": None},
        "mem_mb": {"reserved": 200, "cap": None},
        "jobs": {"reserved": 2, "cap": None},
    }
    limits = {job["id"]: job["mem_limit_mb"] for job in snap["jobs"]}
    assert limits == {"a": 200, "b": None}


def test_empty_queue() -> None:
    snap = build_top([], {}, None, NOW)
    assert snap["jobs"] == [] and set(snap["counts"].values()) == {0}


# --- read_latest_sample ------------------------------------------------------------------


def _line(n: int) -> str:
    return json.dumps({"ts": NOW.isoformat(), "elapsed_seconds": float(n), "rss_mb": 1.0})


def test_missing_or_empty_file_is_no_reading(tmp_path: Path) -> None:
    assert read_latest_sample(tmp_path / "absent.jsonl") is None
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert read_latest_sample(empty) is None
    assert read_latest_sample(tmp_path) is None  # a directory: unreadable, not an error


def test_latest_well_formed_line_wins(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text(_line(1) + "\n" + _line(2) + "\n")
    sample = read_latest_sample(path)
    assert sample is not None and sample["elapsed_seconds"] == 2.0


def test_torn_and_malformed_tail_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text(
        _line(1)
        + "\n"
        + _line(2)
        + "\nnot json\n[1, 2]\n"
        + json.dumps({"ts": "yesterday"})
        + "\n"
        + '{"ts": "2026-05-09T12:00:00+00:00", "rss'
    )
    sample = read_latest_sample(path)
    assert sample is not None and sample["elapsed_seconds"] == 2.0


def test_only_the_tail_is_read(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    lines = [_line(n) for n in range(5000)]  # far more than TAIL_BYTES
    path.write_text("\n".join(lines) + "\n")
    assert path.stat().st_size > 10 * TAIL_BYTES
    sample = read_latest_sample(path)
    assert sample is not None and sample["elapsed_seconds"] == 4999.0

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text(_line(1) + "\n" + "x" * (2 * TAIL_BYTES) + "\n")
    assert read_latest_sample(garbage) is None  # the good line is beyond the tail


def test_binary_garbage_is_no_reading(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage\n\x80\x81\n")
    assert read_latest_sample(path) is None
