"""Packs on an 8-CPU, 4-GPU node: a private Slurm 22.05 cluster reached over its own sshd
(:mod:`tests.private_slurm`), so the shared testbed's 2-CPU Slurm is never reconfigured.

- 16 one-CPU tasks under a cap of 8 through ``vq pack``: two allocations of 8, each
  allocation's steps start within 2 s, each slot writes its own log;
- ``vq submit cluster --array 0-15 --pack cpu8``: the daemon packs the 16 elements into
  two allocations of 8 and copies each slot's stdout and stderr back, apart;
- a GPU shape through ``vq pack validate`` (``sbatch --test-only``) and a real run through
  ``vq pack submit``: every slot gets one whole GPU of its own.

Every verb is the real ``vq`` CLI in a subprocess. Needs root and the testbed's Slurm;
skipped without them and FAILS under ``CI=true``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from tests.private_slurm import ClusterUnavailable, PrivateCluster, private_cluster
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.testbed import SshTestbed, unavailable

pytestmark = pytest.mark.timeout(400)

TERMINAL = {"COMPLETED", "FAILED", "KILLED", "OOM_KILLED", "TIME_EXCEEDED", "ABORTED_BY_QUEUE"}


@pytest.fixture(scope="module")
def cluster(slurm_testbed: SshTestbed) -> Iterator[PrivateCluster]:  # noqa: F811
    try:
        with private_cluster(cpus=8, gpus=4) as started:
            yield started
    except ClusterUnavailable as exc:
        unavailable(str(exc))


@pytest.fixture
def remote_root(cluster: PrivateCluster) -> Iterator[str]:
    root = f"/tmp/vq-packpriv-{secrets.token_hex(4)}"
    yield root
    cluster.ssh("rm", "-rf", root)


def _profile(name: str, root: str, *, per: int, gpus: int) -> list[str]:
    return [
        f"[packing.{name}.target]",
        'host = "cluster"',
        'partitions = ["pack"]',
        *(['gpu_gres = "gpu"'] if gpus else []),
        f'work_root = "{root}/work"',
        f'log_root = "{root}/logs"',
        f"max_tasks_per_allocation = {per}",
        "max_cpus_per_allocation = 8",
        "max_memory_mib_per_allocation = 2048",
        f"max_gpus_per_allocation = {4 if gpus else 0}",
        'max_time_limit = "00:05:00"',
        "max_allocations_per_submit = 8",
        "max_script_bytes = 65536",
        "",
        f"[packing.{name}.resources]",
        "cpus_per_task = 1",
        "memory_mib_per_task = 128",
        f"gpus_per_task = {gpus}",
        'time_limit = "00:02:00"',
        "",
    ]


def _configure(vq: Vq, cluster: PrivateCluster, root: str) -> None:
    lines = [
        'default_packing = "cpu8"',
        "",
        "[hosts.cluster]",
        f'ssh = "{cluster.host}"',
        f"ssh_options = {json.dumps(['-F', str(cluster.ssh_config)])}",
        'scheduler_dialect = "slurm"',
        f'scratch_root = "{root}/scratch"',
        f'partition = "{cluster.partition}"',
        "poll_interval = 1",
        "scheduler_rpc_per_minute = 600",
        "scheduler_copy_back_delays = [1, 1, 1]",
        "",
        *_profile("cpu8", root, per=8, gpus=0),
        *_profile("gpu", root, per=4, gpus=1),
    ]
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("\n".join(lines))


def _open(vq: Vq, path: Path, name: str, tasks: dict[str, list[str]]) -> None:
    path.write_text(
        "".join(
            json.dumps({"key": key, "args": args, "stdin_file": None}) + "\n"
            for key, args in tasks.items()
        )
    )
    vq.run("pack", "open", name, str(path))
    vq.run("pack", "seal", name)


def _quiescent(vq: Vq, name: str, timeout: float = 200) -> dict[str, Any]:
    def view() -> dict[str, Any] | None:
        seen: dict[str, Any] = vq.json("pack", "inspect", name)
        return seen if seen["quiescent"] else None

    result: dict[str, Any] = wait_until(view, timeout, interval=2.0)
    return result


def _jobs_named(cluster: PrivateCluster, alloc: str) -> list[str]:
    done = cluster.ssh(
        "sacct", "-X", "--noheader", "--parsable2", f"--name=vqp-{alloc}", "-o", "JobID"
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.strip()]


def test_sixteen_tasks_cap_eight_make_two_allocations_whose_steps_start_together(
    vq: Vq, tmp_path: Path, cluster: PrivateCluster, remote_root: str
) -> None:
    _configure(vq, cluster, remote_root)
    command = 'date +%s.%N >started; echo "log-$0"; sleep 2'
    _open(
        vq,
        tmp_path / "t.jsonl",
        "sweep",
        {f"t{n}": ["sh", "-c", command, f"t{n}"] for n in range(16)},
    )
    plan = vq.json("pack", "plan", "sweep", "--output", str(tmp_path / "plan.json"))
    assert [(a["tasks"], a["cpus"]) for a in plan["allocations"]] == [(8, 8), (8, 8)]
    sent = vq.json("pack", "submit", "sweep", str(tmp_path / "plan.json"))["allocations"]
    assert [item["action"] for item in sent] == ["submitted", "submitted"]

    view = _quiescent(vq, "sweep")
    assert {t["key"]: t["state"] for t in view["tasks"]} == {
        f"t{n}": "SUCCEEDED" for n in range(16)
    }
    assert view["results_ready"] is True
    for number, item in enumerate(sent):
        alloc, job = item["allocation_id"], item["job_id"]
        work = Path(remote_root) / "work" / alloc
        starts = [float((work / str(slot) / "started").read_text()) for slot in range(8)]
        assert max(starts) - min(starts) <= 2.0, starts  # the 8 steps ran side by side
        for slot in range(8):  # each slot's own log, by Slurm and through `vq pack log`
            key = f"t{number * 8 + slot}"
            log = Path(remote_root) / "logs" / f"{alloc}-{job}-{slot}.out"
            assert log.read_text() == f"log-{key}\n"
            shown = vq.run("pack", "log", "sweep", alloc, "--task", key, "--bytes", "64")
            assert shown.stdout == f"log-{key}\n"
        assert _jobs_named(cluster, alloc) == [job]  # one Slurm job per allocation


def test_a_packed_array_of_sixteen_fills_two_allocations_of_eight(
    vq: Vq, cluster: PrivateCluster, remote_root: str
) -> None:
    _configure(vq, cluster, remote_root)
    vq.start_daemon()
    done = vq.run(
        "submit", "cluster", "--json", "--array", "0-15", "--pack", "cpu8", "--",
        "sh", "-c", 'echo "element $VQ_ARRAY_INDEX"; echo "warn $VQ_ARRAY_INDEX" >&2',
    )  # fmt: skip
    jobs = [job["id"] for job in json.loads(done.stdout)["jobs"]]
    wait_until(lambda: all(vq.state(job) in TERMINAL for job in jobs), 200, interval=1.0)
    specs = [vq.spec(job) for job in jobs]
    assert [s["state"] for s in specs] == ["COMPLETED"] * 16
    assert [s["scheduler_pack_slot"] for s in specs] == list(range(8)) * 2
    allocations = [s["scheduler_pack_id"] for s in specs]
    assert len(set(allocations[:8])) == 1 and len(set(allocations[8:])) == 1
    assert allocations[0] != allocations[8]
    for index, job in enumerate(jobs):  # each slot's stdout and stderr, kept apart
        assert (vq.root / "jobs" / job / "stdout.log").read_text() == f"element {index}\n"
        assert (vq.root / "jobs" / job / "stderr.log").read_text() == f"warn {index}\n"
    for alloc in (allocations[0], allocations[8]):
        receipts = {s["scheduler_job_id"] for s in specs if s["scheduler_pack_id"] == alloc}
        assert [_jobs_named(cluster, alloc)] == [sorted(receipts)]


def test_a_gpu_pack_is_validated_and_runs_one_whole_gpu_per_slot(
    vq: Vq, tmp_path: Path, cluster: PrivateCluster, remote_root: str
) -> None:
    _configure(vq, cluster, remote_root)
    show = 'echo "gpu=$CUDA_VISIBLE_DEVICES"'
    _open(vq, tmp_path / "g.jsonl", "gpus", {f"g{n}": ["sh", "-c", show] for n in range(4)})
    plan = vq.json(
        "pack", "plan", "gpus", "--profile", "gpu", "--output", str(tmp_path / "plan.json")
    )
    (allocation,) = plan["allocations"]
    assert allocation["gpus"] == 4 and "--gres=gpu:4" in allocation["sbatch_args"]
    shapes = vq.json("pack", "validate", "gpus", str(tmp_path / "plan.json"))["shapes"]
    assert [s["partition"] for s in shapes] == ["pack"]  # Slurm would start it now
    assert json.loads((vq.root / "packs" / "gpus" / "pack.json").read_text())["attempts"] == []

    (sent,) = vq.json("pack", "submit", "gpus", str(tmp_path / "plan.json"))["allocations"]
    view = _quiescent(vq, "gpus")
    assert [t["state"] for t in view["tasks"]] == ["SUCCEEDED"] * 4
    seen = [
        vq.run("pack", "log", "gpus", sent["allocation_id"], "--task", f"g{n}").stdout.strip()
        for n in range(4)
    ]
    assert sorted(seen) == [f"gpu={n}" for n in range(4)]  # one distinct GPU per slot
