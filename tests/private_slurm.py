"""A private Slurm 22.05 cluster with a login host of its own, for tests and benchmarks
that need a node the shared testbed does not have (8 CPUs, fake GPUs).

:func:`private_cluster` starts, beside the shared testbed and without touching it:

- its own ``slurmctld`` and ``slurmd`` (free ports, state and spool in a private
  directory, ``proctrack/linuxproc``), one node of ``cpus`` CPUs and ``memory_mib`` MiB
  (``config_overrides``: the machine may have fewer) and ``gpus`` fake GPUs
  (``scripts/testbed/lib.sh``'s ``fake_gpu_devices`` and ``gres_conf``, as
  ``VQ_TESTBED_SLURM_GPUS`` writes them);
- accounting in the testbed's ``slurmdbd`` under a cluster name of its own
  (:data:`CLUSTER`, registered once with ``sacctmgr``): ``sacct`` works and sees only
  this cluster's jobs, while the testbed's cluster ``vqtest`` never sees them;
- its own ``sshd`` on a free port of 127.0.0.1 whose sessions carry ``SLURM_CONF``: the
  testbed's user ``vqtest`` logs in with the testbed's client key as host
  :data:`HOST` of :attr:`PrivateCluster.ssh_config`, so vq reaches this cluster exactly
  as it reaches the testbed's.

Everything it started is stopped and its directory removed on exit. Needs root and the
testbed's Slurm (``VQ_TESTBED_SLURM=1 scripts/testbed/up.sh``); raises
:class:`ClusterUnavailable` otherwise.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLUSTER", "HOST", "ClusterUnavailable", "PrivateCluster", "private_cluster"]

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "scripts" / "testbed" / "lib.sh"
TB = Path(os.environ.get("VQ_TESTBED_DIR", "/var/lib/vq-testbed"))
#: The accounting cluster name of every private cluster (one registration in slurmdbd).
CLUSTER = "vqprivate"
#: The login host's name in :attr:`PrivateCluster.ssh_config`.
HOST = "vq-private"
NODE = "vqprivnode"
PARTITION = "pack"


class ClusterUnavailable(RuntimeError):
    """The private cluster cannot be started here (no root, no Slurm, no testbed)."""


@dataclass(frozen=True)
class PrivateCluster:
    root: Path
    conf: Path
    ssh_config: Path
    cpus: int
    gpus: int
    host: str = HOST
    node: str = NODE
    partition: str = PARTITION

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm commands run here as root."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def ssh(self, *words: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """One command on the login host, as the testbed's user."""
        return subprocess.run(
            ["ssh", "-F", str(self.ssh_config), self.host, "--", *words],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _slurm_conf(root: Path, ctld: int, slurmd: int, cpus: int, gpus: int, memory_mib: int) -> str:
    gres = f" Gres=gpu:{gpus}" if gpus else ""
    return "\n".join(
        [
            f"ClusterName={CLUSTER}",
            # a fresh state starts job ids anew; accounting keeps every run's jobs, so
            # each run starts elsewhere and a job id names one job
            f"FirstJobId={secrets.randbelow(60_000_000) + 1_000_000}",
            f"SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)",
            "SlurmUser=root",
            f"SlurmctldPort={ctld}",
            f"SlurmdPort={slurmd}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"StateSaveLocation={root}/state",
            f"SlurmdSpoolDir={root}/spool",
            f"SlurmctldPidFile={root}/slurmctld.pid",
            f"SlurmdPidFile={root}/slurmd.pid",
            f"SlurmctldLogFile={root}/slurmctld.log",
            f"SlurmdLogFile={root}/slurmd.log",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "DefMemPerCPU=256",
            "ReturnToService=2",
            "InactiveLimit=0",
            "KillWait=5",
            "MinJobAge=300",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=2",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=localhost",
            "AccountingStoragePort=6819",
            "JobCompType=jobcomp/none",
            "MailProg=/bin/true",
            "SlurmdParameters=config_overrides",
            *(["GresTypes=gpu"] if gpus else []),
            f"NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} Boards=1 SocketsPerBoard=1 "
            f"CoresPerSocket={cpus} ThreadsPerCore=1 RealMemory={memory_mib}{gres} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _sshd_conf(root: Path, port: int, conf: Path) -> str:
    path = "/opt/vq-testbed/venv/bin:/usr/local/bin:/usr/bin:/bin"
    return "\n".join(
        [
            "ListenAddress 127.0.0.1",
            f"Port {port}",
            f"HostKey {root}/ssh/host_ed25519",
            f"PidFile {root}/sshd.pid",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin no",
            "AuthorizedKeysFile .ssh/authorized_keys",
            "UsePAM no",
            "UseDNS no",
            "MaxStartups 100:30:200",
            "MaxSessions 50",
            "X11Forwarding no",
            "PrintMotd no",
            f"SetEnv PATH={path} SLURM_CONF={conf}",
            "",
        ]
    )


def _client_conf(root: Path, port: int) -> str:
    return "\n".join(
        [
            f"Host {HOST}",
            "  HostName 127.0.0.1",
            f"  Port {port}",
            f"  User {_testbed_user()}",
            f"  IdentityFile {TB}/ssh/client_ed25519",
            "  IdentitiesOnly yes",
            "  StrictHostKeyChecking yes",
            f"  UserKnownHostsFile {root}/ssh/known_hosts",
            "  GlobalKnownHostsFile /dev/null",
            "  BatchMode yes",
            "  ConnectTimeout 5",
            "",
        ]
    )


def _testbed_user() -> str:
    for line in (TB / "env.sh").read_text().splitlines():
        if line.startswith("export VQ_TESTBED_USER="):
            return line.split("=", 1)[1].strip('"')
    raise ClusterUnavailable(f"{TB}/env.sh names no VQ_TESTBED_USER")


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)


def _wait(what: str, probe: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise ClusterUnavailable(f"{what} did not come up within {timeout:.0f} s")
        time.sleep(0.3)


def _register_accounting() -> None:
    """The cluster name in the testbed's slurmdbd (once; an existing one is kept)."""
    shown = _run(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"])
    if shown.returncode != 0:
        raise ClusterUnavailable(f"the testbed's slurmdbd does not answer: {shown.stderr}")
    if CLUSTER not in shown.stdout.split():
        added = _run(["sacctmgr", "-i", "add", "cluster", CLUSTER])
        if added.returncode != 0:
            raise ClusterUnavailable(f"sacctmgr add cluster {CLUSTER}: {added.stderr}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def private_cluster(
    *, cpus: int = 8, gpus: int = 0, memory_mib: int = 4096
) -> Iterator[PrivateCluster]:
    """Start the private cluster (module docstring); stop it and remove it on exit.

    The node advertises ``cpus`` CPUs and ``memory_mib`` MiB whatever the machine has
    (``config_overrides``): a benchmark of tasks that use neither can size the node so
    its capacity is not what it measures.
    """
    if os.geteuid() != 0:
        raise ClusterUnavailable("a private slurmd and sshd need root")
    for daemon in ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/sshd"):
        if not Path(daemon).exists():
            raise ClusterUnavailable(f"{daemon} is not installed")
    if not (TB / "ssh" / "client_ed25519").exists():
        raise ClusterUnavailable("the SSH testbed is not up (scripts/testbed/up.sh)")
    _register_accounting()
    root = Path(tempfile.mkdtemp(prefix="vq-private-slurm-", dir="/tmp"))
    root.chmod(0o755)  # the login user reads slurm.conf
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        for name in ("state", "spool", "ssh"):
            (root / name).mkdir()
        ctld, slurmd, sshd = _free_ports(3)
        conf = root / "slurm.conf"
        conf.write_text(_slurm_conf(root, ctld, slurmd, cpus, gpus, memory_mib))
        if gpus:
            gres = _run(
                [
                    "bash",
                    "-c",
                    '. "$1" && fake_gpu_devices "$2/dev" "$3" && gres_conf "$4" "$2/dev" "$3"',
                    "bash",
                    str(LIB),
                    str(root),
                    str(gpus),
                    NODE,
                ]
            )
            if gres.returncode != 0:
                raise ClusterUnavailable(f"fake GPUs: {gres.stderr}")
            (root / "gres.conf").write_text(gres.stdout)
        for path in root.glob("*.conf"):
            path.chmod(0o644)
        key = root / "ssh" / "host_ed25519"
        made = _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)])
        if made.returncode != 0:
            raise ClusterUnavailable(f"ssh-keygen: {made.stderr}")
        public = (root / "ssh" / "host_ed25519.pub").read_text().split()[:2]
        (root / "ssh" / "known_hosts").write_text(f"[127.0.0.1]:{sshd} {' '.join(public)}\n")
        (root / "ssh" / "sshd_config").write_text(_sshd_conf(root, sshd, conf))
        cluster = PrivateCluster(root, conf, root / "ssh" / "config", cpus, gpus)
        cluster.ssh_config.write_text(_client_conf(root, sshd))
        env = cluster.env
        for argv in (
            ["/usr/sbin/slurmctld", "-D", "-f", str(conf)],
            ["/usr/sbin/slurmd", "-D", "-N", NODE, "-f", str(conf)],
            ["/usr/sbin/sshd", "-D", "-f", str(root / "ssh" / "sshd_config")],
        ):
            with open(root / f"{Path(argv[0]).name}.out", "wb") as log:  # the child keeps it
                daemons.append(
                    subprocess.Popen(
                        argv,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=log,
                        start_new_session=True,
                    )
                )

        def node_idle() -> bool:
            done = _run(["sinfo", "--noheader", f"--nodes={NODE}", "--format=%T"], env)
            return done.returncode == 0 and done.stdout.strip() == "idle"

        _wait("the private slurmd", node_idle, 60)
        _wait("the private sshd", lambda: cluster.ssh("true", timeout=10).returncode == 0, 20)
        yield cluster
    finally:
        if daemons:  # nothing of this cluster outlives it
            env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
            jobs = _run(["squeue", "--noheader", "--format=%i"], env).stdout.split()
            if jobs:
                _run(["scancel", *jobs], env)
        for proc in reversed(daemons):
            _stop(proc)
        shutil.rmtree(root, ignore_errors=True)
