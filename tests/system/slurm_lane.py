"""The testbed's real Slurm 22.05 (and its Torque host) for the lane and packing system tests.

* ``slurm_testbed`` (module scope): the testbed with Slurm up (``scripts/testbed/up.sh``
  through :func:`tests.testbed.run_up`, which keeps a running ``VQ_TESTBED_SLURM_CPUS`` /
  ``_GPUS``; once per session while Slurm keeps answering); skipped on a developer
  machine without root and FAILS under ``CI=true``.
* ``scratch``: a fresh ``/tmp/vq-lane-<hex>`` on ``vq-local`` (made as the testbed user),
  removed afterwards; packing tests import it as ``remote_root``.
* :func:`ssh_on` / :func:`ssh_local`: one command on a testbed host as the testbed user.
* :func:`sacct_ids`: the Slurm job ids accounting holds under a job name (last hour).
* The slow-submit fault (``scripts/testbed/slow_submit.sh``, the testbed's ``sbatch``):
  :func:`configure_slow_lane`, :func:`set_submit_delay`, :func:`submit_calls`; and
  :func:`cut_ssh`, which drops a daemon's SSH link mid-call, :func:`kill_and_restart`
  (SIGKILL the daemon, start it again) and :func:`submit_packed` (an array with
  ``--pack tb``).
* The config: :data:`LANE_TIMING` (the fast polling and backoff every lane test uses),
  :func:`slurm_lane_keys` (``[hosts.cluster]`` as a Slurm lane on ``vq-local``),
  :func:`toml_table`, :func:`pack_profile_tables` (the ``tb`` profile: two one-CPU tasks
  per allocation, the node's 2 CPUs) and :func:`write_config`.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq, processes_with_env, wait_until
from tests.testbed import TB, SshTestbed, _read_env, read_testbed, run_up, unavailable
from vq._proc_stat import is_alive

#: Poll every second, no RPC throttling, quick copy-back retries and absence rechecks:
#: a lane test sees every transition within seconds.
LANE_TIMING: dict[str, Any] = {
    "poll_interval": 1,
    "scheduler_rpc_per_minute": 600,
    "scheduler_copy_back_delays": [1, 1, 1],
    "scheduler_absent_recheck_seconds": 2,
    "scheduler_backoff_seconds": 5,
}


#: Whether this test session already brought Slurm up (the first module that asks does).
_brought_up: list[bool] = []


def _slurm_answers() -> bool:
    try:
        done = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, timeout=15, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "is UP" in done.stdout


@pytest.fixture(scope="module")
def slurm_testbed() -> SshTestbed:
    """The testbed with Slurm up: ``scripts/testbed/up.sh`` (idempotent) runs for the
    session's first module, and again for a later one only if Slurm stopped answering."""
    if os.geteuid() != 0:
        unavailable("scripts/testbed/up.sh needs root")
    if not (_brought_up and _slurm_answers()):
        proc = run_up(VQ_TESTBED_SLURM="1")
        if proc.returncode != 0:
            unavailable(f"scripts/testbed/up.sh failed:\n{proc.stderr[-2000:]}")
        _brought_up.append(True)
    if _read_env(TB / "env.sh").get("VQ_TESTBED_SLURM") != "1" or shutil.which("sbatch") is None:
        unavailable("the testbed came up without Slurm")
    return read_testbed()


def ssh_on(testbed: SshTestbed, host: str, *words: str) -> subprocess.CompletedProcess[str]:
    """``words`` run on ``host`` (a testbed ssh alias) as the testbed user."""
    return subprocess.run(
        ["ssh", "-F", str(testbed.ssh_config), host, "--", *words],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def ssh_local(testbed: SshTestbed, *words: str) -> str:
    """The output of ``words`` on ``vq-local`` (the Slurm host), which must succeed."""
    done = ssh_on(testbed, "vq-local", *words)
    assert done.returncode == 0, done.stderr
    return done.stdout


def sacct_ids(testbed: SshTestbed, name: str) -> list[str]:
    """The ids of the Slurm jobs named ``name`` that accounting saw in the last hour."""
    out = ssh_local(
        testbed,
        "sacct",
        "-X",
        "--noheader",
        "--parsable2",
        f"--name={name}",
        "--starttime=now-1hour",
        "-o",
        "JobID",
    )
    return [line for line in out.splitlines() if line.strip()]


def fresh_remote_dir(testbed: SshTestbed) -> Iterator[str]:
    """A fixture body: a fresh directory on the Slurm host (``vq-local``), removed after."""
    root = f"/tmp/vq-lane-{secrets.token_hex(4)}"
    ssh_local(testbed, "mkdir", "-p", root)
    yield root
    ssh_local(testbed, "rm", "-rf", root)


@pytest.fixture
def scratch(slurm_testbed: SshTestbed) -> Iterator[str]:
    """A fresh directory on the Slurm host (``vq-local``), removed after the test."""
    yield from fresh_remote_dir(slurm_testbed)


def toml_table(header: str, keys: dict[str, Any]) -> str:
    """``[header]`` and one ``key = value`` line per key (values as JSON, valid TOML)."""
    return "".join([f"[{header}]\n", *(f"{key} = {json.dumps(v)}\n" for key, v in keys.items())])


def slurm_lane_keys(testbed: SshTestbed, scratch: str, **extra: Any) -> dict[str, Any]:
    """A Slurm lane on ``vq-local``, partition ``debug``, with :data:`LANE_TIMING`."""
    return {
        "ssh": "vq-local",
        "ssh_options": ["-F", str(testbed.ssh_config)],
        "scheduler_dialect": "slurm",
        "scratch_root": scratch,
        "partition": "debug",
        **LANE_TIMING,
        **extra,
    }


def pack_profile_tables(root: str, host: str = "cluster") -> str:
    """The ``tb`` packing profile on ``[hosts.HOST]``: up to two one-CPU, 128 MiB tasks
    per allocation, its work and logs under ``root``."""
    target = {
        "host": host,
        "partitions": ["debug"],
        "work_root": f"{root}/work",
        "log_root": f"{root}/logs",
        "max_tasks_per_allocation": 2,
        "max_cpus_per_allocation": 2,
        "max_memory_mib_per_allocation": 1024,
        "max_gpus_per_allocation": 0,
        "max_time_limit": "00:05:00",
        "max_allocations_per_submit": 8,
        "max_script_bytes": 65536,
    }
    resources = {
        "cpus_per_task": 1,
        "memory_mib_per_task": 128,
        "gpus_per_task": 0,
        "time_limit": "00:02:00",
    }
    return toml_table("packing.tb.target", target) + toml_table("packing.tb.resources", resources)


def write_config(vq: Vq, *tables: str) -> None:
    """``vq``'s ``config.toml``: the given tables, a blank line apart."""
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("\n".join(tables))


#: The slow-submit fault's sbatch (scripts/testbed/slow_submit.sh), first on every host's PATH.
FAULT_SBATCH = "/opt/vq-testbed/faults/bin/sbatch"


def ensure_slow_submit(testbed: SshTestbed) -> None:
    """The slow-submit fault is the login host's ``sbatch``: an up.sh of an older checkout
    rewrites the hosts' sshd configs without it; this checkout's up.sh (idempotent) puts
    it back."""
    where = ""
    for _attempt in range(3):
        where = ssh_on(testbed, "vq-local", "command", "-v", "sbatch").stdout.strip()
        if where == FAULT_SBATCH:
            return
        run_up(VQ_TESTBED_SLURM="1")
    pytest.fail(f"sbatch on vq-local is {where!r}, not the testbed's slow-submit fault")


def configure_slow_lane(vq: Vq, testbed: SshTestbed, root: str) -> None:
    """A Slurm lane with its scratch in ``root`` and the ``tb`` packing profile's work and
    logs below ``root`` too: a delay set in ``root`` slows both kinds of sbatch."""
    ensure_slow_submit(testbed)
    lane = toml_table("hosts.cluster", slurm_lane_keys(testbed, root))
    write_config(vq, lane, pack_profile_tables(root))


def set_submit_delay(testbed: SshTestbed, root: str, seconds: int | None) -> None:
    """Make every sbatch of a script below ``root`` stall ``seconds`` first (None: no
    more stalls) through the testbed's slow-submit wrapper."""
    delay = shlex.quote(f"{root}/.vq-testbed-submit-delay")
    if seconds is None:
        ssh_local(testbed, f"rm -f -- {delay}")
    else:
        ssh_local(testbed, f"echo {int(seconds)} > {delay}")


def submit_calls(testbed: SshTestbed, root: str) -> list[str]:
    """One line per sbatch call the slow-submit wrapper saw below ``root`` (while a
    delay was set, zero seconds included)."""
    calls = shlex.quote(f"{root}/.vq-testbed-submit-calls")
    out = ssh_local(testbed, f"cat -- {calls} 2>/dev/null || true")
    return [line for line in out.splitlines() if line.strip()]


def cut_ssh(vq: Vq, control_dir: Path) -> int:
    """Kill every ssh process of ``vq``'s daemon, whose ``XDG_RUNTIME_DIR`` is the private
    ``control_dir``: its clients (they carry its environment) and its ControlMaster (ssh
    overwrites a master's environment with its title, which names ``control_dir``). The
    link drops mid-call; a remote command goes on. Returns how many were killed."""
    daemon = vq.daemon_pid()
    ours = set(processes_with_env(f"VQ_STATE_DIR={vq.root}")) - {daemon}
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
            title = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, UnicodeDecodeError):
            continue
        if comm == "ssh" and (int(entry) in ours or str(control_dir) in title):
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed += 1
    return killed


def kill_and_restart(vq: Vq) -> None:
    """SIGKILL ``vq``'s daemon, wait until it is gone, and start it again."""
    pid = vq.daemon_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not is_alive(pid), 20)
    vq.start_daemon()


def submit_packed(vq: Vq, indices: str, *words: str) -> list[str]:
    """``vq submit cluster --array INDICES --pack tb -- WORDS``: the elements' job ids."""
    done = vq.run("submit", "cluster", "--json", "--array", indices, "--pack", "tb", *words)
    return [job["id"] for job in json.loads(done.stdout)["jobs"]]
