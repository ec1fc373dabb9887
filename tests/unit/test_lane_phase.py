"""Issue 30 item 1: a lane job's cluster phase in every human view (§3.3: RUNNING
includes cluster-queued time; ``scheduler_state`` carries the finer phase)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from vq.cli.render_text import field_rows
from vq.domain.lane_phase import lane_elapsed, lane_phase, phase_label
from vq.domain.spec import JobSpec
from vq.services.query import list_row
from vq.services.top import build_top

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
SLURM = {"cluster": SimpleNamespace(dialect="slurm")}


def _lane_spec(**fields: object) -> JobSpec:
    base: dict[str, object] = {
        "id": "0123456789ab",
        "command": ["true"],
        "cpus": 2,
        "submitted_at": NOW - timedelta(hours=1),
        "state": "RUNNING",
        "started_at": NOW - timedelta(minutes=50),
        "scheduler_target": "cluster",
        "scheduler_job_id": "4711",
    }
    return JobSpec.model_validate(base | fields)


def test_phase_words() -> None:
    assert lane_phase("RUNNING", "cluster", "queued") == "queued"
    assert lane_phase("RUNNING", "cluster", "running") == "running"
    assert lane_phase("RUNNING", "cluster", "finishing") == "finishing"
    assert lane_phase("RUNNING", "cluster", "submitting") == "submitting"
    assert lane_phase("RUNNING", "cluster", "cancel_pending") == "cancelling"
    assert lane_phase("SUSPENDED", "cluster", "held") == "held"
    assert lane_phase("RUNNING", None, None) is None  # a local job: its state says it
    assert lane_phase("COMPLETED", "cluster", "ended") is None
    assert lane_phase("RUNNING", "cluster", "some_new_word") == "some_new_word"


def test_labels_name_the_scheduler_and_its_reason() -> None:
    assert phase_label("queued", "Priority", "slurm") == "queued (slurm: Priority)"
    assert phase_label("held", "JobHeldUser", "slurm") == "held (slurm: JobHeldUser)"
    assert phase_label("queued", None, "slurm") == "queued"
    assert phase_label("running", None, "slurm") == "running"
    assert phase_label("submitting", "controller busy") == "submitting (retry: controller busy)"
    assert phase_label(None, "Priority", "slurm") is None


def test_elapsed_counts_from_the_cluster_start() -> None:
    start = NOW - timedelta(seconds=30)
    assert lane_elapsed("queued", start, None, NOW) is None
    assert lane_elapsed("running", None, None, NOW) is None
    assert lane_elapsed("running", start, None, NOW) == 30.0
    assert lane_elapsed(None, start, NOW - timedelta(seconds=10), NOW) == 20.0


def test_list_row_of_a_queued_lane_job() -> None:
    spec = _lane_spec(scheduler_state="queued", scheduler_queued_reason="PartitionConfig")
    row = list_row(spec, None, NOW, SLURM)
    assert row["state"] == "RUNNING"  # the state keeps its meaning (--json is additive)
    assert row["phase"] == "queued"
    assert row["phase_label"] == "queued (slurm: PartitionConfig)"
    assert row["elapsed_seconds"] is None  # not 50 minutes since vq's claim


def test_list_row_of_a_running_lane_job_counts_from_the_cluster() -> None:
    spec = _lane_spec(scheduler_state="running", scheduler_started_at=NOW - timedelta(seconds=42))
    row = list_row(spec, None, NOW, SLURM)
    assert row["phase_label"] == "running" and row["elapsed_seconds"] == 42.0
    local = list_row(_lane_spec(scheduler_target=None, scheduler_job_id=None), None, NOW)
    assert local["phase"] is None and local["elapsed_seconds"] == 3000.0


def test_status_text_shows_lane_job_phase_reason_host_and_cluster_walltime() -> None:
    view = {
        "id": "0123456789ab",
        "state": "RUNNING",
        "scheduler_target": "cluster",
        "scheduler_dialect": "slurm",
        "scheduler_job_id": "4711",
        "phase": "queued",
        "scheduler_queued_reason": "PartitionConfig",
        "scheduler_walltime_used": "0:00",
        "scheduler_walltime_limit": "1:00:00",
    }
    rows = field_rows(view)  # type: ignore[arg-type]
    assert rows[1:7] == [
        ("state", "RUNNING"),
        ("lane", "cluster (slurm)"),
        ("slurm job", "4711"),
        ("phase", "queued"),
        ("queued reason", "PartitionConfig"),
        ("cluster elapsed", "0:00 of 1:00:00"),
    ]
    running = dict(
        field_rows(
            {
                **view,
                "phase": "running",
                "scheduler_queued_reason": None,
                "scheduler_exec_host": "node1",
            }
        )
    )  # type: ignore[arg-type]
    assert running["exec host"] == "node1" and "queued reason" not in running
    assert field_rows({"id": "x", "state": "RUNNING"}) == [  # type: ignore[typeddict-item]
        ("id", "x"),
        ("state", "RUNNING"),
    ]


def test_top_shows_the_phase_and_no_claim_elapsed() -> None:
    queued = list_row(
        _lane_spec(scheduler_state="queued", scheduler_queued_reason="Priority"), None, NOW, SLURM
    )
    snap = build_top([queued], {}, None, NOW)
    (job,) = snap["jobs"]
    assert job["phase_label"] == "queued (slurm: Priority)"
    assert job["elapsed_seconds"] is None and job["stale"] is False
