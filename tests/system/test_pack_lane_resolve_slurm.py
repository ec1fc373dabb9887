"""An operator settles a packed allocation in doubt (``reattach_failed``) with
``vq scheduler resolve ELEMENT``, on the testbed's real Slurm 22.05 over real sshd.

The decision applies to the element's whole allocation: ``--job-id N`` adopts Slurm job N
and the elements complete from their own slots; ``--not-submitted`` packs the elements
again. Every verb is the real ``vq`` CLI in a subprocess, the daemon is really SIGKILLed
at a crash point. Needs root (the testbed); skipped without it and FAILS under ``CI=true``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.slurm_lane import ssh_local as _ssh
from tests.system.test_pack_lane_slurm import (  # the lane's profile and helpers
    _all_terminal,
    _configure,
    _jobs_named,
    _submit_array,
)
from tests.testbed import SshTestbed
from vq._proc_stat import is_alive

pytestmark = pytest.mark.timeout(300)

SHOW = 'echo "element $VQ_ARRAY_INDEX"'


def _killed_at(vq: Vq, fault: str, state: str) -> list[dict[str, Any]]:
    """Two elements of one allocation in ``state``, the daemon SIGKILLed at ``fault``."""
    faulty = Vq(vq.root, {**vq.env, "VQ_TEST_FAULT": fault})
    faulty.start_daemon()
    pid = faulty.daemon_pid()
    assert pid is not None
    jobs = _submit_array(vq, "0-1", "--", "sh", "-c", SHOW)
    wait_until(lambda: not is_alive(pid), 60)
    specs = [vq.spec(job) for job in jobs]
    assert [s["scheduler_state"] for s in specs] == [state, state]
    assert specs[0]["scheduler_pack_id"] == specs[1]["scheduler_pack_id"] is not None
    return specs


def _in_doubt(vq: Vq, jobs: list[str]) -> None:
    def doubtful() -> bool:
        return all(vq.spec(job).get("scheduler_state") == "reattach_failed" for job in jobs)

    wait_until(doubtful, 90, interval=0.5)
    assert [vq.state(job) for job in jobs] == ["RUNNING", "RUNNING"]  # capacity kept


def test_not_submitted_packs_the_elements_again_and_each_runs_once(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,
) -> None:
    _configure(vq, slurm_testbed, remote_root)
    specs = _killed_at(vq, "packed_after_intent", "claimed")  # intent durable, sbatch never ran
    jobs, alloc = [s["id"] for s in specs], specs[0]["scheduler_pack_id"]
    intent = vq.root / "lane-packs" / "cluster" / f"{alloc}.json"
    intent.write_bytes(b"not an intent")  # an unreadable intent: nothing can be looked up
    vq.start_daemon()
    _in_doubt(vq, jobs)

    # Adopting needs the intent (to observe the allocation): refused, nothing changes.
    refused = vq.run("scheduler", "resolve", jobs[0], "--job-id", "1", check=False)
    assert refused.returncode == 6, refused.stderr
    assert "intent is gone" in refused.stderr and "hint:" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert vq.spec(jobs[1])["scheduler_state"] == "reattach_failed"

    answer = json.loads(vq.run("scheduler", "resolve", jobs[1], "--not-submitted", "--json").stdout)
    assert (answer["scheduler_pack_id"], answer["elements"]) == (alloc, sorted(jobs))
    done = _all_terminal(vq, jobs)
    assert [(s["state"], s["exit_code"]) for s in done] == [("COMPLETED", 0)] * 2
    for index, job in enumerate(jobs):  # each element ran once: its log holds one line
        assert (vq.root / "jobs" / job / "stdout.log").read_text() == f"element {index}\n"
    receipts = {s["scheduler_job_id"] for s in done}
    assert len(receipts) == 1
    assert _jobs_named(slurm_testbed, done[0]["scheduler_pack_id"]) == sorted(receipts)

    again = vq.run("scheduler", "resolve", jobs[0], "--not-submitted", check=False)
    assert again.returncode == 6 and "hint:" in again.stderr  # nothing left in doubt


def test_job_id_adopts_the_allocation_for_every_element(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,
) -> None:
    _configure(vq, slurm_testbed, remote_root)
    # sbatch answered, no receipt recorded
    specs = _killed_at(vq, "packed_after_sbatch", "submitting")
    jobs, alloc = [s["id"] for s in specs], specs[0]["scheduler_pack_id"]
    real = wait_until(lambda: _jobs_named(slurm_testbed, alloc), 30)
    assert len(real) == 1
    # The submit guard's recorded answer would settle it: model a guard that died between
    # sbatch's answer and its record (started, no status), so only Slurm can tell.
    records = f"{remote_root}/scratch/.vibeqc-cluster/submits/vqp-{alloc}"
    _ssh(slurm_testbed, f"test -f {records}/started && rm -f {records}/rc")
    # A second job under the allocation's exact name and comment: the look-up by
    # identity cannot tell which is ours, so the allocation is in doubt.
    foreign = _ssh(
        slurm_testbed,
        "sbatch",
        "--parsable",
        f"--job-name=vqp-{alloc}",
        f"--comment=vq-pack:{alloc}",
        f"--output={remote_root}/foreign.out",
        "--wrap='sleep 120'",  # one word for the login shell
    ).strip()
    try:
        vq.start_daemon()
        _in_doubt(vq, jobs)
    finally:
        _ssh(slurm_testbed, "scancel", foreign)

    bad = vq.run("scheduler", "resolve", jobs[0], "--job-id", "12.batch", check=False)
    assert bad.returncode == 4 and "hint:" in bad.stderr
    vq.run("scheduler", "resolve", jobs[0], "--job-id", real[0])
    done = _all_terminal(vq, jobs)
    assert [(s["state"], s["exit_code"]) for s in done] == [("COMPLETED", 0)] * 2
    assert {s["scheduler_job_id"] for s in done} == {real[0]}
    for index, job in enumerate(jobs):  # its own slot's log, copied back
        assert (vq.root / "jobs" / job / "stdout.log").read_text() == f"element {index}\n"
    # nothing was sent again (the foreign job, cancelled before it started, may be absent
    # from accounting's window)
    named = _jobs_named(slurm_testbed, alloc)
    assert real[0] in named and set(named) <= {real[0], foreign}, named
