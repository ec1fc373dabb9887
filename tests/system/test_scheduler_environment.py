"""A lane job's environment on the testbed's real Slurm: only what the submit named.

`vq submit LANE` defaults to ``--export NONE``: the submitting shell's variables mean
nothing on a compute node. ``--export NAME`` and ``--env NAME=value`` travel in the batch
script (quoted), the job's ``_vq/environment`` never reaches the cluster, and
``--export ALL`` is refused. Real daemon, real CLI, real sshd and Slurm.
"""

from __future__ import annotations

import pytest

from tests.conftest import Vq
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_scheduler_slurm import _ssh, _terminal, lane, scratch  # noqa: F401
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(240)

PROBE = 'echo "basis=${MYBASIS-unset} other=${OTHER-unset} secret=${SHELL_ONLY-unset}"'


def test_named_variables_reach_the_job_and_nothing_else(
    lane: Vq,  # noqa: F811
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
) -> None:
    shell = Vq(lane.root, {**lane.env, "MYBASIS": "def2 svp; $(x)", "SHELL_ONLY": "s3cr3t"})
    named = shell.submit(
        "cluster", "--export", "MYBASIS", "--env", "OTHER=a'b", "--", "sh", "-c", PROBE
    )
    plain = shell.submit("cluster", "--", "sh", "-c", PROBE)
    for job in (named, plain):
        done = _terminal(lane, job)
        assert done["state"] == "COMPLETED", (done["failure_reason"], done.get("failure_tail"))
    logs = {job: (lane.root / "jobs" / job / "stdout.log").read_text() for job in (named, plain)}
    assert logs[named] == "basis=def2 svp; $(x) other=a'b secret=unset\n"
    assert logs[plain] == "basis=unset other=unset secret=unset\n"
    assert not (lane.root / "jobs" / plain / "_vq" / "environment").exists()
    # The capture stays on the driver: no _vq/environment in the cluster's workspaces.
    found = _ssh(slurm_testbed, "find", scratch, "-name", "environment")
    assert found.strip() == ""
    # The value is nowhere in what vq shows of the job.
    for verb in ("status", "events"):
        assert "s3cr3t" not in lane.run(verb, named, "--json").stdout
        assert "def2 svp" not in lane.run(verb, named, "--json").stdout


def test_export_all_is_refused_for_a_lane(lane: Vq) -> None:  # noqa: F811
    proc = lane.run("submit", "cluster", "--export", "ALL", "--", "true", check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("vq: error: --export ALL is not supported with scheduler lane")
    assert "hint: name the variables" in proc.stderr and "Traceback" not in proc.stderr
    own = lane.run("submit", "cluster", "--env", "vq_time=x", "--", "true", check=False)
    assert own.returncode == 2 and "vq_time cannot be forwarded" in own.stderr
    packed = ("--array", "0-1", "--pack", "any", "--env", "A=1")
    refused = lane.run("submit", "cluster", *packed, "--", "true", check=False)
    assert refused.returncode == 2 and "not carried into packed allocations" in refused.stderr
    assert not list((lane.root / "queue").glob("*.json"))
