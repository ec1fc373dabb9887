"""`vq status` piped without rich: whenever the plain renderer answers, its text is the
one rich prints; it leaves to rich whatever rich would wrap, style or interpret."""

from __future__ import annotations

from typing import Any

import pytest

from vq.cli.render import print_status
from vq.cli.render_text import plain_status


def _view(**changes: Any) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": "bec729ed4941",
        "state": "COMPLETED",
        "job_name": None,
        "tags": [],
        "submitted_at": "2026-12-03T23:20:26.181810Z",
        "command": ["true"],
        "cpus": 1,
        "mem_mb": None,
        "wall_time_seconds": None,
        "priority": 0,
        "not_before": None,
        "started_at": "2026-12-03T23:20:26.190996Z",
        "finished_at": "2026-12-03T23:20:26.226815Z",
        "exit_code": 0,
        "failure_reason": None,
        "failure_tail": None,
        "pid": 13637,
        "cpu_affinity": [0, 1],
        "parent_jobid": None,
        "paused_at": None,
        "paused_by": None,
        "retry_count": 0,
        "array_index": None,
        "chain_index": None,
        "workspace": "/tmp/state/jobs/bec729ed4941",
        "pending_over_capacity": None,
        "configured_capacity_overages": [],
        "pending_reason": None,
        "elapsed_seconds": 0.035819,
        "resource_usage": {
            "peak_rss_mb": 8.5,
            "cpu_seconds": 0.001,
            "user_cpu_seconds": 0.000992,
            "system_cpu_seconds": 0.0,
        },
    }
    view.update(changes)
    return view


PLAIN = [
    _view(),
    _view(job_name="scan-r1.20", tags=["pes", "h2"], mem_mb=512, wall_time_seconds=3600),
    _view(state="FAILED", exit_code=3, retry_count=2, failure_reason="exit code 3"),
    _view(state="PENDING", started_at=None, pending_reason="waiting for a free slot"),
    _view(chain_index=2, chain_total=5, chain_group_id="aaaaaaaaaaaa"),
    _view(queue_eta={"eta_seconds": 90, "basis": "3 jobs ahead"}),
    _view(command=["sh", "-c", "echo 12:30:45 && date"]),
    _view(job_name="a [bold]x"),  # what markup would read: printed as it is
    _view(command=["echo", ":smile:"]),  # an emoji code: printed as it is
    _view(array_index=3, array_total=10, array_group_id="bbbbbbbbbbbb"),  # "[3]"
]
RICH_ONLY = [
    _view(job_name="naïve"),  # not ASCII (cell widths)
    _view(command=["python", "x" * 200]),  # wraps
    _view(failure_tail="Traceback\n  boom"),
    _view(pending_over_capacity=True, configured_capacity_overages=[]),
]


@pytest.mark.parametrize("columns", ["80", "120"])
@pytest.mark.parametrize("view", PLAIN)
def test_the_plain_text_is_the_rich_text(
    view: dict[str, Any], columns: str, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    print_status(view)
    rich_text = capsys.readouterr().out
    assert plain_status(view) == rich_text


@pytest.mark.parametrize("view", RICH_ONLY)
def test_what_rich_would_change_is_left_to_rich(
    view: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert plain_status(view) is None


def test_forced_colour_is_left_to_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert plain_status(_view()) is None
