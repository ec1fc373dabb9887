"""Finishing the stops another writer wrote (``vq.daemon.foreign_stops``).

A real supervisor holds the attempts and a real spec store reads the specs; the
executor is a recording stand-in (its ``cancel`` is the one call the check makes), so
each case shows exactly which groups are signalled and which are owed their grace.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vq.daemon.foreign_stops import stop_ended_elsewhere
from vq.daemon.supervisor import Supervisor
from vq.domain.admission import Caps
from vq.domain.spec import JobSpec
from vq.errors import StorageError
from vq.executors.base import JobHandle
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle
from vq.store.specs import encode_spec


class RecordingExecutor:
    """``cancel`` answers ``reached`` and records every handle it was asked about."""

    def __init__(self, reached: bool = True) -> None:
        self.reached = reached
        self.cancelled: list[JobHandle] = []

    def cancel(self, handle: JobHandle) -> bool:
        self.cancelled.append(handle)
        return self.reached


def _spec(job_id: str, state: str) -> JobSpec:
    return JobSpec.model_validate(
        {
            "id": job_id,
            "submitted_at": "2026-01-01T00:00:00+00:00",
            "command": ["sleep", "300"],
            "cpus": 1,
            "state": state,
            "pid": 4000 + int(job_id[-2:], 16),
            "pgid": 4000 + int(job_id[-2:], 16),
            "pid_start_time": 77,
        }
    )


@pytest.fixture
def ctx(tmp_path: Path) -> ServiceContext:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    return ServiceContext(paths, Caps())


def _hold(ctx: ServiceContext, supervisor: Supervisor, spec: JobSpec) -> None:
    """``spec`` on disk, and held by ``supervisor`` with its recorded group."""
    ctx.paths.spec(spec.id).write_bytes(encode_spec(spec))
    supervisor.track(spec, spec.pid, spec.pgid, spec.pid_start_time, orphan=False)


def _supervisor(ctx: ServiceContext, executor: RecordingExecutor) -> Supervisor:
    return Supervisor(ctx, Lifecycle(ctx), executor)  # type: ignore[arg-type]


def test_only_a_held_job_ended_on_disk_is_cancelled_and_owed_its_grace(
    ctx: ServiceContext,
) -> None:
    executor = RecordingExecutor()
    supervisor = _supervisor(ctx, executor)
    _hold(ctx, supervisor, _spec("0000000000a1", "KILLED"))
    _hold(ctx, supervisor, _spec("0000000000a2", "RUNNING"))

    stopped = stop_ended_elsewhere(supervisor, ctx.store.read, executor)  # type: ignore[arg-type]

    assert stopped == ["0000000000a1"]
    assert executor.cancelled == [JobHandle("0000000000a1", 4000 + 0xA1, 77)]
    assert supervisor.holders["0000000000a1"].grace_deadline is not None
    assert supervisor.holders["0000000000a2"].grace_deadline is None
    # In its grace now: the next rescan leaves it to the grace handling.
    assert stop_ended_elsewhere(supervisor, ctx.store.read, executor) == []  # type: ignore[arg-type]
    assert len(executor.cancelled) == 1


def test_a_group_the_executor_did_not_reach_gets_no_grace_and_is_tried_again(
    ctx: ServiceContext,
) -> None:
    executor = RecordingExecutor(reached=False)
    supervisor = _supervisor(ctx, executor)
    _hold(ctx, supervisor, _spec("0000000000b1", "KILLED"))

    assert stop_ended_elsewhere(supervisor, ctx.store.read, executor) == []  # type: ignore[arg-type]
    assert supervisor.holders["0000000000b1"].grace_deadline is None
    executor.reached = True
    assert stop_ended_elsewhere(supervisor, ctx.store.read, executor) == ["0000000000b1"]  # type: ignore[arg-type]
    assert len(executor.cancelled) == 2


def test_unreadable_unlaunched_and_owed_attempts_are_left_alone(ctx: ServiceContext) -> None:
    executor = RecordingExecutor()
    supervisor = _supervisor(ctx, executor)
    _hold(ctx, supervisor, _spec("0000000000c1", "KILLED"))
    ctx.paths.spec("0000000000c1").write_bytes(b"{ not json")  # corrupt this pass
    _hold(ctx, supervisor, _spec("0000000000c2", "KILLED"))
    ctx.paths.spec("0000000000c2").unlink()  # gone
    unlaunched = _spec("0000000000c3", "KILLED")
    ctx.paths.spec(unlaunched.id).write_bytes(encode_spec(unlaunched))
    supervisor.track(unlaunched, None, None, None, orphan=False)  # launch in flight
    _hold(ctx, supervisor, _spec("0000000000c4", "KILLED"))

    def refused() -> None:
        raise StorageError("no space left on the state root")

    supervisor._end("0000000000c4", refused)  # its end is owed, the budget stays held

    assert stop_ended_elsewhere(supervisor, ctx.store.read, executor) == []  # type: ignore[arg-type]
    assert executor.cancelled == []
    assert set(supervisor.holders) == {
        "0000000000c1",
        "0000000000c2",
        "0000000000c3",
        "0000000000c4",
    }
    assert all(holder.grace_deadline is None for holder in supervisor.holders.values())
