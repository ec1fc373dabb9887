"""The registry hands each executor its specs: local, a configured lane, or refused."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from vq.domain.spec import JobSpec
from vq.executors.base import Executor, NoExecutor
from vq.executors.local import LocalExecutor
from vq.executors.registry import ExecutorRegistry
from vq.paths import StatePaths


def _spec(name: str, target: str | None = None) -> JobSpec:
    return JobSpec(
        id=f"{int(name[1:], 16):012x}",
        job_name=name,
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        command=["true"],
        cpus=1,
        scheduler_target=target,
    )


@pytest.fixture
def registry(tmp_path: Path) -> ExecutorRegistry:
    local = LocalExecutor(StatePaths(tmp_path))
    lane: Executor = LocalExecutor(StatePaths(tmp_path / "lane"))  # any Executor will do
    return ExecutorRegistry(local, {"cluster-a": lane})


def test_partition_hands_each_executor_its_specs_in_order(registry: ExecutorRegistry) -> None:
    specs = [
        _spec("j1"),
        _spec("j2", "cluster-a"),
        _spec("j3", "nowhere"),
        _spec("j4"),
        _spec("j5", "cluster-a"),
    ]
    placed = registry.partition(specs)
    assert [s.job_name for s in placed.local] == ["j1", "j4"]
    assert {lane: [s.job_name for s in got] for lane, got in placed.by_lane.items()} == {
        "cluster-a": ["j2", "j5"]
    }
    assert [(s.job_name, type(r)) for s, r in placed.unplaced] == [("j3", NoExecutor)]
    refusal = placed.unplaced[0][1]
    assert refusal.message == (
        "no executor for scheduler target 'nowhere': the configured lanes are cluster-a"
    )
    assert refusal.hint


def test_select_and_is_local_agree_with_partition(registry: ExecutorRegistry) -> None:
    assert registry.is_local(_spec("j10"))
    assert registry.select(_spec("j10")) is registry.local
    assert not registry.is_local(_spec("j11", "cluster-a"))
    assert registry.select(_spec("j11", "cluster-a")) is registry.lanes["cluster-a"]
    assert not registry.is_local(_spec("j12", "nowhere"))  # never the local executor's
    with pytest.raises(NoExecutor, match="nowhere"):
        registry.select(_spec("j12", "nowhere"))
    assert ExecutorRegistry.lane_of(_spec("j12", "nowhere")) == "nowhere"
    assert ExecutorRegistry.lane_of(_spec("j10")) is None
