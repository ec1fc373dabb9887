"""``vq cleanup`` leaves a finished job alone while its attempt provably still runs.

The question goes through the executor protocol (``Executor.still_running``); for the
local executor that is a live member of the recorded process group that is the job's:
the leader's start ticks match, or a member carries ``VQ_JOB_ID``. Real processes in
their own sessions play the jobs' groups; nothing is mocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import wait_until
from vq.cleanup.jobs import CleanupPolicy, plan_cleanup, sweep_workdir
from vq.domain.admission import Caps
from vq.domain.spec import JobSpec
from vq.errors import Conflict
from vq.executors.base import JobHandle
from vq.executors.procs import is_alive, start_ticks
from vq.executors.registry import local_only
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.store.specs import encode_spec

LONG_AGO = datetime.now(UTC) - timedelta(days=30)


@pytest.fixture
def ctx(tmp_path: Path) -> ServiceContext:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    return ServiceContext(paths, Caps())


@pytest.fixture
def groups() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Sleepers each leading their own group; killed and reaped on the way out."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


def _group(groups: list[subprocess.Popen[bytes]], job_id: str | None) -> int:
    env = dict(os.environ)
    env.pop("VQ_JOB_ID", None)
    if job_id is not None:
        env["VQ_JOB_ID"] = job_id
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"], env=env, start_new_session=True
    )
    groups.append(proc)
    wait_until(lambda: start_ticks(proc.pid) is not None)
    return proc.pid


def _finished(ctx: ServiceContext, job_id: str, pgid: int | None, ticks: int | None) -> JobSpec:
    """A COMPLETED spec, finished long ago, with its workdir on disk."""
    spec = JobSpec.model_validate(
        {
            "id": job_id,
            "submitted_at": LONG_AGO,
            "command": ["sleep", "300"],
            "cpus": 1,
            "state": "COMPLETED",
            "started_at": LONG_AGO,
            "finished_at": LONG_AGO,
            "exit_code": 0,
            "pid": pgid,
            "pgid": pgid,
            "pid_start_time": ticks,
            "workdir": str(ctx.paths.workdir(job_id)),
        }
    )
    ctx.paths.spec(job_id).write_bytes(encode_spec(spec))
    ctx.paths.workdir(job_id).mkdir(parents=True)
    return spec


def _errors(ctx: ServiceContext) -> dict[str, str | None]:
    plan = plan_cleanup(ctx, CleanupPolicy.parse("1d", [], archive=False))
    return {item.id: item.error for _, item in plan}


def test_only_a_group_proven_to_be_the_jobs_blocks_its_cleanup(
    ctx: ServiceContext, groups: list[subprocess.Popen[bytes]]
) -> None:
    mine = _group(groups, None)
    _finished(ctx, "0000000000a1", mine, start_ticks(mine))  # its leader, same start
    by_env = _group(groups, "0000000000a2")
    _finished(ctx, "0000000000a2", by_env, None)  # no ticks recorded: VQ_JOB_ID proves it
    reused = _group(groups, None)
    _finished(ctx, "0000000000a3", reused, (start_ticks(reused) or 0) + 1)  # a reused pgid
    _finished(ctx, "0000000000a4", None, None)  # never launched here

    errors = _errors(ctx)

    assert errors["0000000000a1"] == f"its process group {mine} is still alive"
    assert errors["0000000000a2"] == f"its process group {by_env} is still alive"
    assert errors["0000000000a3"] is None
    assert errors["0000000000a4"] is None


def test_one_handle_and_many_get_the_same_answer(
    ctx: ServiceContext, groups: list[subprocess.Popen[bytes]]
) -> None:
    executor = local_only(ctx.paths).local
    live = _group(groups, None)
    handles = [
        JobHandle("0000000000b1", live, start_ticks(live)),
        JobHandle("0000000000b2", live, (start_ticks(live) or 0) + 1),
        JobHandle("0000000000b3", None, None),
    ]
    together = executor.still_running(handles)
    alone = set().union(*(executor.still_running([h]) for h in handles))
    assert together == alone == {"0000000000b1"}


def test_the_sweep_refuses_while_the_group_runs_and_proceeds_once_it_is_gone(
    ctx: ServiceContext, groups: list[subprocess.Popen[bytes]]
) -> None:
    pgid = _group(groups, "0000000000c1")
    spec = _finished(ctx, "0000000000c1", pgid, start_ticks(pgid))

    with pytest.raises(Conflict, match="still alive"):
        sweep_workdir(ctx, spec)
    assert ctx.paths.workdir(spec.id).is_dir()

    groups[0].kill()
    groups[0].wait(timeout=10)
    wait_until(lambda: not is_alive(pgid))
    assert _errors(ctx)[spec.id] is None
    assert sweep_workdir(ctx, spec).workdir_swept_at is not None
    assert not ctx.paths.workdir(spec.id).exists()
