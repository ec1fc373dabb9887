"""``vq submit LANE`` for a lane another host drives (``scheduler_driver = "h1"``) is
delegated over SSH: the driver's queue gets the spec with ``scheduler_target = LANE``.

Real CLI on both sides: this queue names ``[hosts.h1]`` (the namespace host ``vq-h1``,
this checkout's vq there on a private state root) and ``[hosts.cluster]`` driven by h1;
h1's own configuration has the lane with ``scheduler_driver = "localhost"``. No daemon
runs on h1, so its CLI writes the PENDING spec itself, as it does for any submit.
"""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path

import pytest

from tests.conftest import Vq
from tests.testbed import REPO, SshTestbed

pytestmark = pytest.mark.timeout(120)

VENV_PYTHON = "/opt/vq-testbed/venv/bin/python"


def test_submit_to_a_lane_driven_by_another_host_is_delegated(
    vq: Vq, testbed: SshTestbed, tmp_path: Path
) -> None:
    token = secrets.token_hex(4)
    remote_state = testbed.root / "hosts" / "vq-h1" / testbed.user / "state" / f"lane-{token}"
    remote_config = Path(f"{remote_state}-config")
    remote_config.mkdir(parents=True)
    lane = '[hosts.cluster]\nscheduler_dialect = "slurm"\nssh = "vq-h1"\nscratch_root = "/tmp/x"\n'
    (remote_config / "config.toml").write_text(lane)
    shutil.chown(remote_config, testbed.user, testbed.user)
    shutil.chown(remote_config / "config.toml", testbed.user, testbed.user)
    try:
        command = [
            "env",
            f"PYTHONPATH={REPO / 'src'}",
            f"VQ_STATE_DIR={remote_state}",
            f"VQ_CONFIG_DIR={remote_config}",
            VENV_PYTHON,
            "-m",
            "vq",
        ]
        local = Path(vq.env["VQ_CONFIG_DIR"])
        local.mkdir(parents=True, exist_ok=True)
        (local / "config.toml").write_text(
            "[hosts.h1]\n"
            'ssh = "vq-h1"\n'
            f"ssh_options = {json.dumps(['-F', str(testbed.ssh_config)])}\n"
            f"vq_command = {json.dumps(command)}\n"
            + lane.replace("[hosts.cluster]\n", '[hosts.cluster]\nscheduler_driver = "h1"\n')
        )
        source = tmp_path / "inputs"
        source.mkdir()
        (source / "data.txt").write_text("payload\n")
        done = vq.run("submit", "cluster", str(source), "--cpus", "1", "--json", "--", "true")
        answer = json.loads(done.stdout)
        job_id = answer["id"]
        spec = json.loads((remote_state / "queue" / f"{job_id}.json").read_text())
        assert (spec["state"], spec["scheduler_target"]) == ("PENDING", "cluster")
        assert (remote_state / "jobs" / job_id / "data.txt").read_text() == "payload\n"
        assert not (vq.root / "queue" / f"{job_id}.json").exists()  # not in this queue
        # A driver that is no configured vq host is refused before anything is sent.
        (local / "config.toml").write_text(
            lane.replace("[hosts.cluster]\n", '[hosts.cluster]\nscheduler_driver = "nowhere"\n')
        )
        refused = vq.run("submit", "cluster", "--", "true", check=False)
        assert refused.returncode == 2 and "not a configured vq host" in refused.stderr
        assert "hint:" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        shutil.rmtree(remote_state, ignore_errors=True)
        shutil.rmtree(remote_config, ignore_errors=True)
