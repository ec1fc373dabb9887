"""The real SSH testbed (scripts/testbed/up.sh) as pytest fixtures.

``testbed`` (session scope) runs ``scripts/testbed/up.sh`` with ``VQ_TESTBED_SLURM=0``
(idempotent: a running testbed is reused in about a second) and returns what its
``env.sh`` describes. The testbed needs root; when it cannot come up the tests are
skipped on a developer machine and FAIL under ``CI=true``.

``ssh_runner_factory`` builds :class:`~vq.transport.ssh.SshRunner` objects on the testbed's
ssh config, each with a private short control directory, and stops their master
connections at the end of the test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from vq.transport.ssh import HostKeyPolicy, SshRunner

REPO = Path(__file__).resolve().parents[1]
UP = REPO / "scripts" / "testbed" / "up.sh"
TB = Path(os.environ.get("VQ_TESTBED_DIR", "/var/lib/vq-testbed"))


@dataclass(frozen=True)
class SshTestbed:
    root: Path
    ssh_config: Path
    known_hosts: Path
    client_key: Path
    user: str
    noisy_user: str
    hosts: tuple[str, ...]

    @property
    def netns_hosts(self) -> tuple[str, ...]:
        return tuple(h for h in self.hosts if h.startswith("vq-h"))


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the SSH testbed is needed: {reason}")
    pytest.skip(f"SSH testbed unavailable: {reason}")


def _read_env(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export ") :].partition("=")
            env[key] = value.strip('"')
    return env


#: Knobs of a running testbed that a plain re-run of up.sh would reset (docs/testbed.md).
KEPT_KNOBS = ("VQ_TESTBED_SLURM_CPUS", "VQ_TESTBED_SLURM_GPUS")


def running_knobs() -> dict[str, str]:
    """The :data:`KEPT_KNOBS` the running testbed was brought up with (its ``env.sh``)."""
    try:
        values = _read_env(TB / "env.sh")
    except OSError:
        return {}
    return {key: values[key] for key in KEPT_KNOBS if values.get(key)}


def run_up(**knobs: str) -> subprocess.CompletedProcess[str]:
    """Run ``scripts/testbed/up.sh`` (idempotent) with ``knobs`` in its environment.

    The running testbed's CPU and GPU advertisement is passed on (:func:`running_knobs`)
    unless this process's environment or ``knobs`` set it: re-running up.sh from a test
    never reverts a testbed someone brought up with ``VQ_TESTBED_SLURM_CPUS``/``_GPUS``.
    """
    env = {**running_knobs(), **os.environ, **knobs}
    return subprocess.run(
        [str(UP)], env=env, capture_output=True, text=True, timeout=600, check=False
    )


def read_testbed() -> SshTestbed:
    """The testbed its ``env.sh`` describes."""
    values = _read_env(TB / "env.sh")
    return SshTestbed(
        root=TB,
        ssh_config=Path(values["VQ_TESTBED_SSH_CONFIG"]),
        known_hosts=Path(values["VQ_TESTBED_KNOWN_HOSTS"]),
        client_key=Path(values["VQ_TESTBED_SSH_KEY"]),
        user=values["VQ_TESTBED_USER"],
        noisy_user=values["VQ_TESTBED_NOISY_USER"],
        hosts=tuple(values["VQ_TESTBED_HOSTS"].split()),
    )


@pytest.fixture(scope="session")
def testbed() -> SshTestbed:
    if os.geteuid() != 0:
        unavailable("scripts/testbed/up.sh needs root")
    if shutil.which("ssh") is None and os.environ.get("CI") != "true":
        unavailable("no ssh client (scripts/install-test-deps.sh)")
    proc = run_up(VQ_TESTBED_SLURM="0")
    if proc.returncode != 0:
        unavailable(f"scripts/testbed/up.sh failed:\n{proc.stderr[-2000:]}")
    return read_testbed()


SshRunnerFactory = Callable[..., SshRunner]


@pytest.fixture
def ssh_runner_factory(testbed: SshTestbed) -> Iterator[SshRunnerFactory]:
    made: list[SshRunner] = []
    dirs: list[str] = []

    def make(
        destination: str = "vq-local",
        *,
        options: tuple[str, ...] = (),
        host_key_policy: HostKeyPolicy = "strict",
        config: Path | None = None,
    ) -> SshRunner:
        control = tempfile.mkdtemp(prefix="vqcm-", dir="/tmp")
        dirs.append(control)
        runner = SshRunner(
            destination,
            ssh_options=("-F", str(config or testbed.ssh_config), *options),
            host_key_policy=host_key_policy,
            control_dir=Path(control),
        )
        made.append(runner)
        return runner

    yield make
    for runner in made:
        runner.close()
    for control in dirs:
        shutil.rmtree(control, ignore_errors=True)
