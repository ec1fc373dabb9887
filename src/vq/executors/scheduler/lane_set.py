"""The lanes a daemon drives now, rebuilt from ``[hosts]`` when the configuration reloads.

:class:`LaneSet` is a mapping of lane name → :class:`~.lane.SchedulerLane`, owned by the
daemon loop (which ticks :meth:`LaneSet.active`): every method runs on the loop
(:meth:`.loop_guard.LoopGuard.assert_on_loop`). Other threads (the RPC handlers, the
executor registry selecting a lane for a kill, pause or resume) read
:attr:`LaneSet.published`, an immutable :class:`LaneSnapshot` the loop replaces whenever
the set changes, and reach a lane itself only through the loop's call mechanism.

On :meth:`LaneSet.reconfigure`:

* a lane whose settings did not change is kept as it is (its tracked jobs, its poll
  schedule, its SSH master connection);
* a new lane is built and adopts every spec already aimed at it (§4.7), like the lanes of
  a restarted daemon do at its recovery pass;
* a changed or removed lane is *retired*: it is no longer ticked (no new claim, step or
  poll), while the worker answers already in flight still apply to it. Once nothing is
  in flight it is closed; a changed lane's replacement is then built from the new
  settings and adopts the lane's jobs from disk like a restarted daemon would;
* the jobs of a removed lane are left exactly as they are on disk (RUNNING, with their
  scheduler ids and states): nothing is failed, cancelled or forgotten. A reload that
  brings the lane back adopts them. Its PENDING jobs stay PENDING (the lane is *parked*,
  see :meth:`LaneSet.parked`), where a target that was never configured fails them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from vq.config.hosts import HostSettings, LaneSettings, is_local_name, lanes_of

from .lane import SchedulerLane
from .loop_guard import LoopGuard

__all__ = ["LaneChanges", "LaneSet", "LaneSnapshot", "driven_lanes"]

#: Builds one lane from its settings (the composition root binds the daemon's parts).
LaneFactory = Callable[[LaneSettings], SchedulerLane]


def driven_lanes(hosts: dict[str, HostSettings]) -> dict[str, LaneSettings]:
    """The lanes of ``hosts`` this daemon drives (``scheduler_driver = "localhost"``)."""
    return {name: lane for name, lane in lanes_of(hosts).items() if is_local_name(lane.driver)}


@dataclass
class LaneChanges:
    """What a reconfiguration did, by lane name (sorted lists)."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LaneSnapshot:
    """What other threads may read of the lane set: the lanes that own jobs now
    (active or retiring) with their settings, and the parked names."""

    settings: Mapping[str, LaneSettings] = field(default_factory=lambda: MappingProxyType({}))
    parked: frozenset[str] = frozenset()

    def is_parked(self, name: str) -> bool:
        """A lane a reload removed while this daemon ran (see :meth:`LaneSet.parked`)."""
        return name in self.parked and name not in self.settings


@dataclass
class _Retiring:
    lane: SchedulerLane
    replacement: LaneSettings | None  # None: removed


class LaneSet(Mapping[str, SchedulerLane]):
    """The daemon's scheduler lanes (see the module docstring)."""

    def __init__(
        self, make: LaneFactory, hosts: dict[str, HostSettings], guard: LoopGuard | None = None
    ) -> None:
        self._make = make
        self.guard = guard or LoopGuard()
        self._lanes: dict[str, SchedulerLane] = {}
        self._retiring: dict[str, _Retiring] = {}
        self._parked: set[str] = set()
        #: The immutable view other threads read (replaced, never changed, on the loop).
        self.published = LaneSnapshot()
        for name, settings in sorted(driven_lanes(hosts).items()):
            self._lanes[name] = make(settings)
        self._publish()

    def loop_started(self) -> None:
        """The calling thread is the daemon loop from now on (it owns the lanes)."""
        self.guard.bind()

    def _publish(self) -> None:
        owning = {name: lane.settings for name, lane in self._lanes.items()}
        owning.update({name: r.lane.settings for name, r in self._retiring.items()})
        self.published = LaneSnapshot(MappingProxyType(owning), frozenset(self._parked))

    # --- the mapping: active lanes, then retiring ones (they still own their jobs) ------
    def __getitem__(self, name: str) -> SchedulerLane:
        self.guard.assert_on_loop()
        if name in self._lanes:
            return self._lanes[name]
        return self._retiring[name].lane

    def __iter__(self) -> Iterator[str]:
        self.guard.assert_on_loop()
        return iter(sorted(set(self._lanes) | set(self._retiring)))

    def __len__(self) -> int:
        return len(set(self._lanes) | set(self._retiring))

    def active(self) -> list[SchedulerLane]:
        """The lanes the loop ticks."""
        self.guard.assert_on_loop()
        return [self._lanes[name] for name in sorted(self._lanes)]

    def parked(self, name: str) -> bool:
        """Whether ``name`` is a lane a reload removed while this daemon ran (its
        PENDING jobs wait for it to come back instead of failing); any thread."""
        return self.published.is_parked(name)

    @property
    def retiring(self) -> bool:
        return bool(self._retiring)

    # --- reconfiguration -----------------------------------------------------------------
    def reconfigure(self, hosts: dict[str, HostSettings]) -> LaneChanges:
        """Apply a new ``[hosts]`` table (on the loop); retirements finish in :meth:`settle`."""
        self.guard.assert_on_loop()
        wanted = driven_lanes(hosts)
        changes = LaneChanges()
        for name in sorted(set(self._lanes) | set(self._retiring) | set(wanted)):
            new = wanted.get(name)
            current = self._lanes.get(name)
            retiring = self._retiring.get(name)
            if current is not None:
                if new is None:
                    self._retire(name, None)
                    changes.removed.append(name)
                elif new != current.settings:
                    self._retire(name, new)
                    changes.changed.append(name)
                else:
                    changes.kept.append(name)
            elif retiring is not None:
                if retiring.replacement != new:
                    (changes.removed if new is None else changes.changed).append(name)
                retiring.replacement = new
            elif new is not None:
                self._add(name, new)
                self._parked.discard(name)
                changes.added.append(name)
        self.settle()
        self._publish()
        return changes

    def _add(self, name: str, settings: LaneSettings) -> None:
        """A lane built while the daemon runs adopts its jobs now, as at a restart."""
        lane = self._make(settings)
        self._lanes[name] = lane
        lane.adopt()

    def _retire(self, name: str, replacement: LaneSettings | None) -> None:
        self.guard.assert_on_loop()
        self._retiring[name] = _Retiring(self._lanes.pop(name), replacement)

    def settle(self) -> None:
        """Close the retired lanes with nothing in flight; build their replacements."""
        self.guard.assert_on_loop()
        if not self._retiring:
            return
        for name in list(self._retiring):
            retiring = self._retiring[name]
            if not retiring.lane.idle:
                continue
            retiring.lane.close()
            del self._retiring[name]
            if retiring.replacement is None:
                self._parked.add(name)
            else:
                self._add(name, retiring.replacement)
        self._publish()

    def close(self) -> None:
        """Close every lane (the daemon stops)."""
        self.guard.assert_on_loop()
        for lane in self._lanes.values():
            lane.close()
        for retiring in self._retiring.values():
            retiring.lane.close()
