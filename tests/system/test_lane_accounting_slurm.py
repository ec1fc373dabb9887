"""Lane accounting and this workstation's capacity on the testbed's real Slurm (§6.3).

A lane job asking for more CPUs than this workstation's cap is submitted without a word
about that cap and runs on the cluster (the caps do not apply there), ``vq top`` never
counts it against this host, and a packed task that waited in Slurm's queue behind it
is charged its step's wall time by ``vq usage``, not the wait. The node has 2 CPUs.
Needs root (the testbed); skipped on a developer machine without it.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.conftest import Vq, wait_until
from tests.system.slurm_lane import (
    pack_profile_tables,
    slurm_lane_keys,
    slurm_testbed,  # noqa: F401 - the fixture
    submit_packed,
    toml_table,
    write_config,
)
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(300)

TERMINAL = {"COMPLETED", "FAILED", "KILLED", "OOM_KILLED", "TIME_EXCEEDED", "ABORTED_BY_QUEUE"}


def _seconds(spec: dict[str, object], start: str, end: str) -> float:
    return (
        datetime.fromisoformat(str(spec[end])) - datetime.fromisoformat(str(spec[start]))
    ).total_seconds()


def test_a_lane_job_is_neither_warned_nor_counted_and_usage_skips_the_queue_wait(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,
) -> None:
    lane = toml_table("hosts.cluster", slurm_lane_keys(slurm_testbed, f"{remote_root}/scratch"))
    write_config(vq, lane, pack_profile_tables(remote_root))
    vq.start_daemon("--max-cpus", "1")

    # Two CPUs on the lane against this host's cap of one: no warning, and it runs.
    big = vq.run("submit", "cluster", "--cpus", "2", "--job-name", "big", "--", "sleep", "25")
    assert "exceeds the configured cap" not in big.stderr and "stays PENDING" not in big.stderr
    blocker = big.stdout.strip()
    wait_until(lambda: vq.spec(blocker).get("scheduler_state") == "running", 90, interval=1.0)
    top = vq.json("top")
    assert top["capacity"]["cpus"] == {"reserved": 0, "cap": 1}
    assert top["lanes"]["running_jobs"] == 1 and top["lanes"]["running_cpus"] == 2
    text = " ".join(vq.run("top").stdout.split())
    assert "0/1 reserved (0%)" in text and "200%" not in text

    # Packed one-second tasks wait in Slurm's queue (Resources) behind the blocker.
    jobs = submit_packed(vq, "0-1", "--", "sleep", "1")
    wait_until(lambda: all(vq.state(job) in TERMINAL for job in jobs), 200, interval=1.0)
    specs = [vq.spec(job) for job in jobs]
    assert [s["state"] for s in specs] == ["COMPLETED", "COMPLETED"]
    for spec in specs:
        assert _seconds(spec, "started_at", "finished_at") > 10, spec  # vq's claim to end
        assert spec["scheduler_walltime_used"] is not None, spec

    usage = vq.json("usage", "--by", "name")
    groups = {group["key"]: group for group in usage["groups"]}
    assert None in groups, groups  # the packed elements carry no name
    packed = groups[None]
    assert packed["jobs"] == 2
    # Each ran about a second; the queue wait (over ten seconds each) is not charged.
    assert packed["wall_hours"] * 3600 < 10, packed
    assert packed["cpu_hours"] * 3600 < 10, packed
    # The plain lane job is charged accounting's elapsed time (about its 25 s sleep).
    wait_until(lambda: vq.state(blocker) == "COMPLETED", 60, interval=1.0)
    big_usage = {g["key"]: g for g in vq.json("usage", "--by", "name")["groups"]}["big"]
    assert 20 <= big_usage["wall_hours"] * 3600 < 60, big_usage
    assert abs(big_usage["cpu_hours"] - 2 * big_usage["wall_hours"]) < 1e-5, big_usage
