"""`vq fetch` end to end: real daemon, real jobs, the real CLI (in-process, §4.6)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.conftest import VQ_BIN, Vq
from vq.domain.spec import JobSpec
from vq.paths import StatePaths
from vq.store.specs import SpecStore

SIDECARS = {"_vq/fetch-manifest.json", "_vq/terminal-diagnosis.json"}

#: A job that leaves text, binary, nested, executable, linked and workdir files behind.
WRITER = r"""
import os, random
random.seed(7)
os.makedirs("deep/er/est", exist_ok=True)
open("notes.txt", "w").write("héllo\nworld\n")
open("deep/er/est/blob.bin", "wb").write(bytes(random.randrange(256) for _ in range(70000)))
open("deep/empty.dat", "wb").close()
open("run.sh", "w").write("#!/bin/sh\necho ran\n")
os.chmod("run.sh", 0o755)
os.symlink("notes.txt", "notes-link")
os.symlink("../../notes.txt", "deep/er/up-link")
os.symlink("/etc/passwd", "passwd-link")
os.symlink("/etc", "etc-link")
os.makedirs(os.path.join(os.environ["VQ_WORKDIR"], "scratch"))
open(os.path.join(os.environ["VQ_WORKDIR"], "scratch", "tmp.dat"), "wb").write(b"\0" * 5000)
print("done")
"""


def fetch(vq: Vq, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VQ_BIN, "fetch", *args], env=vq.env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def tree(root: Path) -> dict[str, tuple[str, str]]:
    """rel path → (kind, sha256 or link target) for every entry, never following links."""
    found: dict[str, tuple[str, str]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                found[rel] = ("dir", "")
            else:
                found[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def run_job(vq: Vq, *args: str) -> str:
    job = vq.submit(*args)
    vq.run("wait", job, check=False)
    return job


def sidecar(dest: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((dest / "_vq" / name).read_text())
    return data


def test_round_trip_is_byte_identical_with_sidecars(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    job = run_job(vq, "--job-name", "writer", "--", "python3", "-c", WRITER)
    assert vq.state(job) == "COMPLETED"
    workspace = vq.root / "jobs" / job
    proc = fetch(vq, job, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    dest = tmp_path / f"writer-{job}"  # the default DEST of a named job
    assert result["dest"] == str(dest) and result["source_kind"] == "workspace"

    source, copy = tree(workspace), tree(dest)
    escaping = {"passwd-link", "etc-link"}
    assert {rel for rel in source if rel not in escaping} == set(copy) - SIDECARS
    for rel, (kind, digest) in copy.items():
        if rel not in SIDECARS:
            assert source[rel] == (kind, digest), rel
    assert copy["notes-link"] == ("link", "notes.txt")
    assert copy["deep/er/up-link"] == ("link", "../../notes.txt")
    assert not os.path.lexists(dest / "passwd-link") and not os.path.lexists(dest / "etc-link")
    assert os.stat(dest / "run.sh").st_mode & 0o777 == 0o755
    assert (dest / "notes.txt").stat().st_mtime == (workspace / "notes.txt").stat().st_mtime
    assert result["files"] == sum(1 for kind, _ in source.values() if kind == "file")

    manifest = sidecar(dest, "fetch-manifest.json")
    assert manifest["schema"] == "vq.fetch-manifest.v1" and manifest["job_id"] == job
    assert manifest["source_kind"] == "workspace" and manifest["source_path"] == str(workspace)
    assert manifest["transport"] == "local" and manifest["source_host"] == os.uname().nodename
    assert manifest["stale"] is False and manifest["refresh_error"] is None
    assert manifest["fetched_at"] == manifest["refresh_attempted_at"]
    assert {item["path"] for item in manifest["skipped"]} == escaping
    diagnosis = sidecar(dest, "terminal-diagnosis.json")
    assert diagnosis["schema"] == "vq.terminal-diagnosis.v1" and diagnosis["job_id"] == job
    assert diagnosis["state"] == "COMPLETED" and diagnosis["exit_code"] == 0
    assert diagnosis["diagnosis"]["category"] == "completed"
    assert diagnosis["started_at"] and diagnosis["finished_at"]
    assert vq.spec(job)["last_fetched_at"] is not None
    assert result["last_fetched_at"] is not None


def test_failed_and_signalled_jobs_are_diagnosed(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    failed = run_job(vq, "--", "sh", "-c", "echo 'SCF did not converge' >&2; exit 3")
    signalled = run_job(vq, "--", "sh", "-c", "kill -SEGV $$")
    for job, category in ((failed, "nonzero_exit"), (signalled, "signal")):
        assert fetch(vq, job, str(tmp_path / job)).returncode == 0
        document = sidecar(tmp_path / job, "terminal-diagnosis.json")
        assert document["state"] == "FAILED"
        assert document["diagnosis"]["category"] == category
    failed_doc = sidecar(tmp_path / failed, "terminal-diagnosis.json")
    assert failed_doc["exit_code"] == 3 and failed_doc["failure_tail"] == "SCF did not converge"
    assert failed_doc["diagnosis"]["hint"] == "SCF did not converge"
    signal_doc = sidecar(tmp_path / signalled, "terminal-diagnosis.json")
    assert signal_doc["exit_code"] == 139 and signal_doc["diagnosis"]["signal"] == "SIGSEGV"


def test_workdir_and_single_file_fetches(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    job = run_job(vq, "--", "python3", "-c", WRITER)
    workdir = vq.root / "workdirs" / job
    proc = fetch(vq, job, str(tmp_path / "wd"), "--workdir", "--json")
    assert proc.returncode == 0, proc.stderr
    copy = tree(tmp_path / "wd")
    assert set(copy) - SIDECARS == {"scratch", "scratch/tmp.dat", "_vq"}
    assert copy["scratch/tmp.dat"] == tree(workdir)["scratch/tmp.dat"]
    assert sidecar(tmp_path / "wd", "fetch-manifest.json")["source_kind"] == "workdir"
    assert vq.spec(job)["last_fetched_at"] is None  # only workspace fetches are recorded

    into = tmp_path / "files"
    into.mkdir()
    proc = fetch(vq, job, "--name", "deep/er/est/blob.bin", str(into))
    assert proc.returncode == 0, proc.stderr
    blob = vq.root / "jobs" / job / "deep/er/est/blob.bin"
    assert (into / "blob.bin").read_bytes() == blob.read_bytes()
    assert sorted(os.listdir(into)) == ["blob.bin"]  # no sidecars for an artifact fetch
    assert fetch(vq, job, "--name", "notes.txt", str(into / "renamed.txt")).returncode == 0
    assert (into / "renamed.txt").read_text() == "héllo\nworld\n"
    assert fetch(vq, job, "--name", "scratch/tmp.dat", "--workdir", str(into)).returncode == 0
    assert (into / "tmp.dat").read_bytes() == b"\0" * 5000
    assert vq.spec(job)["last_fetched_at"] is None

    refusals = {
        "../x": 4,  # traversal
        "deep/../notes.txt": 4,
        "/etc/passwd": 4,  # absolute
        "passwd-link": 4,  # a symlink
        "etc-link/passwd": 4,  # through a symlink
        "deep": 4,  # not a regular file
        "missing.txt": 3,
    }
    for name, code in refusals.items():
        proc = fetch(vq, job, "--name", name, str(into))
        assert proc.returncode == code, (name, proc.stderr)
        assert proc.stderr.startswith("vq: error: ") and "Traceback" not in proc.stderr
    assert sorted(os.listdir(into)) == ["blob.bin", "renamed.txt", "tmp.dat"]


def test_refetch_replaces_and_a_failed_refresh_marks_stale(vq: Vq, tmp_path: Path) -> None:
    vq.start_daemon()
    job = run_job(vq, "--", "sh", "-c", "echo one > a.txt; echo two > b.txt")
    dest = tmp_path / "snap"
    assert fetch(vq, job, str(dest)).returncode == 0
    first = sidecar(dest, "fetch-manifest.json")
    workspace = vq.root / "jobs" / job
    (workspace / "b.txt").unlink()
    (workspace / "c.txt").write_text("three\n")
    proc = fetch(vq, job, str(dest), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["replaced"] is True
    assert not (dest / "b.txt").exists() and (dest / "c.txt").read_text() == "three\n"
    second = sidecar(dest, "fetch-manifest.json")
    assert second["fetched_at"] > first["fetched_at"] and second["stale"] is False
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no temp left

    # A DEST that is not a fetch of this job is refused and left alone.
    other = tmp_path / "other"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    proc = fetch(vq, job, str(other))
    assert proc.returncode == 6 and "not a fetch of job" in proc.stderr
    assert os.listdir(other) == ["mine.txt"]

    # The workspace goes away (archived): the refresh fails and stamps the old snapshot.
    store = SpecStore(StatePaths(vq.root))
    store.update(job, lambda spec: _aged(spec))
    vq.run("cleanup", "--archive", "--execute", "--older-than", "1d")
    assert not workspace.exists()
    proc = fetch(vq, job, str(dest))
    assert proc.returncode == 3
    assert "archived to" in proc.stderr and "marked stale" in proc.stderr
    stale = sidecar(dest, "fetch-manifest.json")
    assert stale["stale"] is True and "archived to" in stale["refresh_error"]
    assert stale["fetched_at"] == second["fetched_at"]
    assert stale["refresh_attempted_at"] > second["fetched_at"]
    assert (dest / "c.txt").read_text() == "three\n"  # the snapshot itself is kept


def _aged(spec: JobSpec) -> JobSpec:
    spec.finished_at = datetime.now(UTC) - timedelta(days=3)
    return spec


def test_snapshot_of_a_pending_job_without_daemon(vq: Vq, tmp_path: Path) -> None:
    job = vq.submit("--job-name", "later", "--", "true")
    assert vq.state(job) == "PENDING"
    proc = fetch(vq, job, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    dest = tmp_path / f"later-{job}"
    diagnosis = sidecar(dest, "terminal-diagnosis.json")
    assert diagnosis["state"] == "PENDING" and diagnosis["diagnosis"]["category"] == "pending"
    assert vq.spec(job)["last_fetched_at"] is None  # not terminal: nothing recorded
    assert fetch(vq, job, "--workdir", str(tmp_path / "wd")).returncode == 3  # not dispatched
    assert fetch(vq, "0123456789ab").returncode == 3
    assert fetch(vq, "not-an-id").returncode == 4
    inside = fetch(vq, job, str(vq.root / "jobs" / job / "copy"))
    assert inside.returncode == 4 and "inside the workspace" in inside.stderr
    assert stat.S_ISDIR(os.lstat(dest / "_vq").st_mode)


def _fetch_killed_after_copy(vq: Vq, job: str, dest: Path) -> None:
    """`vq fetch JOB DEST` SIGKILLed once its staging copy is complete."""
    killed = subprocess.run(
        [VQ_BIN, "fetch", job, str(dest)],
        env={**vq.env, "VQ_TEST_FAULT": "fetch_after_copy"},
        capture_output=True,
        timeout=120,
    )
    assert killed.returncode == -9


def test_a_killed_fetch_leaves_staging_that_the_next_fetch_sweeps_once_stale(
    vq: Vq, tmp_path: Path
) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sh", "-c", "echo hi > out.txt")
    vq.wait_state(job, "COMPLETED")
    dest = tmp_path / "snap"
    _fetch_killed_after_copy(vq, job, dest)
    staging = [p for p in tmp_path.iterdir() if p.name.startswith(".snap.vq-fetch-")]
    assert len(staging) == 1 and not dest.exists()
    vq.run("fetch", job, str(tmp_path / "other"))  # another DEST: not its business
    assert staging[0].exists()
    vq.run("fetch", job, str(dest))  # fresh staging may belong to a running fetch
    assert staging[0].exists() and (dest / "out.txt").read_text() == "hi\n"
    old = staging[0].stat().st_mtime - 7200
    os.utime(staging[0], (old, old))
    vq.run("fetch", job, str(dest))
    assert not staging[0].exists()


def test_doctor_finds_a_killed_fetchs_staging_wherever_dest_is_and_cleanup_removes_it(
    vq: Vq, tmp_path: Path
) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sh", "-c", "echo hi > out.txt")
    vq.wait_state(job, "COMPLETED")
    elsewhere = tmp_path / "far" / "away"
    dest = elsewhere / "snap"
    _fetch_killed_after_copy(vq, job, dest)
    staging = [p for p in elsewhere.iterdir() if p.name.startswith(".snap.vq-fetch-")]
    assert len(staging) == 1
    # A fetch that finished leaves no record behind; the killed one's record remains.
    vq.run("fetch", job, str(tmp_path / "done"))
    assert len(list((vq.root / "fetches").glob("*.json"))) == 1

    doctor = json.loads(vq.run("doctor", "--json", check=False).stdout)
    leftovers = next(c for c in doctor["checks"] if c["name"] == "leftovers")
    assert leftovers["status"] == "warn" and "fetch-staging" in leftovers["message"]

    dry = vq.run("cleanup", check=False)
    assert staging[0].exists()  # a dry run changes nothing
    vq.run("cleanup", "--execute")
    assert not staging[0].exists()  # fresh, but its fetch is provably gone
    assert list((vq.root / "fetches").glob("*.json")) == []
    doctor = json.loads(vq.run("doctor", "--json", check=False).stdout)
    leftovers = next(c for c in doctor["checks"] if c["name"] == "leftovers")
    assert leftovers["status"] == "ok", (leftovers, dry.stdout)
