"""Shared fixtures: a private state root per test, the real `vq` executable, a real daemon.

Nothing is mocked: tests drive the installed console script as a subprocess, exactly as a
user would, against a daemon started with `vq daemon start`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import hypothesis_profiles
from tests.suite_phases import pytest_addoption, pytest_collection_modifyitems

__all__ = ["pytest_addoption", "pytest_collection_modifyitems"]

hypothesis_profiles.load()  # reproducible property tests unless --hypothesis-profile says not

VQ_BIN = str(Path(sys.executable).with_name("vq"))

#: The suite may run as root (containers, CI). A root daemon refuses to start unless it is
#: the multi-user daemon or is told ``--allow-root``: the suite's single-user daemons are
#: told so, through the environment, only when the suite runs as root.
ROOT_ENV = {"VQ_ALLOW_ROOT": "1"} if os.geteuid() == 0 else {}
os.environ.update(ROOT_ENV)


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


def processes_with_env(marker: str) -> list[int]:
    """Live pids whose environment contains ``marker`` (e.g. VQ_STATE_DIR=...)."""
    wanted = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if wanted not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def check_exit(args: tuple[str, ...], proc: subprocess.CompletedProcess[str]) -> None:
    """Fail the test, with what ``vq ARGS`` printed, when it exited non-zero."""
    if proc.returncode != 0:
        raise AssertionError(
            f"vq {' '.join(args)} exited {proc.returncode}\n"
            f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
        )


@dataclass
class Vq:
    """Runs the real `vq` executable against one state root."""

    root: Path
    env: dict[str, str]

    def run(
        self, *args: str, check: bool = True, timeout: float = 120.0, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [VQ_BIN, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )
        if check:
            check_exit(args, proc)
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def submit(self, *args: str) -> str:
        job_id = self.run("submit", *args).stdout.strip()
        assert len(job_id) == 12, job_id
        return job_id

    def status(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.json("status", job_id)
        return result

    def state(self, job_id: str) -> str:
        """Read the state straight from the spec file (no CLI start-up cost)."""
        data = json.loads((self.root / "queue" / f"{job_id}.json").read_text())
        return str(data["state"])

    def spec(self, job_id: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.root / "queue" / f"{job_id}.json").read_text())
        return data

    def wait_state(self, job_id: str, *states: str, timeout: float = 30.0) -> str:
        return str(wait_until(lambda: self.state(job_id) in states and self.state(job_id), timeout))

    def start_daemon(self, *args: str) -> None:
        self.run("daemon", "start", *args)

    def stop_daemon(self) -> None:
        self.run("daemon", "stop", check=False, timeout=90)

    def daemon_pid(self) -> int | None:
        try:
            return int((self.root / "daemon.pid").read_text())
        except (OSError, ValueError):
            return None


@pytest.fixture
def vq(tmp_path: Path) -> Iterator[Vq]:
    """A private state root; at teardown the daemon is stopped and stray jobs killed."""
    root = tmp_path / "state"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("VQ_") and key != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        VQ_STATE_DIR=str(root),
        VQ_CONFIG_DIR=str(tmp_path / "config"),
        PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
        **ROOT_ENV,
    )
    cli = Vq(root, env)
    yield cli
    cli.stop_daemon()
    for pid in processes_with_env(f"VQ_STATE_DIR={root}"):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
