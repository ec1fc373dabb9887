"""A local queue configured with the testbed's namespace hosts, each running a real daemon.

``remote_fleet`` (module scope) gives a private local state root whose config has
``[hosts.h1..h3]`` = ``vq-h1..3`` (``ssh_timeout`` :data:`SSH_TIMEOUT`, generous so a
host holding many jobs answers in time on a loaded machine; a test that measures the
deadline itself sets :data:`MEASURED_SSH_TIMEOUT` on its host). Each host runs this checkout's
vq (``PYTHONPATH`` into the source tree, the testbed venv's interpreter) on its own
private state root under the testbed user's per-host state, so tests never share a
queue with anyone else. The daemons are started over SSH and stopped at the end; a
partitioned host is always healed (``partition`` is a context manager).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.testbed import REPO, SshTestbed, run_up

HOSTS = ("h1", "h2", "h3")
VENV_PYTHON = "/opt/vq-testbed/venv/bin/python"
#: Every host's ``ssh_timeout``: a fleet read of a host with a thousand jobs can take
#: seconds when the machine is busy, and must not fail a test that does not time it.
SSH_TIMEOUT = 10
#: The ``ssh_timeout`` a test sets on the host whose deadline it measures.
MEASURED_SSH_TIMEOUT = 3


def netns(name: str) -> str:
    return f"vq-{name}"


@dataclass
class RemoteFleet:
    testbed: SshTestbed
    local: Path  # the local state root
    config: Path  # the local config dir
    runtime: Path  # XDG_RUNTIME_DIR: the SSH control directory lives here
    token: str
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def ssh_config(self) -> Path:
        return self.local.parent / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.local.parent / "known_hosts"

    def write_ssh_config(self) -> None:
        """Our own client config for vq-h1..3: another run of up.sh with fewer hosts
        rewrites the testbed's shared one."""
        tb, config, known = self.testbed, [], []
        for number, host in enumerate(HOSTS, start=1):
            address = f"10.200.{number}.2"
            config.append(
                f"Host {netns(host)}\n  HostName {address}\n  Port 22\n  User {tb.user}\n"
                f"  IdentityFile {tb.client_key}\n  IdentitiesOnly yes\n"
                f"  UserKnownHostsFile {self.known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
                "  StrictHostKeyChecking yes\n  BatchMode yes\n  ConnectTimeout 5\n"
            )
            key = (tb.root / "ssh" / f"host_{netns(host)}_ed25519.pub").read_text().split()
            known.append(f"{address} {key[0]} {key[1]}\n")
        self.ssh_config.write_text("\n".join(config))
        self.known_hosts.write_text("".join(known))

    def remote_state(self, host: str) -> Path:
        return self.testbed.root / "hosts" / netns(host) / self.testbed.user / "state" / self.token

    def vq_command(self, host: str) -> list[str]:
        state = self.remote_state(host)
        return [
            "env",
            f"PYTHONPATH={REPO / 'src'}",
            f"VQ_STATE_DIR={state}",
            f"VQ_CONFIG_DIR={state}-config",
            VENV_PYTHON,
            "-m",
            "vq",
        ]

    def host_table(self, host: str, **extra: object) -> str:
        keys: dict[str, object] = {
            "ssh": netns(host),
            "ssh_options": ["-F", str(self.ssh_config)],
            "ssh_timeout": SSH_TIMEOUT,
            "vq_command": self.vq_command(host),
            **extra,
        }
        lines = [f"[hosts.{host}]", *(f"{key} = {json.dumps(v)}" for key, v in keys.items())]
        return "\n".join(lines) + "\n"

    def write_config(self, head: str = "", **per_host: dict[str, object]) -> None:
        text = head + "".join(self.host_table(h, **per_host.get(h, {})) for h in HOSTS)
        (self.config / "config.toml").write_text(text)

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            **os.environ,
            "VQ_STATE_DIR": str(self.local),
            "VQ_CONFIG_DIR": str(self.config),
            "XDG_RUNTIME_DIR": str(self.runtime),
            **self.extra_env,
            **extra,
        }
        env.pop("VQ_DEBUG", None)
        return env

    def vq(
        self,
        *args: str,
        stdin: bytes | None = None,
        timeout: float = 120,
        cwd: Path | None = None,
        **env: str,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vq", *args],
            input=stdin.decode() if stdin is not None else None,
            env=self.env(**env),
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=timeout,
            check=False,
        )

    def popen(self, *args: str, stderr: Path | None = None, **env: str) -> subprocess.Popen[bytes]:
        """``vq ARGS`` in the background; stderr to a file when given (to poll it)."""
        with contextlib.ExitStack() as stack:
            err = subprocess.PIPE if stderr is None else stack.enter_context(stderr.open("wb"))
            return subprocess.Popen(
                [sys.executable, "-m", "vq", *args],
                env=self.env(**env),
                stdout=subprocess.PIPE,
                stderr=err,
            )

    def ssh(self, host: str, *words: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        import shlex

        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), netns(host), shlex.join(words)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def remote_vq(self, host: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.ssh(host, *self.vq_command(host), *args)

    def submit(self, host: str, *args: str) -> str:
        done = self.vq("submit", host, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def remote_log(self, host: str, job_id: str) -> bytes:
        return (self.remote_state(host) / "jobs" / job_id / "stdout.log").read_bytes()

    def remote_spec(self, host: str, job_id: str) -> dict[str, object]:
        data: dict[str, object] = json.loads(
            (self.remote_state(host) / "queue" / f"{job_id}.json").read_text()
        )
        return data

    def health(self, host: str) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.local / "hosts" / f"{host}.json").read_text())
        return data

    @contextlib.contextmanager
    def partition(self, host: str) -> Iterator[None]:
        """The host's link down (namespace side), always healed afterwards. The testbed
        is shared: if another process brought the link back up meanwhile, the test fails
        saying so rather than reporting a verdict on a partition that did not hold."""
        link = ["ip", "-n", netns(host), "link", "set", f"vq{host}-ns"]
        subprocess.run([*link, "down"], check=True)
        try:
            yield
            if not link_down(host):
                raise AssertionError(
                    f"vq{host}-ns was brought back up during the partition by another process"
                )
        finally:
            subprocess.run([*link, "up"], check=True)
            wait_until(lambda: self.ssh(host, "true", timeout=10).returncode == 0, 30)


@contextlib.contextmanager
def slow_uplink(host: str, rate: str = "16mbit") -> Iterator[None]:
    """Rate-limit traffic towards ``host`` (its root-side veth), always removed after."""
    device = f"vq{host}-host"
    subprocess.run(
        [
            "tc",
            "qdisc",
            "replace",
            "dev",
            device,
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            "32kbit",
            "latency",
            "400ms",
        ],
        check=True,
    )
    try:
        yield
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", device, "root"], check=False)


def link_down(host: str) -> bool:
    """Whether the namespace side of ``host``'s link is administratively down."""
    shown = subprocess.run(
        ["ip", "-n", netns(host), "-br", "link", "show", f"vq{host}-ns"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return shown[1:2] == ["DOWN"]


def wait_until(predicate, timeout: float, interval: float = 0.1) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def _sshd_answers(host: str) -> bool:
    """Whether the namespace host ``host`` (``h1``…) accepts TCP on its sshd's port."""
    try:
        with socket.create_connection((f"10.200.{host.removeprefix('h')}.2", 22), timeout=3):
            return True
    except OSError:
        return False


def ensure_three_hosts(testbed: SshTestbed) -> None:
    """h1..h3 each with a listening sshd: up.sh (idempotent) brings up what is missing.

    A namespace that merely exists is not enough: one left behind by an interrupted
    teardown has no sshd in it."""
    if all(
        f"vq-{h}" in testbed.hosts or Path(f"/run/netns/vq-{h}").exists() for h in HOSTS
    ) and all(_sshd_answers(h) for h in HOSTS):
        return
    done = run_up(VQ_TESTBED_SLURM="0", VQ_TESTBED_NETNS_HOSTS="3")
    assert done.returncode == 0, f"scripts/testbed/up.sh failed:\n{done.stderr[-2000:]}"


def kill_leftovers(host: str, state: Path) -> None:
    """SIGKILL what still runs in ``host``'s namespace for the state root ``state`` (a
    daemon whose ``vq daemon stop`` was lost, e.g. to a partition): nothing of a test may
    outlive it, and nothing of another run's state root is touched."""
    listed = subprocess.run(
        ["ip", "netns", "pids", netns(host)], capture_output=True, text=True, check=False
    )
    wanted = f"VQ_STATE_DIR={state}".encode()
    for pid in listed.stdout.split():
        with contextlib.suppress(OSError):
            if wanted in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                os.kill(int(pid), 9)


@contextlib.contextmanager
def remote_fleet_of(testbed: SshTestbed) -> Iterator[RemoteFleet]:
    ensure_three_hosts(testbed)
    subprocess.run(
        [VENV_PYTHON, "-m", "compileall", "-q", str(REPO / "src")], capture_output=True, check=False
    )
    base = Path(tempfile.mkdtemp(prefix="vqrf-", dir="/tmp"))
    fleet = RemoteFleet(
        testbed, base / "state", base / "cfg", base / "rt", f"rt-{secrets.token_hex(4)}"
    )
    for directory in (fleet.local, fleet.config, fleet.runtime):
        directory.mkdir(mode=0o700)
    fleet.write_ssh_config()
    fleet.write_config()
    started: list[str] = list(HOSTS)  # each stopped at the end, whatever its start did
    try:
        with ThreadPoolExecutor(len(HOSTS)) as pool:  # three SSH round trips at once
            starts = list(pool.map(lambda host: fleet.remote_vq(host, "daemon", "start"), HOSTS))
        for host, done in zip(HOSTS, starts, strict=True):
            assert done.returncode == 0, f"{host}: {done.stderr}"
        yield fleet
    finally:
        for host in started:  # links are healed by each partition, never here: the
            # testbed is shared, and another run may be partitioning this host on purpose
            with contextlib.suppress(subprocess.SubprocessError):
                fleet.remote_vq(host, "daemon", "stop")
            kill_leftovers(host, fleet.remote_state(host))  # a stop that could not get there
            for path in (fleet.remote_state(host), Path(f"{fleet.remote_state(host)}-config")):
                shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(subprocess.SubprocessError):
            for socket in fleet.runtime.glob("vq/cm-*"):
                subprocess.run(
                    ["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "x"],
                    capture_output=True,
                    timeout=10,
                    check=False,
                )
        shutil.rmtree(base, ignore_errors=True)
