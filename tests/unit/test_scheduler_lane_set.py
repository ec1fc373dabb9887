"""LaneSet: lanes added, kept, changed and removed by a reload; retirement waits for idle."""

from __future__ import annotations

from typing import Any, cast

from vq.config.hosts import HostSettings, LaneSettings
from vq.executors.base import NoExecutor
from vq.executors.registry import ExecutorRegistry
from vq.executors.scheduler import LaneSet, SchedulerLane


class StubLane:
    def __init__(self, settings: LaneSettings) -> None:
        self.name = settings.name
        self.settings = settings
        self.idle = True
        self.closed = False
        self.adopted = False

    def adopt(self) -> None:
        self.adopted = True

    def close(self) -> None:
        self.closed = True


def _hosts(**lanes: dict[str, Any]) -> dict[str, HostSettings]:
    return {
        name: HostSettings.model_validate(
            {"ssh": "login", "scheduler_dialect": "slurm", "scratch_root": "/s", **keys}
        )
        for name, keys in lanes.items()
    }


def _set(hosts: dict[str, HostSettings]) -> tuple[LaneSet, list[StubLane]]:
    made: list[StubLane] = []

    def make(settings: LaneSettings) -> SchedulerLane:
        made.append(StubLane(settings))
        return cast(SchedulerLane, made[-1])

    return LaneSet(make, hosts), made


def test_only_lanes_this_daemon_drives_are_built() -> None:
    lanes, made = _set(_hosts(a={}, b={"scheduler_driver": "elsewhere"}))
    assert list(lanes) == ["a"] and [lane.name for lane in made] == ["a"]


def test_reload_adds_keeps_changes_and_removes() -> None:
    lanes, made = _set(_hosts(keep={}, change={}, drop={}))
    first = dict(lanes)
    changes = lanes.reconfigure(_hosts(keep={}, change={"poll_interval": 5}, new={}))
    assert (changes.added, changes.changed, changes.removed, changes.kept) == (
        ["new"],
        ["change"],
        ["drop"],
        ["keep"],
    )
    assert lanes["keep"] is first["keep"]  # untouched: same object, same tracked jobs
    assert lanes["change"] is not first["change"]
    assert lanes["change"].settings.poll_interval == 5
    assert cast(StubLane, first["change"]).closed and cast(StubLane, first["drop"]).closed
    assert "drop" not in lanes and lanes.parked("drop")
    assert sorted(lane.name for lane in lanes.active()) == ["change", "keep", "new"]
    assert len(made) == 5


def test_a_busy_lane_is_retired_once_idle_and_still_owns_its_jobs_meanwhile() -> None:
    lanes, made = _set(_hosts(a={}))
    old = made[0]
    old.idle = False
    lanes.reconfigure(_hosts(a={"poll_interval": 7}))
    assert lanes.active() == [] and lanes["a"] is cast(SchedulerLane, old) and not old.closed
    lanes.settle()
    assert not old.closed
    old.idle = True
    lanes.settle()
    assert old.closed and lanes["a"].settings.poll_interval == 7


def test_a_removed_lane_parks_its_pending_jobs_until_it_is_back() -> None:
    lanes, _ = _set(_hosts(a={}))
    registry = ExecutorRegistry(cast(Any, object()), cast(Any, lanes), parked=lanes.parked)
    lanes.reconfigure({})
    spec = cast(Any, type("Spec", (), {"scheduler_target": "a"})())
    try:
        registry.select(spec)
    except NoExecutor as exc:
        assert exc.parked and "removed by a reload" in exc.message
    else:
        raise AssertionError("a removed lane must not select")
    never = cast(Any, type("Spec", (), {"scheduler_target": "zz"})())
    try:
        registry.select(never)
    except NoExecutor as exc:
        assert not exc.parked
    lanes.reconfigure(_hosts(a={}))
    assert registry.select(spec) is cast(Any, lanes["a"]) and not lanes.parked("a")


def test_a_lane_a_reload_builds_adopts_its_jobs_at_once() -> None:
    """A lane built while the daemon runs (added, or a changed lane's replacement)
    adopts its jobs from disk when it is built, like a restarted daemon's lanes at the
    recovery pass; the lanes of the start are adopted by that pass, not here."""
    lanes, made = _set(_hosts(a={}))
    assert [lane.adopted for lane in made] == [False]
    lanes.reconfigure(_hosts(a={"poll_interval": 7}, b={}))
    made[0].idle = True
    lanes.settle()
    assert {lane.name: lane.adopted for lane in made[1:]} == {"b": True, "a": True}


def test_other_threads_read_the_published_snapshot() -> None:
    lanes, _ = _set(_hosts(a={}))
    before = lanes.published
    lanes.reconfigure(_hosts(a={}, b={}))
    assert sorted(before.settings) == ["a"]  # a snapshot is never changed
    assert sorted(lanes.published.settings) == ["a", "b"]
    lanes.reconfigure(_hosts(b={}))
    lanes.settle()
    assert lanes.published.is_parked("a") and not lanes.published.is_parked("b")
