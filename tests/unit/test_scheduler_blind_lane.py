"""blind_lane_warning: a lane without accounting warns once its scheduler has been silent
about a job for longer than MinJobAge (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vq.config.hosts import HostSettings, LaneSettings
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.services.status import blind_lane_warning

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _lane(**keys: Any) -> LaneSettings:
    host = HostSettings.model_validate(
        {"ssh": "login", "scheduler_dialect": "slurm", "scratch_root": "/s", **keys}
    )
    lane = host.lane("cluster")
    assert lane is not None
    return lane


def _spec(state: JobState = JobState.RUNNING, **fields: Any) -> JobSpec:
    base = JobSpec.model_validate(
        {
            "id": "0123456789ab",
            "command": ["true"],
            "cpus": 1,
            "submitted_at": NOW - timedelta(hours=1),
            "started_at": NOW - timedelta(minutes=30),
            "scheduler_target": "cluster",
            "scheduler_job_id": "42",
            "scheduler_state": "running",
        }
    )
    return base.model_copy(update={"state": state, **fields})


def test_silent_longer_than_min_job_age_without_accounting_warns() -> None:
    spec = _spec(last_heartbeat_at=NOW - timedelta(seconds=301))
    warning = blind_lane_warning(spec, _lane(scheduler_accounting="none"), NOW)
    assert warning is not None and warning["code"] == "lane_blind"
    assert "301 s ago" in warning["message"] and "MinJobAge (300 s)" in warning["message"]
    assert "scheduler id 42" in warning["hint"]


@pytest.mark.parametrize(
    ("spec", "lane"),
    [
        (_spec(last_heartbeat_at=NOW - timedelta(seconds=299)), _lane(scheduler_accounting="none")),
        (_spec(last_heartbeat_at=NOW - timedelta(hours=1)), _lane()),  # sacct sees it
        (_spec(JobState.COMPLETED), _lane(scheduler_accounting="none")),
        (_spec(scheduler_job_id=None), _lane(scheduler_accounting="none")),
        (_spec(), None),  # the lane is not configured here
    ],
)
def test_no_warning(spec: JobSpec, lane: LaneSettings | None) -> None:
    assert blind_lane_warning(spec, lane, NOW) is None


def test_started_at_stands_in_before_the_first_report_and_the_age_is_configurable() -> None:
    lane = _lane(scheduler_accounting="none", scheduler_min_job_age=3600)
    assert blind_lane_warning(_spec(), lane, NOW) is None  # started 30 min ago
    lane = _lane(scheduler_accounting="none", scheduler_min_job_age=60)
    assert blind_lane_warning(_spec(), lane, NOW) is not None
