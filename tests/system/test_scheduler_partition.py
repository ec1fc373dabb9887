"""A Slurm lane whose login host is partitioned: the network namespace host ``vq-h2``, whose
``/etc/slurm/slurm.conf`` (``/etc/netns/vq-h2/slurm`` from the testbed) names the root
side of its link (10.200.2.1), reached over its own sshd.

* Partitioned while polling: the host is marked unreachable, the job stays RUNNING with
  its Slurm id (a host failure never ends a job), and after the link is back the same
  Slurm job completes it: one Slurm job, the right exit code. The job runs until the
  test releases it, so it is still running whenever the partition is seen.
* Partitioned during the copy-back: the exit marker was read, the copy-back fails every
  try, and the job ends with the marker's exit code and ``scheduler_state =
  "artifacts_unavailable"``. The daemon is held (``VQ_TEST_HOLD=before_copy_back:…``)
  between reading the marker and copying back until the link is down.

The link is taken down on the namespace side only and is always brought back up in a
``finally`` (the testbed's up.sh heals it too).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_scheduler_slurm import (
    _configure,
    _slurm_jobs_named,
    _ssh,
    _terminal,
    scratch,  # noqa: F401 - the fixture
)
from tests.testbed import SshTestbed, run_up

pytestmark = pytest.mark.timeout(300)

HOST = "vq-h2"
LINK = "vqh2-ns"


@contextmanager
def _partitioned() -> Iterator[None]:
    subprocess.run(["ip", "-n", HOST, "link", "set", LINK, "down"], check=True)
    try:
        yield
        # Another process healing the link (a testbed fixture's teardown, up.sh) would make
        # the outcome meaningless: say so rather than report a wrong verdict.
        state = subprocess.run(
            ["ip", "-n", HOST, "-br", "link", "show", LINK], capture_output=True, text=True
        ).stdout.split()
        if state[1:2] != ["DOWN"]:
            pytest.fail(f"{LINK} was brought back up during the partition by another process")
    finally:
        subprocess.run(["ip", "-n", HOST, "link", "set", LINK, "up"], check=True)


def _lane_on_h2(vq: Vq, testbed: SshTestbed, root: str) -> None:
    if HOST not in testbed.hosts:
        pytest.fail(f"the testbed has no {HOST}")
    # The host's logins read /etc/netns/vq-h2/slurm as /etc/slurm (scripts/testbed/up.sh).
    line = ""
    for _attempt in range(2):
        line = _ssh_h2(testbed, "grep", "^SlurmctldHost=", "/etc/slurm/slurm.conf").strip()
        if line.endswith("(10.200.2.1)"):
            break
        run_up()
    else:
        pytest.fail(f"{HOST}'s slurm.conf does not name 10.200.2.1: {line!r}")
    _ssh_h2(testbed, "squeue", "--noheader", "--me")  # the controller answers from there
    _configure(
        vq,
        testbed,
        root,
        ssh=HOST,
        ssh_timeout=2,
        scheduler_backoff_seconds=3,
        scheduler_copy_back_delays=[1, 1, 1],
    )


def _ssh_h2(testbed: SshTestbed, *words: str) -> str:
    done = subprocess.run(
        ["ssh", "-F", str(testbed.ssh_config), HOST, "--", *words],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _health(vq: Vq) -> dict[str, Any]:
    path = vq.root / "hosts" / "cluster.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data


def test_partition_while_polling_keeps_the_job_running(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
) -> None:
    _lane_on_h2(vq, slurm_testbed, scratch)
    vq.start_daemon()
    # The job runs until the test releases it (at most 150 s): it cannot end, and leave the
    # lane with nothing to poll, before the partition has been seen.
    wait_for_release = "i=0; while [ ! -e go ] && [ $i -lt 750 ]; do sleep 0.2; i=$((i+1)); done"
    job = vq.submit("cluster", "--", "sh", "-c", f"{wait_for_release}; echo after; exit 3")
    wait_until(lambda: vq.spec(job).get("scheduler_state") == "running", 60)
    slurm_id = vq.spec(job)["scheduler_job_id"]
    with _partitioned():
        wait_until(lambda: _health(vq).get("status") == "unreachable", 60)
        # The controller still runs the job; vq keeps it exactly as it was.
        out = _ssh(slurm_testbed, "squeue", "--noheader", "-j", slurm_id, "-o", "%T")
        assert out.strip() == "RUNNING"
        spec = vq.spec(job)
        assert (spec["state"], spec["scheduler_state"]) == ("RUNNING", "running")
        assert spec["scheduler_job_id"] == slurm_id and spec["failure_reason"] is None
        # It ends while vq cannot see it; vq learns the ending once the link is back.
        _ssh(slurm_testbed, "touch", f"{scratch}/.vibeqc-cluster/jobs/{job}/go")
    done = _terminal(vq, job, timeout=120)
    assert (done["state"], done["exit_code"]) == ("FAILED", 3)
    assert (done["scheduler_job_id"], done["scheduler_state"]) == (slurm_id, "ended")
    assert (vq.root / "jobs" / job / "stdout.log").read_text() == "after\n"
    wait_until(lambda: _health(vq).get("status") == "ok", 60)
    assert wait_until(lambda: _slurm_jobs_named(slurm_testbed, job), 30) == [slurm_id]


def test_partition_during_copy_back_keeps_the_exit_code(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    _lane_on_h2(vq, slurm_testbed, scratch)
    # The daemon holds the job after reading its exit marker, before the copy-back, until
    # the link is down: the copy-back can never finish first.
    holds = tmp_path / "holds"
    holds.mkdir()
    Vq(vq.root, {**vq.env, "VQ_TEST_HOLD": f"before_copy_back:{holds}"}).start_daemon()
    job = vq.submit("cluster", "--", "sh", "-c", "head -c 1M /dev/urandom > big; exit 4")
    wait_until((holds / "before_copy_back.held").exists, 120)
    with _partitioned():
        (holds / "before_copy_back.go").touch()
        done = _terminal(vq, job, timeout=180)
    assert (done["state"], done["exit_code"]) == ("FAILED", 4)
    assert done["scheduler_state"] == "artifacts_unavailable"
    assert not (vq.root / "jobs" / job / "big").exists()
    assert wait_until(lambda: _slurm_jobs_named(slurm_testbed, job), 30) == [
        done["scheduler_job_id"]
    ]
