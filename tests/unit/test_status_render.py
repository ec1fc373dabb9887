"""The extra lines of `vq status`: pauses, receipt figures, array membership."""

from __future__ import annotations

from vq.cli.render_text import group_rows, usage_rows
from vq.services.query import usage_summary


def test_paused_by_memory_pressure_says_so_with_when() -> None:
    rows = dict(
        usage_rows({"paused_by": "memory-pressure", "paused_at": "2026-01-02T03:04:05+00:00"})
    )
    assert rows["paused by"].startswith("memory pressure, since ")


def test_receipt_figures() -> None:
    receipt = {"max_rss_kb": 51200, "user_cpu_seconds": 1.5, "system_cpu_seconds": 0.25}
    usage = usage_summary(receipt)
    assert usage is not None
    assert usage["peak_rss_mb"] == 50.0 and usage["cpu_seconds"] == 1.75
    rows = dict(usage_rows({"resource_usage": usage}))
    assert rows["peak RSS"] == "50.0 MB (receipt: largest process)"
    assert rows["CPU time"] == "1.75 s (user 1.50 s + system 0.25 s)"
    assert usage_summary(None) is None
    assert usage_summary({"max_rss_kb": "x"}) == {
        "source": "receipt",
        "peak_rss_mb": None,
        "cpu_seconds": None,
        "user_cpu_seconds": None,
        "system_cpu_seconds": None,
        "wall_seconds": None,
    }


def test_group_rows() -> None:
    view = {"array_index": 2, "array_total": 5, "array_group_id": "g", "array_value": "0.9"}
    assert group_rows(view) == [("array", "[2] of 5 in group g"), ("array value", "0.9")]
    assert group_rows({"chain_index": 1, "chain_total": 3, "chain_group_id": "c"}) == [
        ("chain", "segment 1 of 3 in group c")
    ]
