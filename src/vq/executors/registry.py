"""Which executor runs a spec (see :mod:`vq.executors.base`).

No ``scheduler_target``: the local executor. A ``scheduler_target`` names a scheduler
lane (``executors/scheduler/``, behind the same protocol); a target with no configured
lane is refused with :class:`~vq.executors.base.NoExecutor`, which dispatch records as
the job's ``failure_reason`` (the job is FAILED, never left PENDING forever).
"""

from __future__ import annotations

from collections.abc import Mapping

from vq.domain.spec import JobSpec
from vq.paths import StatePaths

from .base import Executor, NoExecutor
from .local import LocalExecutor

__all__ = ["ExecutorRegistry", "local_only"]


class ExecutorRegistry:
    """The local executor plus the configured scheduler lanes, by target name."""

    def __init__(self, local: Executor, lanes: Mapping[str, Executor] | None = None) -> None:
        self.local = local
        self.lanes = dict(lanes or {})

    def select(self, spec: JobSpec) -> Executor:
        """The executor for ``spec``, or NoExecutor with the reason."""
        target = spec.scheduler_target
        if target is None:
            return self.local
        lane = self.lanes.get(target)
        if lane is None:
            configured = (
                f"the configured lanes are {', '.join(sorted(self.lanes))}"
                if self.lanes
                else "no scheduler lane is configured"
            )
            raise NoExecutor(
                f"no executor for scheduler target {target!r}: {configured}",
                hint="configure the scheduler lane, or resubmit without a scheduler target",
            )
        return lane


def local_only(paths: StatePaths) -> ExecutorRegistry:
    """The registry of a process without a daemon (the CLI's direct kill/pause/resume):
    the local executor, able to signal but not to launch."""
    return ExecutorRegistry(LocalExecutor(paths))
