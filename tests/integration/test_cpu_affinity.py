"""Declared CPUs hold without cgroups: thread-count variables and a CPU affinity per job.

A real daemon on a temp state root; the jobs report what they were given from inside
(``/proc/self/status`` and their environment).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Vq, wait_until

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs sched_setaffinity and at least two usable cores",
)

#: Print the job's allowed cores and thread variables, then wait for the release file.
REPORT = (
    "grep Cpus_allowed_list /proc/self/status; "
    'echo "OMP=$OMP_NUM_THREADS MKL=$MKL_NUM_THREADS '
    'OPENBLAS=$OPENBLAS_NUM_THREADS NUMEXPR=$NUMEXPR_NUM_THREADS"; '
    'while [ ! -e "$0" ]; do sleep 0.05; done'
)


def _cores_line(cores: list[int]) -> str:
    from vq.domain.affinity import format_cores

    return f"Cpus_allowed_list:\t{format_cores(cores)}"


def _logs_when_reported(vq: Vq, job: str) -> str | None:
    out = vq.run("logs", job).stdout
    return out if "OMP=" in out else None


def test_running_jobs_get_disjoint_cores_and_thread_variables(vq: Vq, tmp_path: Path) -> None:
    release = tmp_path / "release"
    vq.env["MKL_NUM_THREADS"] = "5"  # the job's own environment wins for this one
    vq.env.pop("OMP_NUM_THREADS", None)
    vq.start_daemon()
    first = vq.submit("--cpus", "1", "--", "sh", "-c", REPORT, str(release))
    second = vq.submit("--cpus", "1", "--", "sh", "-c", REPORT, str(release))
    for job in (first, second):
        vq.wait_state(job, "RUNNING")
    cores = [vq.spec(job)["cpu_affinity"] for job in (first, second)]
    assert all(c is not None and len(c) == 1 for c in cores), cores
    assert set(cores[0]).isdisjoint(cores[1])
    for job, mine in zip((first, second), cores, strict=True):
        out = wait_until(lambda job=job: _logs_when_reported(vq, job))
        assert _cores_line(mine) in out.splitlines()
        assert "OMP=1 MKL=5 OPENBLAS=1 NUMEXPR=1" in out.splitlines()
        shown = vq.run("status", job).stdout
        assert f"cores {mine[0]}" in shown
    top = vq.json("top")
    assert sorted(j["cpu_affinity"] for j in top["jobs"]) == sorted(cores)
    release.touch()
    for job in (first, second):
        vq.wait_state(job, "COMPLETED")
