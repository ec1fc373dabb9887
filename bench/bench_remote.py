"""remote (b)–(d): vq against real remote daemons on the testbed's namespace hosts.

- remote (b): a warm ``vq status h1 ID`` against its floor, a multiplexed ``ssh true``
  plus a local ``vq status ID`` (target ≤ 1.3×).
- remote (c): ``vq queue --all`` over three hosts against the slowest single
  ``vq queue HOST`` (target ≤ 1.3×: the hosts are asked in parallel).
- remote (d): a hostless ``vq status ID`` with one host partitioned (target: within
  ``ssh_timeout`` + 1 s), next to the same call with every host answering.

Every figure is measured in paired rounds (both sides in one round, alternating) and
the 1-minute load average is recorded before and after each.

Needs root and the testbed (scripts/testbed/up.sh with three namespace hosts). Each host
runs this checkout's vq (``PYTHONPATH`` into ``src/``) on a private state root, started
and stopped here; the benchmark uses its own SSH client config and control directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from common import PYTHON, REPO, Figure, Result, Target, scaled

TB = Path(os.environ.get("VQ_TESTBED_DIR", "/var/lib/vq-testbed"))
HOSTS = ("h1", "h2", "h3")
VENV_PYTHON = "/opt/vq-testbed/venv/bin/python"
SSH_TIMEOUT = 3


class _Fleet:
    def __init__(self, base: Path) -> None:
        self.base, self.token = base, f"bench-{secrets.token_hex(3)}"
        self.local, self.config, self.runtime = base / "state", base / "cfg", base / "rt"
        for directory in (self.local, self.config, self.runtime):
            directory.mkdir(mode=0o700)
        self.ssh_config, self.known = base / "ssh_config", base / "known_hosts"
        config, known, tables = [], [], []
        for number, host in enumerate(HOSTS, start=1):
            address = f"10.200.{number}.2"
            config.append(
                f"Host vq-{host}\n  HostName {address}\n  User vqtest\n"
                f"  IdentityFile {TB}/ssh/client_ed25519\n  IdentitiesOnly yes\n"
                f"  UserKnownHostsFile {self.known}\n  GlobalKnownHostsFile /dev/null\n"
                "  BatchMode yes\n"
            )
            kind, key = (TB / "ssh" / f"host_vq-{host}_ed25519.pub").read_text().split()[:2]
            known.append(f"{address} {kind} {key}\n")
            tables.append(
                f'[hosts.{host}]\nssh = "vq-{host}"\nssh_timeout = {SSH_TIMEOUT}\n'
                f'ssh_options = ["-F", "{self.ssh_config}"]\n'
                f"vq_command = {json.dumps(self.vq_command(host))}\n"
            )
        self.ssh_config.write_text("\n".join(config))
        self.known.write_text("".join(known))
        (self.config / "config.toml").write_text("\n".join(tables))

    def remote_state(self, host: str) -> Path:
        return TB / "hosts" / f"vq-{host}" / "vqtest" / "state" / self.token

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

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "VQ_STATE_DIR": str(self.local),
            "VQ_CONFIG_DIR": str(self.config),
            "XDG_RUNTIME_DIR": str(self.runtime),
        }

    def vq(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PYTHON, "-m", "vq", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def ssh(self, host: str, *words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), f"vq-{host}", shlex.join(words)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def timed(self, *args: str) -> float:
        start = time.perf_counter()
        self.vq(*args)
        return (time.perf_counter() - start) * 1000

    @contextlib.contextmanager
    def partition(self, host: str) -> Iterator[None]:
        link = ["ip", "-n", f"vq-{host}", "link", "set", f"vq{host}-ns"]
        subprocess.run([*link, "down"], check=True)
        try:
            yield
        finally:
            subprocess.run([*link, "up"], check=True)


def _median(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2]


def run() -> list[Result]:
    names = {
        "remote_status": "remote (b) warm `vq status h1 ID` vs `ssh true` (muxed) + local status",
        "remote_queue_all": "remote (c) `vq queue --all` over 3 hosts vs the slowest single host",
        "remote_discovery": "remote (d) hostless `vq status ID`, one host partitioned",
    }
    if os.geteuid() != 0 or not Path("/run/netns/vq-h3").exists():
        why = "needs root and the testbed with 3 namespace hosts (VQ_TESTBED_NETNS_HOSTS=3)"
        return [Result(key, name, None, error=why) for key, name in names.items()]
    subprocess.run(
        [VENV_PYTHON, "-m", "compileall", "-q", str(REPO / "src")], capture_output=True, check=False
    )
    base = Path(tempfile.mkdtemp(prefix="vqbr-", dir="/tmp"))
    fleet = _Fleet(base)
    started = []
    try:
        for host in HOSTS:
            done = fleet.ssh(host, *fleet.vq_command(host), "daemon", "start")
            if done.returncode != 0:
                raise RuntimeError(f"remote daemon on {host}: {done.stderr.strip()}")
            started.append(host)
        return [
            _status(fleet, names["remote_status"]),
            _queue_all(fleet, names["remote_queue_all"]),
            _discovery(fleet, names["remote_discovery"]),
        ]
    finally:
        for host in started:
            fleet.ssh(host, *fleet.vq_command(host), "daemon", "stop")
            shutil.rmtree(fleet.remote_state(host), ignore_errors=True)
            shutil.rmtree(f"{fleet.remote_state(host)}-config", ignore_errors=True)
        for socket in (fleet.runtime / "vq").glob("cm-*"):
            subprocess.run(
                ["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "x"],
                capture_output=True,
                timeout=10,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)


def _load() -> float:
    return os.getloadavg()[0]


def _status(fleet: _Fleet, name: str) -> Result:
    """Paired rounds: a remote status, a multiplexed ``ssh true`` and a local status,
    in turn, so the floor is summed per round under the same load."""
    remote_id = fleet.vq("submit", "h1", "--", "true").stdout.strip()
    local_id = fleet.vq("submit", "--", "true").stdout.strip()
    for _ in range(3):
        fleet.vq("status", "h1", remote_id)  # warm: master connection, bytecode
    control = next((fleet.runtime / "vq").glob("cm-*"))
    ssh_true_argv = [
        *("ssh", "-F", str(fleet.ssh_config), "-o", f"ControlPath={control}", "vq-h1", "true")
    ]
    load_before = _load()
    remote, local, ssh_true, floor = [], [], [], []
    for _ in range(scaled(15, minimum=5)):
        remote.append(fleet.timed("status", "h1", remote_id))
        start = time.perf_counter()
        subprocess.run(ssh_true_argv, check=False, capture_output=True)
        ssh_true.append((time.perf_counter() - start) * 1000)
        local.append(fleet.timed("status", "localhost", local_id))
        floor.append(ssh_true[-1] + local[-1])
    return Result(
        "remote_status",
        name,
        Figure("vq status h1 ID (warm master)", "ms", remote, show_p95=True),
        Figure("ssh true over the master + local vq status (same round)", "ms", floor),
        Target("≤ 1.3×", "ratio", 1.3),
        extra={
            "ssh_true_median_ms": _median(ssh_true),
            "local_status_median_ms": _median(local),
            "paired_rounds": len(remote),
            "loadavg_1min": [load_before, _load()],
        },
    )


def _queue_all(fleet: _Fleet, name: str) -> Result:
    """Paired rounds: ``queue --all`` and each single host in turn (the order rotating);
    the comparison is the host whose single listing has the highest median."""
    for host in HOSTS:
        for _ in range(5):
            fleet.vq("submit", host, "--", "true")
    fleet.vq("queue", "--all")
    load_before = _load()
    fleet_ms: list[float] = []
    single: dict[str, list[float]] = {host: [] for host in HOSTS}
    rounds = scaled(10, minimum=4)
    for round_no in range(rounds):
        order = [*HOSTS[round_no % 3 :], *HOSTS[: round_no % 3]]
        fleet_ms.append(fleet.timed("queue", "--all", "--json"))
        for host in order:
            single[host].append(fleet.timed("queue", host, "--json"))
    per_host = {host: _median(samples) for host, samples in single.items()}
    slowest = max(per_host, key=lambda h: per_host[h])
    return Result(
        "remote_queue_all",
        name,
        Figure("vq queue --all --json (local + 3 hosts)", "ms", fleet_ms),
        Figure(f"vq queue {slowest} --json (the slowest single host)", "ms", single[slowest]),
        Target("≤ 1.3×", "ratio", 1.3),
        extra={
            "per_host_median_ms": per_host,
            "sequential_sum_ms": sum(per_host.values()),
            "paired_rounds": rounds,
            "loadavg_1min": [load_before, _load()],
            "note": "the three namespace hosts share this machine's CPUs, so their three "
            "remote vq starts contend; the sum shows what asking them in turn would cost",
        },
    )


def _discovery(fleet: _Fleet, name: str) -> Result:
    """Hostless status of a job on h2, alternating a round with every host answering
    and a round with h3 partitioned (its link restored after each)."""
    job_id = fleet.vq("submit", "h2", "--", "true").stdout.strip()
    fleet.vq("status", job_id)
    load_before = _load()
    healthy, samples = [], []
    for _ in range(scaled(3, minimum=2)):
        start = time.perf_counter()
        done = fleet.vq("status", job_id)
        healthy.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise RuntimeError(f"hostless status failed: {done.stderr.strip()}")
        with fleet.partition("h3"):
            start = time.perf_counter()
            done = fleet.vq("status", job_id)
            samples.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise RuntimeError(f"hostless status failed: {done.stderr.strip()}")
        _wait_answers(fleet, "h3")
    return Result(
        "remote_discovery",
        name,
        Figure("hostless vq status ID, found on h2 while h3 is partitioned", "s", samples),
        Figure("the same with every host answering (same round)", "s", healthy),
        Target(f"≤ ssh_timeout + 1 s = {SSH_TIMEOUT + 1} s", "value", SSH_TIMEOUT + 1.0),
        extra={"paired_rounds": len(samples), "loadavg_1min": [load_before, _load()]},
    )


def _wait_answers(fleet: _Fleet, host: str, timeout: float = 30.0) -> None:
    """After a heal: until ``host`` answers ``ssh true`` again (a fresh round starts clean)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        argv = ["ssh", "-F", str(fleet.ssh_config), "-o", "ConnectTimeout=3", f"vq-{host}", "true"]
        if subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{host} did not answer within {timeout:g}s of the heal")
