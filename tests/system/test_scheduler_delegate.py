"""``vq submit LANE`` for a lane another host drives (``scheduler_driver = "h1"``) is
delegated over SSH: the driver's queue gets the spec with ``scheduler_target = LANE``.

Real CLI on both sides: this queue names ``[hosts.h1]`` (the namespace host ``vq-h1``,
this checkout's vq there on a private state root) and ``[hosts.cluster]`` driven by h1;
h1's own configuration has the lane with ``scheduler_driver = "localhost"``.

* Without a daemon on h1, its CLI writes the PENDING spec itself, as for any submit.
* With h1's own daemon running, that daemon drives the job through the testbed's real
  Slurm from h1 (whose ``slurm.conf`` names the controller across its link) to its end.
"""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from tests.system.remote_fleet import kill_leftovers
from tests.system.slurm_lane import (
    sacct_ids,
    scratch,  # noqa: F401 - the fixture
    slurm_lane_keys,
    slurm_testbed,  # noqa: F401 - the fixture
    toml_table,
)
from tests.testbed import REPO, SshTestbed

pytestmark = pytest.mark.timeout(240)

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


# --- the driver's own daemon runs the delegated job ------------------------------------
DRIVER = "vq-h1"
DRIVER_ADDRESS = "10.200.1.2"


def _driver_ssh(testbed: SshTestbed, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ssh", "-F", str(testbed.ssh_config), DRIVER, shlex.join(words)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _owned(testbed: SshTestbed, path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(text)
    path.chmod(mode)
    shutil.chown(path, testbed.user, testbed.user)


def _driver_lane(testbed: SshTestbed, config: Path, root: str) -> str:
    """The driver's ``[hosts.cluster]``: a Slurm lane it drives itself, its login being
    the driver host (whose ``slurm.conf`` names the controller across its link), reached
    over the driver's own sshd with the driver-side copies of the testbed's client key
    and the host's key."""
    key = config / "client_key"
    _owned(testbed, key, testbed.client_key.read_text(), 0o600)
    host_key = (testbed.root / "ssh" / f"host_{DRIVER}_ed25519.pub").read_text().split()
    known = config / "known_hosts"
    _owned(testbed, known, f"{DRIVER_ADDRESS} {host_key[0]} {host_key[1]}\n")
    ssh_config = config / "ssh_config"
    _owned(
        testbed,
        ssh_config,
        f"Host driver-login\n  HostName {DRIVER_ADDRESS}\n  Port 22\n  User {testbed.user}\n"
        f"  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
        "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
    )
    keys = slurm_lane_keys(testbed, root, ssh="driver-login", ssh_options=["-F", str(ssh_config)])
    return toml_table("hosts.cluster", keys)


def test_the_driver_daemon_runs_a_delegated_job_through_slurm(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    scratch: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """This queue names the lane with ``scheduler_driver = "h1"``; ``vq submit cluster``
    lands in h1's queue, h1's own running daemon stages and submits it to Slurm from h1,
    polls it, copies the workspace back into h1's queue and ends the job with the payload's
    exit code. This queue never holds the job; ``vq status h1 ID`` reads it there."""
    testbed = slurm_testbed
    if DRIVER not in testbed.hosts:
        pytest.fail(f"the testbed has no {DRIVER}")
    line = _driver_ssh(testbed, "grep", "^SlurmctldHost=", "/etc/slurm/slurm.conf").stdout
    assert line.strip().endswith("(10.200.1.1)"), line
    token = secrets.token_hex(4)
    remote_state = testbed.root / "hosts" / DRIVER / testbed.user / "state" / f"drv-{token}"
    remote_config = Path(f"{remote_state}-config")
    remote_config.mkdir(parents=True)
    shutil.chown(remote_config, testbed.user, testbed.user)
    command = [
        "env",
        f"PYTHONPATH={REPO / 'src'}",
        f"VQ_STATE_DIR={remote_state}",
        f"VQ_CONFIG_DIR={remote_config}",
        VENV_PYTHON,
        "-m",
        "vq",
    ]
    _owned(testbed, remote_config / "config.toml", _driver_lane(testbed, remote_config, scratch))
    try:
        started = _driver_ssh(testbed, *command, "daemon", "start")
        assert started.returncode == 0, started.stderr
        local = Path(vq.env["VQ_CONFIG_DIR"])
        local.mkdir(parents=True, exist_ok=True)
        driver_table = toml_table(
            "hosts.h1",
            {
                "ssh": DRIVER,
                "ssh_options": ["-F", str(testbed.ssh_config)],
                "ssh_timeout": 30,
                "vq_command": command,
            },
        )
        lane_here = slurm_lane_keys(testbed, scratch, scheduler_driver="h1")
        (local / "config.toml").write_text(driver_table + toml_table("hosts.cluster", lane_here))
        source = tmp_path / "inputs"
        source.mkdir()
        (source / "data.txt").write_text("payload\n")
        done = vq.run(
            "submit", "cluster", str(source), "--json", "--", "sh", "-c", "cat data.txt; exit 3"
        )
        job_id = json.loads(done.stdout)["id"]
        assert not (vq.root / "queue" / f"{job_id}.json").exists()  # not in this queue
        spec_path = remote_state / "queue" / f"{job_id}.json"
        terminal = {"COMPLETED", "FAILED", "KILLED", "ABORTED_BY_QUEUE", "TIME_EXCEEDED"}

        def ended() -> dict[str, Any] | None:
            try:
                spec: dict[str, Any] = json.loads(spec_path.read_text())
            except (OSError, ValueError):
                return None
            return spec if spec.get("state") in terminal else None

        spec = wait_until(ended, 120, interval=0.2)
        assert (spec["state"], spec["exit_code"]) == ("FAILED", 3), spec
        assert (spec["scheduler_target"], spec["scheduler_state"]) == ("cluster", "ended")
        slurm_id = spec["scheduler_job_id"]
        assert slurm_id.isdigit()
        # The driver's daemon copied the workspace back into its own queue.
        assert (remote_state / "jobs" / job_id / "stdout.log").read_text() == "payload\n"
        # One Slurm job, submitted from the driver's login, under the job's tag.
        assert wait_until(lambda: sacct_ids(testbed, f"vq-{job_id}"), 30) == [slurm_id]
        # This queue reads the job where it lives.
        shown = vq.run("status", "h1", job_id, "--json")
        remote_view = json.loads(shown.stdout)
        assert (remote_view["state"], remote_view["exit_code"]) == ("FAILED", 3)
        assert remote_view["scheduler_job_id"] == slurm_id
    finally:
        _driver_ssh(testbed, *command, "daemon", "stop")
        kill_leftovers("h1", remote_state)
        shutil.rmtree(remote_state, ignore_errors=True)
        shutil.rmtree(remote_config, ignore_errors=True)
