"""A lane job's resource sample from scheduler accounting, when its receipt is unusable (pure).

The batch script's GNU time receipt (``_vq/resource-usage.json``) is the job's usage
record. When it is absent, malformed, an ``error`` receipt, or carries a non-finite or
out-of-range number, the lane asks ``sacct`` once after the job ended and appends one
record to ``_vq/samples.jsonl`` in the watchdog's sample schema (§4.4), with
``cpu_time_source = "sacct"`` and:

* ``status = "ok"``: positive CPU time and MaxRSS;
* ``"partial"``: the job is in accounting but a metric is missing or zero;
* ``"unavailable"``: no accounting record (lag, an unreadable or failed query), with a
  one-line ``diagnostic``.

Nothing here delays the job's terminal transition: the lane asks after it. A job that
never started (:func:`never_started`: cancelled or failed while still queued) used no
resources, so the lane asks nothing for it.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

from vq.dialects import AccountingRecord

__all__ = ["MAX_RSS_KB", "accounting_sample", "never_started", "receipt_usable"]

#: Larger than any machine's memory (1 PiB in KiB): above it a figure is garbage.
MAX_RSS_KB = 2**40
_CPU_FIELDS = ("user_cpu_seconds", "system_cpu_seconds")


def _number(value: Any, ceiling: float) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= ceiling
    )


def receipt_usable(data: bytes | None) -> bool:
    """Whether a GNU time receipt's bytes give a complete, sane usage record."""
    if data is None:
        return False
    try:
        receipt = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    if not isinstance(receipt, dict):
        return False
    if receipt.get("schema") != "vq.resource-usage.v1" or receipt.get("status") != "ok":
        return False
    if not _number(receipt.get("max_rss_kb"), MAX_RSS_KB):
        return False
    return all(_number(receipt.get(name), 1e12) for name in _CPU_FIELDS)


def never_started(
    marker: int | None, script_started: bool | None, record: AccountingRecord | None
) -> bool:
    """Whether an ended lane job provably never ran its batch script.

    ``marker`` is its exit marker (the script, or its signal trap, writes one: any marker
    means it ran). ``script_started`` says whether the copied-back workspace holds
    ``_vq/scheduler-job-id``, the script's first write (None: unknown, the copy-back
    failed). Without that evidence, an accounting record of zero elapsed time on no node
    proves it; anything less is not proof, and the usage is asked for as before."""
    if marker is not None or script_started:
        return False
    if script_started is False:
        return True
    return record is not None and record.elapsed_seconds == 0 and not record.exec_host


def accounting_sample(
    scheduler_job_id: str,
    record: AccountingRecord | None,
    diagnostic: str | None,
    now: datetime,
) -> dict[str, Any]:
    """One ``samples.jsonl`` record from ``record`` (None: nothing usable, ``diagnostic``
    says why)."""
    rss_kb = record.max_rss_kb if record is not None else None
    cpu = record.total_cpu_seconds if record is not None else None
    rss_ok = _number(rss_kb, MAX_RSS_KB) and bool(rss_kb)
    cpu_ok = _number(cpu, 1e12) and bool(cpu)
    if record is None:
        status = "unavailable"
    elif rss_ok and cpu_ok:
        status = "ok"
    else:
        status = "partial"
        missing = [n for n, ok in (("MaxRSS", rss_ok), ("TotalCPU", cpu_ok)) if not ok]
        diagnostic = diagnostic or f"accounting has no positive {' or '.join(missing)}"
    return {
        "ts": now.isoformat(),
        "elapsed_seconds": record.elapsed_seconds if record is not None else None,
        "rss_mb": round(rss_kb / 1024, 2) if rss_ok and rss_kb is not None else None,
        "cpu_percent": None,
        "cpu_time_seconds": round(float(cpu), 3) if cpu_ok and cpu is not None else None,
        "cpu_time_source": "sacct",
        "cgroup_lookup": None,
        "cgroup_path": None,
        "sample_pid": None,
        "sample_pgid": None,
        "source": "scheduler-accounting",
        "status": status,
        "scheduler_job_id": scheduler_job_id,
        "diagnostic": (diagnostic or "")[:300] or None,
    }
