"""GPU shapes of packed allocations on a private Slurm 22.05 with 4 fake GPUs.

The private cluster (:mod:`tests.private_slurm`: its own slurmctld and slurmd, the
testbed's GPU GRES configuration) is started beside the shared testbed, whose Slurm is
never reconfigured. A batch rendered by :mod:`vq.packing.lane_batch` goes through
``sbatch --test-only`` and a real run: every slot's step gets one whole GPU of its own.
Needs root and the testbed's Slurm; skipped without them and FAILS under ``CI=true``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.private_slurm import ClusterUnavailable, PrivateCluster, private_cluster
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.testbed import SshTestbed, unavailable
from vq.dialects.slurm_alloc import (
    SbatchRefused,
    parse_receipt,
    parse_sbatch_test_only,
    sbatch_test_only_argv,
    submit_argv,
)
from vq.packing.lane_batch import Batch, Element, next_batch
from vq.packing.profiles import PackingProfile

pytestmark = pytest.mark.timeout(180)

GPUS = 4


@dataclass(frozen=True)
class GpuSlurm:
    """The private cluster, driven as root, with its work and log roots."""

    cluster: PrivateCluster

    @property
    def root(self) -> Path:
        return self.cluster.root

    def run(self, argv: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            input=None if stdin is None else stdin.decode(),
            env=self.cluster.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.fixture(scope="module")
def gpu_slurm(slurm_testbed: SshTestbed) -> Iterator[GpuSlurm]:  # noqa: F811
    try:
        with private_cluster(cpus=8, gpus=GPUS) as started:
            for name in ("work", "logs"):
                (started.root / name).mkdir()
            slurm = GpuSlurm(started)
            done = slurm.run(["sinfo", "--noheader", f"--nodes={started.node}", "--format=%G"])
            assert done.stdout.strip() == f"gpu:{GPUS}", done.stdout + done.stderr
            yield slurm
    except ClusterUnavailable as exc:
        unavailable(str(exc))


def _profile(slurm: GpuSlurm, max_gpus: int = GPUS) -> PackingProfile:
    return PackingProfile.model_validate(
        {
            "name": "gpu",
            "target": {
                "host": "cluster",
                "partitions": [slurm.cluster.partition],
                "gpu_gres": "gpu",
                "work_root": f"{slurm.root}/work",
                "log_root": f"{slurm.root}/logs",
                "max_tasks_per_allocation": 8,
                "max_cpus_per_allocation": 8,
                "max_memory_mib_per_allocation": 2048,
                "max_gpus_per_allocation": max_gpus,
                "max_time_limit": "00:05:00",
                "max_allocations_per_submit": 8,
                "max_script_bytes": 65536,
            },
            "resources": {
                "cpus_per_task": 1,
                "memory_mib_per_task": 128,
                "gpus_per_task": 1,
                "time_limit": "00:02:00",
            },
        }
    )


def _batch(profile: PackingProfile, count: int, command: tuple[str, ...]) -> Batch:
    pending = [Element(f"{i:012x}", i, 0, command) for i in range(count)]
    batch = next_batch("cluster", "g", pending, profile, free=count)
    assert batch is not None
    return batch


def test_a_gpu_shape_passes_test_only_and_more_gpus_than_the_node_is_refused(
    gpu_slurm: GpuSlurm,
) -> None:
    batch = _batch(_profile(gpu_slurm), 4, ("true",))
    assert "--gres=gpu:4" in batch.directives
    done = gpu_slurm.run(sbatch_test_only_argv(), batch.script)
    answer = parse_sbatch_test_only(done.returncode, done.stderr)
    assert answer.nodes == gpu_slurm.cluster.node and answer.processors == 4

    too_many = _batch(_profile(gpu_slurm, max_gpus=8), 5, ("true",))
    assert "--gres=gpu:5" in too_many.directives
    done = gpu_slurm.run(sbatch_test_only_argv(), too_many.script)
    with pytest.raises(SbatchRefused, match="not available"):
        parse_sbatch_test_only(done.returncode, done.stderr)


def test_each_slot_runs_with_one_whole_gpu_of_its_own(gpu_slurm: GpuSlurm) -> None:
    profile = _profile(gpu_slurm)
    batch = _batch(profile, 4, ("sh", "-c", 'echo "gpu=$CUDA_VISIBLE_DEVICES"; sleep 1'))
    done = gpu_slurm.run(submit_argv(), batch.script)
    assert done.returncode == 0, done.stderr
    job = parse_receipt(done.stdout).scheduler_job_id
    alloc = batch.allocation_id
    work = gpu_slurm.root / "work" / alloc
    markers = [work / str(slot) / "_vq" / "exit-code" for slot in range(4)]
    wait_until(lambda: all(marker.exists() for marker in markers), 90, interval=0.5)
    assert [marker.read_text().strip() for marker in markers] == ["0"] * 4
    seen = [
        (gpu_slurm.root / "logs" / f"{alloc}-{job}-{slot}.out").read_text().strip()
        for slot in range(4)
    ]
    assert sorted(seen) == [f"gpu={i}" for i in range(GPUS)]  # one distinct GPU per slot
