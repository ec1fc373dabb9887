"""One rendered packed allocation on the testbed's real Slurm 22.05, submitted over SSH.

Two one-CPU tasks (``true`` and ``exit 3``, each sleeping 3 s) go into one allocation as
user ``vqtest`` through :class:`~vq.transport.ssh.SshRunner`. Checked: each slot's exit
marker, its own log, byte-exact stdin, the steps overlapping in time (both started within
2 s), and accounting's record of the two steps. The testbed node has 2 CPUs, so two slots
is what can run at once. Needs root (the testbed); skipped on a developer machine without
it and FAILS under ``CI=true``.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.testbed import SshRunnerFactory, SshTestbed
from vq.packing.planner import PlanInputs, TaskView, View, plan_document
from vq.packing.profiles import PackingProfile
from vq.packing.roster import Task
from vq.transport.ssh import SshRunner


@pytest.fixture
def testbed(slurm_testbed: SshTestbed) -> SshTestbed:  # noqa: F811 - the fixture
    return slurm_testbed  # what ssh_runner_factory builds on


@pytest.fixture
def remote_base() -> Iterator[Path]:
    base = Path("/tmp") / f"vq-pack-{secrets.token_hex(4)}"
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _profile(base: Path) -> PackingProfile:
    return PackingProfile.model_validate(
        {
            "name": "testbed",
            "target": {
                "host": "vq-local",
                "partitions": ["debug"],
                "work_root": str(base / "work"),
                "log_root": str(base / "logs"),
                "max_tasks_per_allocation": 2,
                "max_cpus_per_allocation": 2,
                "max_memory_mib_per_allocation": 1024,
                "max_gpus_per_allocation": 0,
                "max_time_limit": "00:05:00",
                "max_allocations_per_submit": 1,
                "max_script_bytes": 65536,
            },
            "resources": {
                "cpus_per_task": 1,
                "memory_mib_per_task": 256,
                "gpus_per_task": 0,
                "time_limit": "00:02:00",
            },
        }
    )


STDIN = b"exact bytes\x00\xff\n"
TASKS = [
    Task("ok", ("sh", "-c", "date +%s.%N >started; cat >got-stdin; sleep 3; true"), STDIN),
    Task("bad", ("sh", "-c", "date +%s.%N >started; sleep 3; echo to-the-slot-log; exit 3")),
]


def _slurm(runner: SshRunner, *argv: str) -> str:
    result = runner.run(list(argv), deadline_s=30)
    result.check(argv[0])
    return result.stdout.decode()


@pytest.mark.timeout(240)
def test_one_packed_allocation_on_real_slurm(
    ssh_runner_factory: SshRunnerFactory, remote_base: Path
) -> None:
    runner = ssh_runner_factory("vq-local")
    profile = _profile(remote_base)
    _slurm(runner, "mkdir", "-p", profile.target.work_root, profile.target.log_root)
    view = View(revision=1, observed_at=None, tasks={t.key: TaskView(t.key) for t in TASKS})
    document, scripts = plan_document(
        PlanInputs(
            pack="testbed",
            pack_id=secrets.token_hex(16),
            revision=1,
            sealed=True,
            roster=TASKS,
            attempts=[],
            view=view,
            profile=profile,
        )
    )
    (allocation,) = document["allocations"]
    alloc = allocation["allocation_id"]
    result = runner.run(["sbatch", "--parsable"], stdin=scripts[alloc], deadline_s=30)
    result.check("sbatch")
    job_id = result.stdout.decode().strip().split(";")[0]
    assert job_id.isdigit(), job_id
    try:
        work = remote_base / "work" / alloc
        markers = [work / str(slot) / "_vq" / "exit-code" for slot in range(2)]
        wait_until(lambda: all(marker.exists() for marker in markers), timeout=150, interval=0.5)
        assert [marker.read_text() for marker in markers] == ["0\n", "3\n"]
        assert (work / "0" / "got-stdin").read_bytes() == STDIN
        starts = [float((work / str(slot) / "started").read_text()) for slot in range(2)]
        assert abs(starts[0] - starts[1]) < 2.0, starts  # the steps ran side by side
        logs = remote_base / "logs"
        assert (logs / f"{alloc}-{job_id}-1.out").read_text() == "to-the-slot-log\n"
        assert (logs / f"{alloc}-{job_id}-0.out").exists()
        wait_until(lambda: (logs / f"{alloc}-{job_id}.out").exists(), timeout=30)

        def steps() -> dict[str, str] | None:
            text = _slurm(
                runner, "sacct", "-j", job_id, "-n", "-P", "--format=JobID,JobName,ExitCode,State"
            )
            rows = {line.split("|")[0]: line for line in text.splitlines() if line}
            wanted = (f"{job_id}.0", f"{job_id}.1", job_id)
            # Accounting catches up in stages (the job row briefly carries a placeholder
            # name): wait for the finished record under the allocation's own name.
            done = (
                all(key in rows for key in wanted)
                and "RUNNING" not in text
                and rows[job_id].split("|")[1] == f"vqp-{alloc}"
            )
            return rows if done else None

        rows = wait_until(steps, timeout=60, interval=1.0)
        # Step numbers follow start order, not slots: the slot markers own the mapping.
        codes = sorted(rows[f"{job_id}.{step}"].split("|")[2] for step in (0, 1))
        assert codes == ["0:0", "3:0"]
        # each step carries its slot's name: accounting maps steps to slots by it
        by_name = {rows[f"{job_id}.{s}"].split("|")[1]: rows[f"{job_id}.{s}"] for s in (0, 1)}
        assert by_name[f"vqp-{alloc}-1"].split("|")[2] == "3:0"
        assert by_name[f"vqp-{alloc}-0"].split("|")[2] == "0:0"
        assert "FAILED" in rows[job_id]  # the script exits 1 when a slot failed
        comment = _slurm(runner, "sacct", "-j", job_id, "-n", "-X", "-P", "--format=Comment")
        assert comment.strip() in ("", f"vq-pack:{alloc}")
    finally:
        subprocess.run(["scancel", job_id], capture_output=True, check=False, timeout=30)
