"""Chaos: the daemon SIGKILLed at random moments while packed arrays run, on the private
8-CPU Slurm cluster (:mod:`tests.private_slurm`). After every kill the daemon restarts
and recovers its allocations by their identity. Checked at the end: no element lost (each
COMPLETED, its log one line: it ran once), and never two Slurm jobs for one allocation
identity (``sacct --name=vqp-<alloc>`` names exactly the receipt its elements hold).

The kill times come from a generator with a fixed seed (``VQ_CHAOS_SEED`` overrides it; the
seed is printed, shown with a failure).
Needs root and the testbed's Slurm; skipped without them and FAILS under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import Vq, wait_until
from tests.private_slurm import PrivateCluster
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_pack_private_slurm import (  # the private cluster and its profiles
    TERMINAL,
    _configure,
    _jobs_named,
    cluster,  # noqa: F401 - the fixture
    remote_root,  # noqa: F401 - the fixture
)
from vq._proc_stat import is_alive

pytestmark = pytest.mark.timeout(600)

ELEMENTS = 24
KILLS = 6


def test_random_daemon_kills_lose_no_element_and_never_double_an_allocation(
    vq: Vq,
    cluster: PrivateCluster,  # noqa: F811
    remote_root: str,  # noqa: F811
) -> None:
    seed = int(os.environ.get("VQ_CHAOS_SEED", "0")) or 2406  # fixed: a bounded run
    print(f"pack chaos: reproduce with VQ_CHAOS_SEED={seed}", flush=True)
    rng = random.Random(seed)
    _configure(vq, cluster, remote_root)
    runs = Path(remote_root) / "runs"  # every run of an element leaves a line here
    command = (
        f"mkdir -p {runs}; echo run >>{runs}/$VQ_ARRAY_INDEX; "
        'echo "element $VQ_ARRAY_INDEX"; sleep 1'
    )
    vq.start_daemon()
    done = vq.run(
        "submit", "cluster", "--json", "--array", f"0-{ELEMENTS - 1}", "--pack", "cpu8", "--",
        "sh", "-c", command,
    )  # fmt: skip
    jobs = [job["id"] for job in json.loads(done.stdout)["jobs"]]
    for _ in range(KILLS):
        time.sleep(rng.uniform(0.1, 2.5))  # a random moment of the arrays' life
        pid = vq.daemon_pid()
        assert pid is not None, f"seed {seed}"
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda pid=pid: not is_alive(pid), 30)
        vq.start_daemon()

    wait_until(lambda: all(vq.state(job) in TERMINAL for job in jobs), 400, interval=1.0)
    specs = [vq.spec(job) for job in jobs]
    assert [s["state"] for s in specs] == ["COMPLETED"] * ELEMENTS, f"seed {seed}"
    for index, job in enumerate(jobs):  # each element ran exactly once
        assert (runs / str(index)).read_text() == "run\n", (seed, index)
        log = (vq.root / "jobs" / job / "stdout.log").read_text()
        assert log == f"element {index}\n", f"seed {seed}"
    receipts: dict[str, set[str]] = {}
    for spec in specs:
        receipts.setdefault(spec["scheduler_pack_id"], set()).add(spec["scheduler_job_id"])
    for alloc, held in receipts.items():
        assert len(held) == 1, (seed, alloc, held)
        assert _jobs_named(cluster, alloc) == sorted(held), (seed, alloc)
