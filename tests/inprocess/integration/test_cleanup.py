"""`vq cleanup` end to end: real daemon, real jobs, the real CLI (§2.4, §5.3).

Jobs are made "old" by moving ``finished_at`` back through the store, never by sleeping.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tarfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.conftest import Vq, wait_until
from vq.domain.spec import JobSpec, utcnow
from vq.paths import StatePaths
from vq.store.specs import SpecStore


def age(vq: Vq, job_id: str, days: float) -> None:
    """Pretend the job finished ``days`` ago (a PENDING/RUNNING spec gets one too)."""

    def mutate(spec: JobSpec) -> JobSpec:
        spec.finished_at = utcnow() - timedelta(days=days)
        return spec

    SpecStore(StatePaths(vq.root)).update(job_id, mutate)


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every path under ``root`` with its mode and content hash (links by target)."""
    found: dict[str, tuple[int, str]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory, name)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                digest = os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                digest = ""
            found[str(path.relative_to(root))] = (info.st_mode, digest)
    return found


def cleanup(vq: Vq, *args: str) -> dict[str, Any]:
    data: dict[str, Any] = vq.json("cleanup", *args)
    return data


def test_dry_run_changes_nothing_and_execute_archives_exactly_the_selection(vq: Vq) -> None:
    vq.start_daemon()
    running = vq.submit("--", "sleep", "60")
    pending = vq.submit("--not-before", "1h", "--", "true")
    old_ok = vq.submit("--job-name", "old", "--", "sh", "-c", "echo kept > result.txt")
    old_failed = vq.submit("--", "sh", "-c", "echo x > $VQ_WORKDIR/w.txt; exit 2")
    young = vq.submit("--", "true")
    for job in (old_ok, old_failed, young):
        vq.run("wait", job, check=False)
    vq.wait_state(running, "RUNNING")
    for job in (running, pending, old_ok, old_failed):
        age(vq, job, days=30)  # even the live jobs look old: state must still protect them
    age(vq, young, days=2)
    vq.stop_daemon()  # nothing else writes the state tree now; the sleep job lives on

    before = snapshot(vq.root)
    human = vq.run("cleanup", "--archive")
    assert "dry run" in human.stdout and old_ok in human.stdout
    listed = cleanup(vq, "--archive")
    assert listed["dry_run"] is True
    assert [row["id"] for row in listed["jobs"]] == [old_ok, old_failed]
    assert cleanup(vq, "--archive", "--older-than", "1d")["jobs"][-1]["id"] == young
    assert [r["id"] for r in cleanup(vq, "--archive", "--state", "failed")["jobs"]] == [old_failed]
    assert snapshot(vq.root) == before  # no file, lock or directory was created

    assert vq.run("cleanup", "--state", "running", check=False).returncode == 4
    assert vq.run("cleanup", "--older-than", "soon", check=False).returncode == 4

    done = cleanup(vq, "--archive", "--state", "COMPLETED", "--execute")
    assert done["dry_run"] is False
    assert [(row["id"], row["done"], row["error"]) for row in done["jobs"]] == [
        (old_ok, True, None)
    ]
    archive = vq.root / "archive" / f"old-{old_ok}.tar.bz2"
    assert done["jobs"][0]["archive_path"] == str(archive) and archive.is_file()
    assert not (vq.root / "jobs" / old_ok).exists()
    for job in (running, pending, old_failed, young):
        assert (vq.root / "jobs" / job).is_dir(), job
        assert vq.spec(job)["archived_at"] is None
    assert vq.state(running) == "RUNNING" and vq.state(pending) == "PENDING"
    assert (vq.root / "workdirs" / old_failed / "w.txt").exists()

    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        spec = json.loads(tar.extractfile("spec.json").read())  # type: ignore[union-attr]
        result = tar.extractfile("workspace/result.txt").read()  # type: ignore[union-attr]
    assert {"spec.json", "workspace/result.txt", "workspace/stdout.log"} <= names
    assert spec["id"] == old_ok and result == b"kept\n"

    view = vq.status(old_ok)
    assert view["archive_path"] == str(archive) and view["archived_at"]
    assert vq.run("status", old_ok).returncode == 0
    assert cleanup(vq, "--archive", "--state", "completed", "--execute")["jobs"] == []


def test_archive_dir_override_workdir_and_links(vq: Vq, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("do not touch")
    vq.env["VQ_ARCHIVE_DIR"] = str(tmp_path / "vault")
    vq.start_daemon()
    script = (
        f"ln -s {outside} out-dir; ln -s {outside}/precious.txt out-file; "
        "mkdir -p $VQ_WORKDIR/ro/sub; echo w > $VQ_WORKDIR/ro/sub/f; chmod 555 $VQ_WORKDIR/ro; "
        "ln -s /etc $VQ_WORKDIR/etc"
    )
    job = vq.submit("--", "sh", "-c", script)
    vq.run("wait", job)
    age(vq, job, days=20)
    done = cleanup(vq, "--archive", "--execute")
    assert [(row["id"], row["done"]) for row in done["jobs"]] == [(job, True)], done
    archive = tmp_path / "vault" / f"{job}.tar.bz2"
    assert done["jobs"][0]["archive_path"] == str(archive)
    with tarfile.open(archive) as tar:
        members = {member.name: member for member in tar.getmembers()}
    assert members["workspace/out-dir"].issym()
    assert members["workspace/out-dir"].linkname == str(outside)
    assert members["workspace/out-file"].issym()
    assert "workspace/out-dir/precious.txt" not in members
    assert members["workdir/ro/sub/f"].isfile() and members["workdir/etc"].issym()
    assert not (vq.root / "jobs" / job).exists() and not (vq.root / "workdirs" / job).exists()
    assert (outside / "precious.txt").read_text() == "do not touch"
    assert not (vq.root / "archive").exists()  # VQ_ARCHIVE_DIR moved it


def test_sweep_removes_only_the_workdir(vq: Vq, tmp_path: Path) -> None:
    outside = tmp_path / "keep.txt"
    outside.write_text("keep")
    vq.start_daemon()
    job = vq.submit("--", "sh", "-c", f"echo x > $VQ_WORKDIR/x; ln -s {outside} $VQ_WORKDIR/l")
    bare = vq.submit("--", "true")
    for each in (job, bare):
        vq.run("wait", each)
        age(vq, each, days=15)
    (vq.root / "workdirs" / bare).rmdir()  # nothing to sweep: not a candidate
    dry = vq.run("cleanup")
    assert job in dry.stdout and "nothing changed" in dry.stdout
    assert (vq.root / "workdirs" / job / "x").exists()
    done = cleanup(vq, "--execute")
    assert [(r["id"], r["action"], r["done"]) for r in done["jobs"]] == [
        (job, "sweep-workdir", True)
    ]
    assert not (vq.root / "workdirs" / job).exists()
    assert (vq.root / "jobs" / job / "stdout.log").exists()
    assert outside.read_text() == "keep"
    spec = vq.spec(job)
    assert spec["workdir_swept_at"] and spec["archived_at"] is None
    assert cleanup(vq, "--execute")["jobs"] == []
    refused = vq.run("fetch", job, str(tmp_path / "wd"), "--workdir", check=False)
    assert refused.returncode == 3 and "swept" in refused.stderr


def test_a_workspace_in_use_by_a_live_job_is_not_archived(vq: Vq) -> None:
    vq.start_daemon()
    first = vq.submit("--", "sh", "-c", "echo restart > restart.chk")
    vq.run("wait", first)
    workspace = vq.root / "jobs" / first
    follower = vq.submit("--cwd", str(workspace), "--not-before", "1h", "--", "cat", "restart.chk")
    age(vq, first, days=30)
    report = vq.run("cleanup", "--archive", "--execute", "--json", check=False)
    assert report.returncode == 1
    row = json.loads(report.stdout)["jobs"][0]
    assert row["id"] == first and row["done"] is False
    assert f"PENDING job {follower}" in row["error"]
    assert workspace.is_dir() and vq.spec(first)["archived_at"] is None
    vq.run("kill", follower)
    wait_until(lambda: vq.state(follower) == "KILLED")
    assert cleanup(vq, "--archive", "--execute")["jobs"][0]["done"] is True


def _killed(vq: Vq, fault: str, *args: str) -> None:
    """Run `vq ARGS` with the fault point ``fault`` armed; it must die of SIGKILL there."""
    import subprocess

    from tests.conftest import VQ_BIN

    result = subprocess.run(
        [VQ_BIN, *args],
        env={**vq.env, "VQ_TEST_FAULT": fault},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == -9, (result.returncode, result.stderr)


def _make_old(vq: Vq, tmp: Path) -> str:
    job = vq.submit("--job-name", "old", "--", "sh", "-c", "echo kept > result.txt; exit 2")
    vq.wait_state(job, "FAILED")
    age(vq, job, 30)
    return job


def _backdate(path: Path, seconds: float) -> None:
    moment = path.stat().st_mtime - seconds
    os.utime(path, (moment, moment))


def test_kill_9_after_the_record_is_finished_by_the_next_cleanup(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    job = _make_old(vq, tmp_path)
    _killed(vq, "archive_after_record", "cleanup", "--archive", "--execute")
    spec = vq.spec(job)
    assert spec["archived_at"] and Path(spec["archive_path"]).is_file()
    assert (vq.root / "jobs" / job).exists()  # the crash left the workspace behind
    doctor = vq.json("doctor")
    leftovers = next(c for c in doctor["checks"] if c["name"] == "leftovers")
    assert leftovers["status"] == "warn" and job in leftovers["message"]
    report = cleanup(vq, "--archive", "--execute")
    assert {r["action"] for r in report["recovered"]} == {"removed"}
    assert str(vq.root / "jobs" / job) in {r["path"] for r in report["recovered"]}
    assert not (vq.root / "jobs" / job).exists()
    with tarfile.open(spec["archive_path"]) as tar:
        assert "workspace/result.txt" in tar.getnames()
    again = next(c for c in vq.json("doctor")["checks"] if c["name"] == "leftovers")
    assert again["status"] == "ok"


def test_kill_9_while_writing_leaves_a_temp_file_swept_only_once_stale(
    vq: Vq, tmp_path: Path
) -> None:
    vq.start_daemon()
    job = _make_old(vq, tmp_path)
    _killed(vq, "archive_while_writing", "cleanup", "--archive", "--execute")
    archive_dir = vq.root / "archive"
    temps = [p for p in archive_dir.iterdir() if p.name.endswith(".tmp")]
    assert len(temps) == 1 and temps[0].name.startswith(".old-")
    assert vq.spec(job)["archived_at"] is None and (vq.root / "jobs" / job).exists()
    fresh = cleanup(vq, "--archive", "--execute")  # a fresh temp may be someone's work
    assert temps[0].exists() and fresh["recovered"] == []
    assert fresh["jobs"][0]["done"]  # the job itself is archived anew
    _backdate(temps[0], 2 * 3600)
    stale = cleanup(vq, "--archive", "--execute")
    assert [(r["kind"], r["action"]) for r in stale["recovered"]] == [("temp-file", "removed")]
    assert not temps[0].exists()
    assert sorted(p.name for p in archive_dir.iterdir()) == [f"old-{job}.tar.bz2"]


def test_the_daemon_start_finishes_an_archive_a_killed_cleanup_left(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    job = _make_old(vq, tmp_path)
    _killed(vq, "archive_after_record", "cleanup", "--archive", "--execute")
    assert (vq.root / "jobs" / job).exists()  # the crash left the workspace behind
    vq.stop_daemon()
    vq.start_daemon()
    wait_until(lambda: not (vq.root / "jobs" / job).exists())
    assert Path(vq.spec(job)["archive_path"]).is_file()
    log = (vq.root / "daemon.log").read_text()
    assert f"leftover archived-workspace {vq.root / 'jobs' / job}: removed" in log
