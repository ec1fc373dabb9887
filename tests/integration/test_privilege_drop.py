"""The ``collector`` privilege drop (§5.2, §7.1) with real OS users and real cgroups.

A root collector (the code the fork server forks) starts a job as ``vqa``: the job reports
exactly vqa's ids and groups, no capabilities, no_new_privs, its own ``vq-job-<id>``
group; 300 MB under a 100 MB limit is OOM-killed by the kernel through that group; and
every failed step (a deleted user, an unusable cgroup root, a planted symlink) exits 125
with ``command_status = not_run`` while the command never runs and the canaries stay
untouched. Needs root, cgroup v1 or v2 with memory/cpu/pids, and scripts/testbed/users.sh.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vq.executors._privdrop import cgroup_parents, job_cgroup_dirs


def _usable() -> bool:
    try:
        pwd.getpwnam("vqa")
        parents = cgroup_parents()
    except (KeyError, OSError):
        return False
    return os.geteuid() == 0 and all(os.access(p, os.W_OK) for p in parents.values())


pytestmark = pytest.mark.skipif(
    not _usable(), reason="needs root, writable cgroups and the testbed users"
)

DRIVER = """
import json, os, sys
from vq.executors._collector import _collector
req = json.loads(sys.argv[1])
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os._exit(_collector(req, (), w))
os.close(w)
os.read(r, 1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


class Job:
    """One job's workspace in a fresh 0755 directory, owned like a user's tree."""

    def __init__(self, base: Path, job_id: str, user: str = "vqa") -> None:
        self.id = job_id
        who = pwd.getpwnam(user)
        self.workspace = base / "jobs" / job_id
        self.meta = self.workspace / "_vq"
        self.meta.mkdir(parents=True)
        os.chown(self.workspace, who.pw_uid, who.pw_gid)
        (base / "workdirs").mkdir(exist_ok=True)
        os.chown(base / "workdirs", who.pw_uid, who.pw_gid)
        self.workdir = base / "workdirs" / job_id
        self.uid = who.pw_uid

    def request(self, command: str, **drop: Any) -> dict[str, Any]:
        return {
            "job_id": self.id,
            "argv": ["/bin/sh", "-c", command],
            "cwd": str(self.workspace),
            "env": {"VQ_JOB_ID": self.id, "PATH": "/evil", "PYTHONPATH": "/evil"},
            "stdout": str(self.workspace / "stdout.log"),
            "stderr": str(self.workspace / "stderr.log"),
            "exit_code_path": str(self.meta / "exit-code"),
            "usage_path": str(self.meta / "resource-usage.json"),
            "drop": {
                "uid": self.uid,
                "cgroup_parents": cgroup_parents(),
                "cpus": 1,
                "workdir": str(self.workdir),
                **drop,
            },
        }

    def run(self, command: str, **drop: Any) -> dict[str, Any]:
        req = self.request(command, **drop)
        collector = subprocess.run(
            [sys.executable, "-c", DRIVER, json.dumps(req)], capture_output=True, timeout=120
        )
        assert collector.returncode == 0, collector.stderr
        receipt: dict[str, Any] = json.loads((self.meta / "resource-usage.json").read_text())
        receipt["marker"] = int((self.meta / "exit-code").read_text())
        spawn_error = self.meta / "spawn-error"
        receipt["spawn_error"] = spawn_error.read_text() if spawn_error.exists() else None
        return receipt

    def out(self) -> str:
        return (self.workspace / "stdout.log").read_text()


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vq-privdrop-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


IDENTITY = (
    "id -u; id -G; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; "
    "grep -E ':(memory|pids):' /proc/self/cgroup; umask; env | sort; touch ledger"
)


def test_the_job_runs_exactly_as_its_submitter(base: Path) -> None:
    job = Job(base, "privdrop0001")
    captured = job.meta / "environment"
    captured.write_text(
        json.dumps({"base": "submitter", "variables": {"FOO": "from-submit", "VQ_JOB_ID": "x"}})
    )
    captured.chmod(0o600)  # private to its owner, as submit writes it; read after the drop
    os.chown(captured, job.uid, -1)
    receipt = job.run(IDENTITY, environment_file=str(captured))
    assert receipt["command_status"] == "exited", receipt["spawn_error"]
    assert receipt["marker"] == 0, receipt
    who = pwd.getpwnam("vqa")
    lines = job.out().splitlines()
    assert lines[0] == str(who.pw_uid)
    assert sorted(map(int, lines[1].split())) == sorted(set(os.getgrouplist("vqa", who.pw_gid)))
    assert "CapEff:\t0000000000000000" in lines and "NoNewPrivs:\t1" in lines
    groups = [line for line in lines if ":memory:" in line or ":pids:" in line]
    assert groups and all(line.endswith("/vq-job-privdrop0001") for line in groups)
    assert "0027" in lines
    assert "VQ_JOB_ID=privdrop0001" in lines and "FOO=from-submit" in lines
    assert f"HOME={who.pw_dir}" in lines and "PATH=/usr/local/bin:/usr/bin:/bin" in lines
    assert not any(line.startswith("PYTHONPATH=") for line in lines)
    for path in (job.workspace / "stdout.log", job.workdir, job.workspace / "ledger"):
        assert path.stat().st_uid == who.pw_uid, path
    assert receipt["cgroup_oom_kills"] == 0
    assert not any(os.path.exists(d) for d in job_cgroup_dirs(cgroup_parents(), job.id).values())


def test_memory_beyond_the_limit_is_oom_killed_through_the_job_group(base: Path) -> None:
    job = Job(base, "privdrop0002")
    hog = "exec /usr/bin/python3 -c 'b = b\"x\" * (300 << 20); print(len(b))'"
    receipt = job.run(hog, mem_mb=100)
    assert receipt["signal"] == 9 and receipt["cgroup_oom_kills"] >= 1, receipt
    assert job.out() == ""


def canary(base: Path) -> tuple[Path, Path]:
    directory = base / "canary-dir"
    directory.mkdir(mode=0o700)
    file = base / "canary-file"
    file.write_text("root's\n")
    file.chmod(0o600)
    return directory, file


@pytest.mark.parametrize(
    "case", ["deleted-user", "cgroup-root", "stdout-symlink", "workdir-symlink"]
)
def test_every_failed_step_fails_closed(base: Path, case: str) -> None:
    job = Job(base, "privdrop0003")
    directory, file = canary(base)
    drop: dict[str, Any] = {}
    if case == "deleted-user":
        drop["uid"] = 3999999
        why = "passwd: no user has uid 3999999"
    elif case == "cgroup-root":
        drop["cgroup_parents"] = {"memory": str(base / "no-cgroup-here")}
        why = "cgroup: "
    elif case == "stdout-symlink":
        (job.workspace / "stdout.log").symlink_to(file)
        why = "logs: "
    else:
        job.workdir.symlink_to(directory)
        why = "workdir: "
    receipt = job.run("touch ledger; echo ran > canary-dir/x", **drop)
    assert receipt["marker"] == 125 and receipt["command_status"] == "not_run", receipt
    assert receipt["spawn_error"] and why in receipt["spawn_error"], receipt["spawn_error"]
    assert not (job.workspace / "ledger").exists()
    assert file.read_text() == "root's\n" and list(directory.iterdir()) == []
    assert file.stat().st_uid == 0 and directory.stat().st_uid == 0
