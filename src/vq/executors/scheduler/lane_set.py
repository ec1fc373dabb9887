"""The lanes a daemon drives now, rebuilt from ``[hosts]`` when the configuration reloads.

:class:`LaneSet` is a mapping of lane name → :class:`~.lane.SchedulerLane` shared by the
daemon loop (which ticks :meth:`LaneSet.active`), the executor registry (kill, pause and
resume of a lane's job) and the RPC handlers. Every method runs on the daemon loop.

On :meth:`LaneSet.reconfigure`:

* a lane whose settings did not change is kept as it is (its tracked jobs, its poll
  schedule, its SSH master connection);
* a new lane is built; its first tick adopts every spec already aimed at it (§4.7);
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

from vq.config.hosts import HostSettings, LaneSettings, is_local_name, lanes_of

from .lane import SchedulerLane

__all__ = ["LaneChanges", "LaneSet", "driven_lanes"]

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


@dataclass
class _Retiring:
    lane: SchedulerLane
    replacement: LaneSettings | None  # None: removed


class LaneSet(Mapping[str, SchedulerLane]):
    """The daemon's scheduler lanes (see the module docstring)."""

    def __init__(self, make: LaneFactory, hosts: dict[str, HostSettings]) -> None:
        self._make = make
        self._lanes: dict[str, SchedulerLane] = {}
        self._retiring: dict[str, _Retiring] = {}
        self._parked: set[str] = set()
        for name, settings in sorted(driven_lanes(hosts).items()):
            self._lanes[name] = make(settings)

    # --- the mapping: active lanes, then retiring ones (they still own their jobs) ------
    def __getitem__(self, name: str) -> SchedulerLane:
        if name in self._lanes:
            return self._lanes[name]
        return self._retiring[name].lane

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set(self._lanes) | set(self._retiring)))

    def __len__(self) -> int:
        return len(set(self._lanes) | set(self._retiring))

    def active(self) -> list[SchedulerLane]:
        """The lanes the loop ticks."""
        return [self._lanes[name] for name in sorted(self._lanes)]

    def parked(self, name: str) -> bool:
        """Whether ``name`` is a lane a reload removed while this daemon ran (its PENDING
        jobs wait for it to come back instead of failing)."""
        return name in self._parked and name not in self

    @property
    def retiring(self) -> bool:
        return bool(self._retiring)

    # --- reconfiguration -----------------------------------------------------------------
    def reconfigure(self, hosts: dict[str, HostSettings]) -> LaneChanges:
        """Apply a new ``[hosts]`` table (on the loop); retirements finish in :meth:`settle`."""
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
                self._lanes[name] = self._make(new)
                self._parked.discard(name)
                changes.added.append(name)
        self.settle()
        return changes

    def _retire(self, name: str, replacement: LaneSettings | None) -> None:
        self._retiring[name] = _Retiring(self._lanes.pop(name), replacement)

    def settle(self) -> None:
        """Close the retired lanes with nothing in flight; build their replacements."""
        for name in list(self._retiring):
            retiring = self._retiring[name]
            if not retiring.lane.idle:
                continue
            retiring.lane.close()
            del self._retiring[name]
            if retiring.replacement is None:
                self._parked.add(name)
            else:
                self._lanes[name] = self._make(retiring.replacement)

    def close(self) -> None:
        """Close every lane (the daemon stops)."""
        for lane in self._lanes.values():
            lane.close()
        for retiring in self._retiring.values():
            retiring.lane.close()
