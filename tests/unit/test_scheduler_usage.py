"""Receipt usability and the sacct sample of a lane job (pure)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from vq.dialects import AccountingRecord, SchedulerPhase
from vq.executors.scheduler.usage import accounting_sample, never_started, receipt_usable

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
GOOD = {
    "schema": "vq.resource-usage.v1",
    "status": "ok",
    "user_cpu_seconds": 1.5,
    "system_cpu_seconds": 0.25,
    "max_rss_kb": 51200,
}


def _bytes(**changes: Any) -> bytes:
    return json.dumps({**GOOD, **changes}).encode()


def test_a_complete_receipt_is_usable() -> None:
    assert receipt_usable(_bytes())


@pytest.mark.parametrize(
    "data",
    [
        None,
        b"",
        b"not json",
        b"[1, 2]",
        b"\xff\xfe",
        _bytes(status="error"),
        _bytes(schema="other"),
        _bytes(max_rss_kb=None),
        _bytes(max_rss_kb=-1),
        _bytes(max_rss_kb=2**60),
        _bytes(max_rss_kb=True),
        _bytes(user_cpu_seconds="1.5"),
        b'{"schema": "vq.resource-usage.v1", "status": "ok", "max_rss_kb": 1, '
        b'"user_cpu_seconds": NaN, "system_cpu_seconds": 0}',
        b'{"schema": "vq.resource-usage.v1", "status": "ok", "max_rss_kb": 1e999, '
        b'"user_cpu_seconds": 0, "system_cpu_seconds": 0}',
    ],
)
def test_unusable_receipts(data: bytes | None) -> None:
    assert not receipt_usable(data)


def _record(max_rss_kb: int | None, cpu: float | None) -> AccountingRecord:
    return AccountingRecord(
        scheduler_job_id="42",
        job_name="vq-0123456789ab",
        raw_state="COMPLETED",
        state_code="COMPLETED",
        phase=SchedulerPhase.ENDED,
        cancelled_by_uid=None,
        exit_code=0,
        exit_signal=None,
        elapsed="00:00:07",
        elapsed_seconds=7,
        walltime_limit=None,
        walltime_limit_seconds=None,
        exec_host="vm",
        max_rss_kb=max_rss_kb,
        total_cpu_seconds=cpu,
        comment=None,
        abnormal_end_state=None,
    )


def test_ok_sample_in_the_watchdog_schema() -> None:
    sample = accounting_sample("42", _record(51200, 3.5), None, NOW)
    assert sample["status"] == "ok" and sample["diagnostic"] is None
    assert (sample["rss_mb"], sample["cpu_time_seconds"]) == (50.0, 3.5)
    assert sample["cpu_time_source"] == "sacct" and sample["elapsed_seconds"] == 7
    watchdog_keys = {
        "ts",
        "elapsed_seconds",
        "rss_mb",
        "cpu_percent",
        "cpu_time_seconds",
        "cpu_time_source",
        "cgroup_lookup",
        "cgroup_path",
        "sample_pid",
        "sample_pgid",
    }
    assert watchdog_keys <= set(sample)


def test_partial_and_unavailable() -> None:
    partial = accounting_sample("42", _record(None, 3.5), None, NOW)
    assert partial["status"] == "partial" and partial["rss_mb"] is None
    assert "MaxRSS" in partial["diagnostic"]
    zero = accounting_sample("42", _record(51200, 0.0), None, NOW)
    assert zero["status"] == "partial" and "TotalCPU" in zero["diagnostic"]
    gone = accounting_sample("42", None, "not in accounting yet", NOW)
    assert (gone["status"], gone["diagnostic"]) == ("unavailable", "not in accounting yet")
    assert gone["cpu_time_seconds"] is None and gone["elapsed_seconds"] is None


def test_only_proof_that_the_script_never_ran_skips_the_usage_query() -> None:
    queued_only = dataclasses.replace(
        _record(None, None), elapsed="00:00:00", elapsed_seconds=0, exec_host=None
    )
    # the copied-back workspace lacks the script's first write: it never ran
    assert never_started(None, False, None)
    assert never_started(None, False, _record(51200, 3.5))
    # any marker (the script or its trap wrote it), or the first write: it ran
    assert not never_started(0, False, None)
    assert not never_started(143, None, queued_only)
    assert not never_started(None, True, queued_only)
    # copy-back failed (unknown): only accounting's zero elapsed time on no node proves it
    assert never_started(None, None, queued_only)
    assert not never_started(None, None, None)
    assert not never_started(None, None, _record(51200, 3.5))
    assert not never_started(None, None, dataclasses.replace(queued_only, exec_host="vm"))
