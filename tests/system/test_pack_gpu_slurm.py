"""GPU shapes of packed allocations on a private Slurm 22.05 with 4 fake GPUs.

The test starts its own slurmctld and slurmd (other ports, its own state, no accounting)
with the testbed's GPU GRES configuration (``scripts/testbed/lib.sh``: ``gres_conf`` and
``fake_gpu_devices``, as ``VQ_TESTBED_SLURM_GPUS`` writes them), so the shared testbed
Slurm is never reconfigured. A batch rendered by :mod:`vq.packing.lane_batch` goes through
``sbatch --test-only`` and a real run: every slot's step gets one whole GPU of its own.
Needs root and the Slurm daemons; skipped without them and FAILS under ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.testbed import unavailable
from vq.packing.lane_batch import Batch, Element, next_batch
from vq.packing.profiles import PackingProfile
from vq.packing.slurm_text import (
    SbatchRefused,
    parse_parsable,
    parse_sbatch_test_only,
    sbatch_test_only_argv,
    submit_argv,
)

pytestmark = pytest.mark.timeout(180)

LIB = Path(__file__).resolve().parents[2] / "scripts" / "testbed" / "lib.sh"
NODE = "vqgpunode"
GPUS = 4


@dataclass(frozen=True)
class PrivateSlurm:
    root: Path
    env: dict[str, str]

    def run(self, argv: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            input=None if stdin is None else stdin.decode(),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _conf(root: Path, ctld_port: int, slurmd_port: int) -> str:
    return "\n".join(
        [
            f"ClusterName=vqgpu{os.getpid()}",
            f"SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)",
            "SlurmUser=root",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd.pid",
            f"SlurmctldLogFile={root}/slurmctld.log",
            f"SlurmdLogFile={root}/slurmd.log",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "DefMemPerCPU=256",
            "ReturnToService=2",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MailProg=/bin/true",
            "SlurmdParameters=config_overrides",
            "GresTypes=gpu",
            f"NodeName={NODE} NodeAddr=127.0.0.1 CPUs=8 Boards=1 SocketsPerBoard=1 "
            f"CoresPerSocket=8 ThreadsPerCore=1 RealMemory=2048 Gres=gpu:{GPUS} State=UNKNOWN",
            "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def gpu_slurm() -> Iterator[PrivateSlurm]:
    if os.geteuid() != 0:
        unavailable("a private slurmd needs root")
    if not (Path("/usr/sbin/slurmctld").exists() and Path("/usr/sbin/slurmd").exists()):
        unavailable("the Slurm daemons are not installed")
    root = Path(tempfile.mkdtemp(prefix="vq-gpu-slurm-", dir="/tmp"))
    for name in ("state", "spool", "work", "logs"):
        (root / name).mkdir()
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, *_free_ports(2)))
    gres = subprocess.run(
        [
            "bash",
            "-c",
            '. "$1" && fake_gpu_devices "$2/dev" "$3" && gres_conf "$4" "$2/dev" "$3"',
            "bash",
            str(LIB),
            str(root),
            str(GPUS),
            NODE,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    (root / "gres.conf").write_text(gres.stdout)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        for argv in (
            ["/usr/sbin/slurmctld", "-D", "-f", str(conf)],
            ["/usr/sbin/slurmd", "-D", "-N", NODE, "-f", str(conf)],
        ):
            daemons.append(
                subprocess.Popen(
                    argv,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        slurm = PrivateSlurm(root, env)

        def node_state() -> str | None:
            done = slurm.run(["sinfo", "--noheader", f"--nodes={NODE}", "--format=%T %G"])
            state = done.stdout.strip()
            return state if done.returncode == 0 and state.startswith("idle") else None

        assert wait_until(node_state, 60, interval=0.5) == f"idle gpu:{GPUS}"
        yield slurm
    finally:
        for proc in reversed(daemons):
            _stop(proc)
        shutil.rmtree(root, ignore_errors=True)


def _profile(root: Path, max_gpus: int = GPUS) -> PackingProfile:
    return PackingProfile.model_validate(
        {
            "name": "gpu",
            "target": {
                "host": "cluster",
                "partitions": ["gpu"],
                "gpu_gres": "gpu",
                "work_root": f"{root}/work",
                "log_root": f"{root}/logs",
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
    gpu_slurm: PrivateSlurm,
) -> None:
    batch = _batch(_profile(gpu_slurm.root), 4, ("true",))
    assert "--gres=gpu:4" in batch.directives
    done = gpu_slurm.run(sbatch_test_only_argv(), batch.script)
    answer = parse_sbatch_test_only(done.returncode, done.stderr)
    assert answer.nodes == NODE and answer.processors == 4

    too_many = _batch(_profile(gpu_slurm.root, max_gpus=8), 5, ("true",))
    assert "--gres=gpu:5" in too_many.directives
    done = gpu_slurm.run(sbatch_test_only_argv(), too_many.script)
    with pytest.raises(SbatchRefused, match="not available"):
        parse_sbatch_test_only(done.returncode, done.stderr)


def test_each_slot_runs_with_one_whole_gpu_of_its_own(gpu_slurm: PrivateSlurm) -> None:
    profile = _profile(gpu_slurm.root)
    batch = _batch(profile, 4, ("sh", "-c", 'echo "gpu=$CUDA_VISIBLE_DEVICES"; sleep 1'))
    done = gpu_slurm.run(submit_argv(), batch.script)
    assert done.returncode == 0, done.stderr
    job = parse_parsable(done.stdout).job_id
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
