"""Scheduler lane specs written straight to a state root, as the lane engine leaves them
(for the capacity and accounting tests of the in-process and browser tiers)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.conftest import Vq

__all__ = ["write_lane_jobs"]


def write_lane_jobs(vq: Vq) -> dict[str, str]:
    """Lane specs written straight to the store, as the lane engine leaves them: 3 cpus
    queued in Slurm (the trial's "3/2"), 2 cpus confirmed running, and one that ran one
    second an hour after vq claimed it."""
    from vq.domain.spec import JobSpec
    from vq.domain.states import JobState
    from vq.paths import StatePaths
    from vq.store.specs import SpecStore

    store = SpecStore(StatePaths.from_env(vq.env))
    store.paths.ensure()
    now = datetime.now(UTC)
    jobs = {
        "queued": (JobState.RUNNING, 3, "queued", None, None),
        "running": (JobState.RUNNING, 2, "running", "0:05:00", None),
        "packed": (JobState.COMPLETED, 4, "ended", "0:00:01", now),
    }
    ids: dict[str, str] = {}
    for index, (name, (state, cpus, phase, used, finished)) in enumerate(jobs.items()):
        job_id = f"{0xC0FFEE000000 + index:012x}"
        spec = JobSpec(
            id=job_id,
            submitted_at=now - timedelta(hours=2),
            started_at=now - timedelta(hours=1),
            finished_at=finished,
            exit_code=0 if finished else None,
            command=["true"],
            cpus=cpus,
            job_name=name,
            state=state,
            scheduler_target="cluster",
            scheduler_job_id=str(100 + index),
            scheduler_state=phase,
            scheduler_walltime_used=used,
        )
        store.create(spec)
        ids[name] = job_id
    return ids
