"""A running multi-user root daemon on a fresh system root, and its users' CLIs.

Shared by the multi-user integration and chaos tests. Root runs ``vq daemon start`` on a
fresh 0755 system root with ``[multi_user] enabled`` and the collector drop; the users of
``scripts/testbed/users.sh`` run their own CLI with ``runuser`` and the world-readable
testbed venv (built from Debian's /usr/bin/python3), this checkout on ``PYTHONPATH``.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import VQ_BIN, processes_with_env, wait_until
from vq.executors._privdrop import cgroup_parents

USER_PYTHON = "/opt/vq-testbed/venv/bin/python"
SRC = str(Path(__file__).resolve().parents[1] / "src")
TERMINAL = ("COMPLETED", "FAILED", "KILLED", "OOM_KILLED", "TIME_EXCEEDED", "ABORTED_BY_QUEUE")


def usable() -> bool:
    try:
        for name in ("vqa", "vqb", "vqadm"):
            pwd.getpwnam(name)
        parents = cgroup_parents()
    except (KeyError, OSError):
        return False
    return (
        os.geteuid() == 0
        and os.access(USER_PYTHON, os.X_OK)
        and all(os.access(p, os.W_OK) for p in parents.values())
    )


#: Mark a test module: skipped where the multi-user daemon cannot run for real.
needs_multi_user = pytest.mark.skipif(
    not usable(),
    reason="needs root, writable cgroups, the testbed users and /opt/vq-testbed/venv",
)


@dataclass
class System:
    """A running multi-user daemon and the CLIs of its users."""

    base: Path
    env: dict[str, str]

    @property
    def root(self) -> Path:
        return self.base / "system"

    def admin(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``vq`` as root (the system root's administrator)."""
        return self._run([VQ_BIN, *args], check)

    def as_user(
        self, user: str, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``vq`` as ``user``: their own CLI, their own euid, this checkout."""
        argv = ["runuser", "-u", user, "--", "env", f"PYTHONPATH={SRC}", "HOME=/tmp"]
        argv += [f"{k}={v}" for k, v in self.env.items() if k.startswith("VQ_")]
        return self._run([*argv, USER_PYTHON, "-m", "vq", *args], check)

    def _run(self, argv: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv[-3:]} exited {proc.returncode}: {proc.stderr}")
        return proc

    def submit(self, user: str, *args: str) -> str:
        job_id = self.as_user(user, "submit", *args).stdout.strip()
        assert len(job_id) == 12, job_id
        return job_id

    def tree(self, user: str) -> Path:
        return self.root / "users" / str(pwd.getpwnam(user).pw_uid)

    def spec_path(self, user: str, job_id: str) -> Path:
        return self.tree(user) / "queue" / f"{job_id}.json"

    def spec(self, user: str, job_id: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.spec_path(user, job_id).read_text())
        return data

    def state(self, user: str, job_id: str) -> str:
        return str(self.spec(user, job_id)["state"])

    def wait_state(self, user: str, job_id: str, *states: str, timeout: float = 30.0) -> str:
        return str(
            wait_until(
                lambda: self.state(user, job_id) in states and self.state(user, job_id), timeout
            )
        )

    def out(self, user: str, job_id: str) -> str:
        return (self.tree(user) / "jobs" / job_id / "stdout.log").read_text()

    def daemon_pid(self) -> int:
        return int((self.root / "daemon.pid").read_text())


def start(system: System) -> None:
    # Caps above the two cores of a small machine, so the quota is what holds vqa back.
    system.admin("daemon", "start", "--max-cpus", "8", "--max-jobs", "8")


def make_system(users: tuple[str, ...] = ("vqa", "vqb")) -> Iterator[System]:
    """A started system whose ``users`` are provisioned; stopped and removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="vq-multi-", dir="/tmp"))
    base.chmod(0o755)  # root's pytest tmp_path is 0700: users could not reach their trees
    config = base / "etc"
    config.mkdir(mode=0o755)
    vqa = pwd.getpwnam("vqa").pw_uid
    (config / "config.toml").write_text(
        '[multi_user]\nenabled = true\nprivilege_drop = "collector"\n\n'
        f"[quotas.uid.{vqa}]\nmax_concurrent_cpus = 2\n"
    )
    (config / "config.toml").chmod(0o644)
    token = config / "web-token"
    token.write_text("s3cret-admin-token\n")
    token.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VQ_") and k != "PYTHONPATH"}
    env.update(VQ_CONFIG_DIR=str(config), VQ_MULTI_USER_ROOT=str(base / "system"))
    sys_ = System(base, env)
    for user in users:
        sys_.admin("admin", "user", "add", user)
    start(sys_)
    try:
        yield sys_
    finally:
        sys_.admin("daemon", "stop", check=False)
        for tree in (base / "system" / "users").glob("*/queue/*.json"):
            for pid in processes_with_env(f"VQ_JOB_ID={tree.stem}"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)
