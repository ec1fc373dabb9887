"""A pass whose launches the state root refuses (a full disk, an I/O error) sends nothing
more and puts back every claim it made, not only the one whose launch failed: no job is
left RUNNING with no collector and no budget until the next daemon start."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from vq.daemon.dispatch import Dispatcher
from vq.daemon.index import JobIndex
from vq.daemon.supervisor import Supervisor
from vq.domain.admission import Caps
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import StorageError
from vq.executors.base import LaunchResult
from vq.executors.local import LocalExecutor
from vq.executors.registry import ExecutorRegistry
from vq.paths import StatePaths
from vq.protocol.messages import SubmitParams
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle
from vq.services.submit import submit


class FullDiskExecutor(LocalExecutor):
    """The local executor on a state root that takes no more files: every launch is
    refused before anything is sent, as :meth:`LocalExecutor.launch` refuses one when
    the job's directories cannot be made."""

    def __init__(self, paths: StatePaths) -> None:
        super().__init__(paths)
        self.attempted: list[str] = []

    def launch(
        self,
        spec: JobSpec,
        env: Mapping[str, str],
        mem_mb: int | None,
        reply: Callable[[LaunchResult], None],
    ) -> None:
        self.attempted.append(spec.id)
        raise StorageError(f"no space left on {self.paths.root}", hint="free space there")


def test_a_refused_launch_puts_back_every_claim_of_its_pass(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    ctx = ServiceContext(paths, Caps(max_jobs=3, max_cpus=8))
    jobs = [submit(ctx, SubmitParams(command=["true"])).spec.id for _ in range(3)]
    index = JobIndex(ctx.store)
    lifecycle = Lifecycle(ctx, on_change=index.upsert)
    executor = FullDiskExecutor(paths)
    supervisor = Supervisor(ctx, lifecycle, executor)
    index.load()
    dispatcher = Dispatcher(ctx, supervisor, ExecutorRegistry(executor), index, lifecycle, {})

    with pytest.raises(StorageError):
        dispatcher.run_pass()

    assert executor.attempted == jobs[:1]  # nothing more was sent after the refusal
    assert [ctx.store.read(job).state for job in jobs] == [JobState.PENDING] * 3
    assert sorted(e.id for e in index.in_states([JobState.PENDING])) == sorted(jobs)
    assert supervisor.usage().jobs == 0
