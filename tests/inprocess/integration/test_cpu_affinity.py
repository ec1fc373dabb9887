"""Declared CPUs hold without cgroups: thread-count variables and a CPU affinity per job.

A real daemon on a temp state root; the jobs report what they were given from inside
(``/proc/self/status`` and their environment).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Vq

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


def test_a_job_declaring_every_core_gets_them_all(vq: Vq, tmp_path: Path) -> None:
    release = tmp_path / "release"
    release.touch()
    vq.start_daemon()
    total = len(os.sched_getaffinity(0))
    job = vq.submit("--cpus", str(total), "--", "sh", "-c", REPORT, str(release))
    vq.wait_state(job, "COMPLETED")
    assert vq.spec(job)["cpu_affinity"] == sorted(os.sched_getaffinity(0))
    assert f"OMP={total} " in vq.run("logs", job).stdout


def test_affinity_off_leaves_jobs_unpinned(vq: Vq, tmp_path: Path) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[daemon]\ncpu_affinity = false\n")
    release = tmp_path / "release"
    release.touch()
    vq.start_daemon()
    job = vq.submit("--cpus", "1", "--", "sh", "-c", REPORT, str(release))
    vq.wait_state(job, "COMPLETED")
    assert vq.spec(job)["cpu_affinity"] is None
    assert _cores_line(sorted(os.sched_getaffinity(0))) in vq.run("logs", job).stdout.splitlines()
    doctor = {c["name"]: c for c in vq.json("doctor")["checks"]}
    assert "CPUs: NOT enforced" in doctor["enforcement"]["message"]


def test_doctor_says_what_is_enforced(vq: Vq) -> None:
    vq.start_daemon()
    doctor = {c["name"]: c for c in vq.json("doctor")["checks"]}
    message = doctor["enforcement"]["message"]
    assert "memory: enforced by sampling" in message
    assert "CPUs: enforced by CPU affinity" in message
