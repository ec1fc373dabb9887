"""(o) SSH round trip: ``SshRunner.run(["true"])`` over its master connection vs a fresh ssh.

Needs the testbed's loopback sshd (scripts/testbed/up.sh, root). When its env.sh is
missing the benchmark brings the testbed up without Slurm and takes it down afterwards.
Measured in paired rounds (one fresh connection, then calls over the master) so both
sides see the same load; the 1-minute load average is recorded before and after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import REPO, Figure, Result, Target, scaled

TB = Path(os.environ.get("VQ_TESTBED_DIR", "/var/lib/vq-testbed"))
SCRIPTS = REPO / "scripts" / "testbed"
#: Framed calls over the master timed in each paired round (one fresh connection each).
_MUXED_PER_ROUND = 5


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def run() -> list[Result]:
    key, name = "ssh_true", "(o) `ssh vq-local true`: SshRunner multiplexed vs fresh connection"
    if os.geteuid() != 0:
        return [Result(key, name, None, error="needs the testbed, which needs root")]
    started_testbed = not (TB / "env.sh").exists()
    env = {**os.environ, "VQ_TESTBED_SLURM": "0"}
    subprocess.run([str(SCRIPTS / "up.sh")], env=env, check=True, capture_output=True)
    control = Path(tempfile.mkdtemp(prefix="vqcm-", dir="/tmp"))
    try:
        return [_measure(key, name, TB / "ssh" / "config", control)]
    finally:
        shutil.rmtree(control, ignore_errors=True)
        if started_testbed:
            subprocess.run([str(SCRIPTS / "down.sh")], check=False, capture_output=True)


def _measure(key: str, name: str, config: Path, control: Path) -> Result:
    """Paired rounds: each round times one fresh connection, then ``_MUXED_PER_ROUND``
    framed calls and one plain ``ssh true`` over the master, so both sides see the
    same machine load."""
    from vq.transport.ssh import SshRunner

    runner = SshRunner("vq-local", ssh_options=("-F", str(config)), control_dir=control)
    fresh_argv = ["ssh", "-F", str(config), "-o", "ControlMaster=no", "-o", "ControlPath=none"]
    load_before = os.getloadavg()[0]
    muxed: list[float] = []
    bare_mux: list[float] = []
    fresh: list[float] = []
    try:
        start = time.perf_counter()
        runner.run(["true"]).check("true")  # starts the master connection
        first_ms = _ms_since(start)
        for _ in range(5):
            runner.run(["true"])
        for _ in range(scaled(20, minimum=5)):
            start = time.perf_counter()
            subprocess.run([*fresh_argv, "vq-local", "true"], check=True, stdin=subprocess.DEVNULL)
            fresh.append(_ms_since(start))
            for _ in range(_MUXED_PER_ROUND):
                start = time.perf_counter()
                runner.run(["true"]).check("true")
                muxed.append(_ms_since(start))
            start = time.perf_counter()
            subprocess.run(runner.ssh_argv("true"), check=True, stdin=subprocess.DEVNULL)
            bare_mux.append(_ms_since(start))
    finally:
        runner.close()
    bare_mux.sort()
    return Result(
        key,
        name,
        Figure("SshRunner.run(['true']), framed, over the master", "ms", muxed, show_p95=True),
        Figure("ssh -F testbed vq-local true, new connection each time", "ms", fresh),
        Target("multiplexed ≤ 0.1× fresh", "ratio", 0.1),
        extra={
            "first_call_with_master_start_ms": first_ms,
            "plain_ssh_over_master_median_ms": bare_mux[len(bare_mux) // 2],
            "plain_ssh_over_master_vs_fresh": bare_mux[len(bare_mux) // 2]
            / sorted(fresh)[len(fresh) // 2],
            "paired_rounds": len(fresh),
            "loadavg_1min": [load_before, os.getloadavg()[0]],
        },
    )
