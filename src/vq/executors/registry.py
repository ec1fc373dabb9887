"""Which executor runs a spec (see :mod:`vq.executors.base`).

No ``scheduler_target``: the local executor. A ``scheduler_target`` names a scheduler
lane (``executors/scheduler/``), whose :class:`~vq.executors.base.JobControl` the daemon
gives (answered on its loop); a target with no configured
lane is refused with :class:`~vq.executors.base.NoExecutor`, which dispatch records as
the job's ``failure_reason`` (the job is FAILED, never left PENDING forever).

This is the one place that reads a spec's execution target: the daemon's dispatcher and
recovery pass ask :meth:`ExecutorRegistry.partition` (or :meth:`~ExecutorRegistry.is_local`)
which specs are theirs, and never branch on ``scheduler_target`` themselves
(``tests/architecture/test_seams.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from vq.domain.spec import JobSpec
from vq.paths import StatePaths

from .base import Executor, JobControl, NoExecutor
from .local import LocalExecutor

__all__ = ["ExecutorRegistry", "Placement", "local_only"]


@dataclass(frozen=True)
class Placement:
    """Specs sorted by the executor that runs them (input order kept in each list).

    ``local``: the local executor's; ``by_lane``: each configured scheduler lane's, by
    lane name (a lane dispatches and recovers its own); ``unplaced``: specs whose target
    names no configured lane, each with the refusal that says so.
    """

    local: list[JobSpec] = field(default_factory=list)
    by_lane: dict[str, list[JobSpec]] = field(default_factory=dict)
    unplaced: list[tuple[JobSpec, NoExecutor]] = field(default_factory=list)


class ExecutorRegistry:
    """The local executor plus the configured scheduler lanes' controls, by target name.
    Safe on any thread when ``lanes`` and ``parked`` are (the daemon gives views of the
    snapshot its loop publishes)."""

    def __init__(
        self,
        local: Executor,
        lanes: Mapping[str, JobControl] | None = None,
        *,
        parked: Callable[[str], bool] = lambda name: False,
    ) -> None:
        """``lanes`` is read at each selection (a reload may rebuild it); ``parked`` names
        a lane a reload removed, whose PENDING jobs wait instead of failing."""
        self.local = local
        self.lanes: Mapping[str, JobControl] = lanes if lanes is not None else {}
        self._parked = parked

    @staticmethod
    def lane_of(spec: JobSpec) -> str | None:
        """The scheduler lane ``spec`` is aimed at, or None for the local executor
        (whether or not such a lane is configured)."""
        return spec.scheduler_target

    def is_local(self, spec: JobSpec) -> bool:
        """Whether the local executor runs ``spec`` (no scheduler target)."""
        return self.lane_of(spec) is None

    def select(self, spec: JobSpec) -> JobControl:
        """The control of ``spec``'s executor, or NoExecutor with the reason."""
        target = self.lane_of(spec)
        if target is None:
            return self.local
        lane = self.lanes.get(target)
        if lane is None:
            configured = (
                f"the configured lanes are {', '.join(sorted(self.lanes))}"
                if self.lanes
                else "no scheduler lane is configured"
            )
            if self._parked(target):
                raise NoExecutor(
                    f"the scheduler lane {target!r} was removed by a reload; its jobs wait "
                    "for it to come back",
                    hint=f"add [hosts.{target}] back and run `vq daemon reload`",
                    parked=True,
                )
            raise NoExecutor(
                f"no executor for scheduler target {target!r}: {configured}",
                hint="configure the scheduler lane, or resubmit without a scheduler target",
            )
        return lane

    def partition(self, specs: Iterable[JobSpec]) -> Placement:
        """Hand each spec to its executor (see :class:`Placement`)."""
        placed = Placement()
        for spec in specs:
            target = self.lane_of(spec)
            if target is None:
                placed.local.append(spec)
            elif target in self.lanes:
                placed.by_lane.setdefault(target, []).append(spec)
            else:
                try:
                    self.select(spec)
                except NoExecutor as refusal:
                    placed.unplaced.append((spec, refusal))
        return placed


def local_only(paths: StatePaths) -> ExecutorRegistry:
    """The registry of a process without a daemon (the CLI's direct kill/pause/resume):
    the local executor, able to signal but not to launch."""
    return ExecutorRegistry(LocalExecutor(paths))
