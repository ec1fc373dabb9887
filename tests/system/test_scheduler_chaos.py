"""Chaos on a Slurm lane: the daemon is SIGKILLed at random moments while jobs are submitted,
staged, sbatch'ed, polled and copied back; it is started again each time.

Afterwards every vq job is terminal with the state and exit code its command chose, and
``sacct --name=vq-<id>`` shows exactly one Slurm job per vq job: nothing lost, nothing run
twice. The kills land wherever the random delays put them (between claim and intent,
around ``sbatch``, mid-poll, mid-copy-back). The seed is in the test id; the normal suite
runs a bounded plan, the slow suite (``make soak``) the issue's 50 submits.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path

import pytest

from tests.chaos.plan import seed_from_env
from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import (
    configure_slow_lane,
    cut_ssh,
    kill_and_restart,
    sacct_ids,
    set_submit_delay,
    slurm_testbed,  # noqa: F401 - the fixture
    submit_calls,
    submit_packed,
)
from tests.system.test_scheduler_slurm import (
    _configure,
    _ssh,
    scratch,  # noqa: F401 - the fixture
)
from tests.testbed import SshTestbed

TERMINAL = {"COMPLETED", "FAILED", "KILLED", "OOM_KILLED", "TIME_EXCEEDED", "ABORTED_BY_QUEUE"}


def _slurm_jobs_by_name(testbed: SshTestbed, job_ids: list[str]) -> dict[str, list[str]]:
    names = ",".join(f"vq-{job_id}" for job_id in job_ids)
    out = _ssh(
        testbed,
        "sacct",
        "-X",
        "--noheader",
        "--parsable2",
        f"--name={names}",
        "--starttime=now-2hours",
        "-o",
        "JobName,JobID",
    )
    found: dict[str, list[str]] = {job_id: [] for job_id in job_ids}
    for line in out.splitlines():
        name, _, slurm_id = line.partition("|")
        if name.startswith("vq-") and name[3:] in found:
            found[name[3:]].append(slurm_id)
    return found


def _run_chaos(
    vq: Vq,
    testbed: SshTestbed,
    root: str,
    *,
    jobs: int,
    kills: int,
    seed: int,
) -> None:
    rng = random.Random(seed)
    _configure(vq, testbed, root, max_scheduler_jobs=8)
    vq.start_daemon()
    expected: dict[str, int] = {}
    killed = 0
    for _ in range(jobs):
        code = rng.choice([0, 0, 1, 3])
        pause = f"{rng.uniform(0, 1):.2f}"
        job = vq.submit("cluster", "--", "sh", "-c", f"sleep {pause}; exit {code}")
        expected[job] = code
        if killed < kills and rng.random() < kills / jobs * 1.5:
            time.sleep(rng.uniform(0, 2))  # lets the kill land anywhere in the job's path
            kill_and_restart(vq)
            killed += 1
    while killed < kills and not all(vq.state(j) in TERMINAL for j in expected):
        time.sleep(rng.uniform(0.5, 3))
        kill_and_restart(vq)
        killed += 1
    wait_until(lambda: all(vq.state(j) in TERMINAL for j in expected), 60 + 6 * jobs)
    vq.stop_daemon()
    for job, code in expected.items():
        spec = vq.spec(job)
        want = ("COMPLETED", 0) if code == 0 else ("FAILED", code)
        assert (spec["state"], spec["exit_code"]) == want, (seed, job, spec)
        assert spec["scheduler_job_id"], (seed, job)
    # Accounting lags squeue a little: wait until every job has its record, then count.
    ids = list(expected)
    wait_until(lambda: all(_slurm_jobs_by_name(testbed, ids).values()), 60)
    found = _slurm_jobs_by_name(testbed, ids)
    for job in ids:
        assert found[job] == [vq.spec(job)["scheduler_job_id"]], (seed, job, found[job])


@pytest.mark.timeout(420)
@pytest.mark.parametrize("seed", [int(os.environ.get("VQ_CHAOS_SEED", "0")) or 17017])
def test_random_daemon_kills_across_submits(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
    seed: int,
) -> None:
    _run_chaos(vq, slurm_testbed, scratch, jobs=10, kills=3, seed=seed)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("seed", [int(os.environ.get("VQ_CHAOS_SEED", "0")) or 50050])
def test_random_daemon_kills_across_50_submits(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
    seed: int,
) -> None:
    _run_chaos(vq, slurm_testbed, scratch, jobs=50, kills=12, seed=seed)


# --- slow sbatch: daemon kills and SSH cuts while submissions stall --------------------------
def _run_slow_submit_chaos(
    vq: Vq, testbed: SshTestbed, root: str, *, plain: int, packed: int, events: int, seed: int
) -> None:
    """Plain jobs and packed two-element arrays go to the lane while the login host's
    sbatch stalls 0, 4 or 8 s per call (the testbed's slow-submit wrapper); after a
    random part of the submissions, once their sbatch started, at a random moment of the
    stall the daemon is SIGKILLed and restarted, or its SSH processes (clients and
    ControlMaster) are killed. Then every job must have completed once: ``sacct`` holds
    exactly one Slurm job per plain job and per allocation, the one vq adopted, and the
    wrapper saw exactly one sbatch per plain job and per allocation."""
    rng = random.Random(seed)
    configure_slow_lane(vq, testbed, root)
    runtime = Path(tempfile.mkdtemp(prefix="vqx-", dir="/tmp"))
    vq = Vq(vq.root, {**vq.env, "XDG_RUNTIME_DIR": str(runtime)})
    vq.start_daemon()
    kinds = ["plain"] * plain + ["packed"] * packed
    rng.shuffle(kinds)
    singles: list[str] = []
    arrays: list[list[str]] = []
    left = events
    for kind in kinds:
        delay = rng.choice([0, 4, 8])
        set_submit_delay(testbed, root, delay)
        before = len(submit_calls(testbed, root))
        if kind == "plain":
            singles.append(vq.submit("cluster", "--", "sh", "-c", "echo ran"))
        else:
            arrays.append(submit_packed(vq, "0-1", "--", "sh", "-c", "echo ran"))
        if left and rng.random() < events / len(kinds) * 1.5:
            # Once this submission's sbatch started, anywhere in its stall or just after.
            # (Not a check: a sbatch queued behind slower ones may start later.)
            give_up = time.monotonic() + 30
            while len(submit_calls(testbed, root)) <= before and time.monotonic() < give_up:
                time.sleep(0.5)
            time.sleep(rng.uniform(0, delay + 1))
            if rng.random() < 0.5:
                kill_and_restart(vq)
            else:
                cut_ssh(vq, runtime)
            left -= 1
    set_submit_delay(testbed, root, 0)  # no more stalls; calls are still counted
    everything = singles + [job for array in arrays for job in array]
    wait_until(lambda: all(vq.state(j) in TERMINAL for j in everything), 240)
    vq.stop_daemon()
    for job in everything:
        spec = vq.spec(job)
        assert spec["state"] == "COMPLETED", (seed, job, spec)
        assert (vq.root / "jobs" / job / "stdout.log").read_text() == "ran\n", (seed, job)
    expected: dict[str, str] = {f"vq-{job}": vq.spec(job)["scheduler_job_id"] for job in singles}
    for array in arrays:
        specs = [vq.spec(job) for job in array]
        assert len({s["scheduler_job_id"] for s in specs}) == 1, (seed, specs)
        expected[f"vqp-{specs[0]['scheduler_pack_id']}"] = specs[0]["scheduler_job_id"]
    wait_until(lambda: all(sacct_ids(testbed, name) for name in expected), 60)
    for name, receipt in expected.items():
        assert sacct_ids(testbed, name) == [receipt], (seed, name)
    assert len(submit_calls(testbed, root)) == len(expected), (seed, submit_calls(testbed, root))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [int(os.environ.get("VQ_CHAOS_SEED", "0")) or 28028])
def test_kills_and_ssh_cuts_during_slow_sbatch_never_run_a_job_twice(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
    seed: int,
) -> None:
    _run_slow_submit_chaos(vq, slurm_testbed, scratch, plain=4, packed=2, events=4, seed=seed)


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_kills_and_ssh_cuts_during_slow_sbatch_long(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
) -> None:
    """The soak run: a fresh seed each time (``VQ_CHAOS_SEED`` replays one), printed."""
    seed = seed_from_env()
    print(f"chaos: slow-sbatch soak, reproduce with VQ_CHAOS_SEED={seed}", flush=True)
    _run_slow_submit_chaos(vq, slurm_testbed, scratch, plain=24, packed=10, events=20, seed=seed)
