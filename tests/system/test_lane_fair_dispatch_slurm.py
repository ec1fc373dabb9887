"""Fair lane dispatch (issue 30 item 4): a lane claims its jobs in one order, plain jobs
and packed elements alike, the local dispatcher's (priority, then submission, then array
index), so a plain lane array is submitted to Slurm in index order and a packed array
never passes a lane job ahead of it; a ``max_scheduler_jobs`` raised by ``vq daemon
reload`` takes effect at once.

Real daemon, real CLI, the testbed's Slurm 22.05 over real sshd. Needs root (the
testbed); skipped without it and FAILS under ``CI=true``. Run under the testbed lock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import (
    pack_profile_tables,
    slurm_lane_keys,
    slurm_testbed,  # noqa: F401 - the fixture
    toml_table,
    write_config,
)
from tests.testbed import SshTestbed
from vq.domain.states import TERMINAL

pytestmark = pytest.mark.timeout(300)

TERMINAL_NAMES = {state.value for state in TERMINAL}


def _configure(vq: Vq, testbed: SshTestbed, root: str, max_jobs: int) -> None:
    keys = slurm_lane_keys(testbed, f"{root}/scratch", max_scheduler_jobs=max_jobs)
    write_config(vq, toml_table("hosts.cluster", keys), pack_profile_tables(root))


def _ids(vq: Vq, *words: str) -> list[str]:
    done = vq.run("submit", "cluster", "--json", *words)
    payload = json.loads(done.stdout)
    return [job["id"] for job in payload["jobs"]] if "jobs" in payload else [payload["id"]]


def _all_terminal(vq: Vq, jobs: list[str]) -> list[dict[str, Any]]:
    wait_until(lambda: all(vq.state(j) in TERMINAL_NAMES for j in jobs), 200, interval=1.0)
    return [vq.spec(j) for j in jobs]


def test_a_lane_array_is_submitted_in_index_order(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,
) -> None:
    _configure(vq, slurm_testbed, remote_root, max_jobs=100)
    vq.start_daemon()
    ids = _ids(vq, "--array", "0-5", "--", "true")
    specs = _all_terminal(vq, ids)
    assert [s["state"] for s in specs] == ["COMPLETED"] * 6
    # one worker submits them one after another: Slurm numbers them in claim order
    slurm_ids = [int(s["scheduler_job_id"]) for s in specs]
    assert slurm_ids == sorted(slurm_ids), [
        (s["array_index"], s["scheduler_job_id"]) for s in specs
    ]


def test_a_packed_array_does_not_pass_an_earlier_lane_job_after_a_reload(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,
) -> None:
    _configure(vq, slurm_testbed, remote_root, max_jobs=1)
    vq.start_daemon()
    (blocker,) = _ids(vq, "--", "sleep", "25")
    wait_until(lambda: vq.spec(blocker).get("scheduler_job_id"), 60, interval=0.5)
    (single,) = _ids(vq, "--", "true")  # waits for the one slot the blocker holds
    packed = _ids(vq, "--array", "0-5", "--pack", "tb", "--", "true")  # submitted after it
    assert vq.state(single) == "PENDING"

    config = Path(vq.env["VQ_CONFIG_DIR"]) / "config.toml"
    config.write_text(
        config.read_text().replace("max_scheduler_jobs = 1", "max_scheduler_jobs = 2")
    )
    answer = json.loads(vq.run("daemon", "reload", "--json").stdout)
    assert "cluster" in json.dumps(answer)
    # the raised cap applies while the blocker still runs, and the slot it opens goes
    # to the job submitted first, not to the packed array submitted after it
    wait_until(lambda: vq.spec(single).get("scheduler_job_id"), 60, interval=0.5)
    assert vq.state(blocker) == "RUNNING"
    first = vq.spec(single)["started_at"]
    claimed = [vq.spec(j)["started_at"] for j in packed]
    assert all(at is None or at > first for at in claimed), (first, claimed)

    specs = _all_terminal(vq, [blocker, single, *packed])
    assert [s["state"] for s in specs] == ["COMPLETED"] * 8
    assert all(s["started_at"] > first for s in specs[2:])
