"""A full disk under the state root: submit refuses cleanly, the daemon keeps running,
dispatch holds, and nothing acknowledged is lost or misclassified once space returns.

The state root is a real 8 MB tmpfs mounted by the test (root only; skipped otherwise),
filled by the test or by a job's own output. Real daemon, real jobs, real CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Vq, processes_with_env, wait_until

TMPFS_SIZE = "8m"


@pytest.fixture
def small_vq(vq: Vq) -> Iterator[Vq]:
    """``vq`` whose state root is a fresh 8 MB tmpfs (unmounted at teardown)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    vq.root.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(vq.root)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield vq
    finally:
        vq.stop_daemon()
        for pid in processes_with_env(f"VQ_STATE_DIR={vq.root}"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not processes_with_env(f"VQ_STATE_DIR={vq.root}"), timeout=10)
        if subprocess.run(["umount", str(vq.root)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(vq.root)], check=True)


def fill(root: Path) -> Path:
    """Write zeros under ``root`` until the filesystem refuses (ENOSPC)."""
    filler = root / "filler.bin"
    with filler.open("wb", buffering=0) as handle:
        for size in (65536, 512):  # big writes, then top up until not a byte more fits
            with contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * size)
    return filler


def daemon_alive(vq: Vq) -> bool:
    return vq.run("daemon", "ping", check=False).returncode == 0


def test_a_submit_on_a_full_disk_is_refused_cleanly_and_the_daemon_keeps_running(
    small_vq: Vq,
) -> None:
    vq = small_vq
    vq.start_daemon()
    filler = fill(vq.root)
    specs_before = sorted(p.name for p in (vq.root / "queue").glob("*.json"))
    refused = vq.run("submit", "--", "true", check=False)
    assert refused.returncode == 14, (refused.returncode, refused.stderr)
    assert refused.stderr.startswith(f"vq: error: no space left on {vq.root}"), refused.stderr
    assert "hint:" in refused.stderr and "Traceback" not in refused.stderr
    assert sorted(p.name for p in (vq.root / "queue").glob("*.json")) == specs_before
    assert daemon_alive(vq)
    filler.unlink()
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")


def test_an_array_the_disk_fills_up_under_is_refused_whole(small_vq: Vq) -> None:
    """The elements' specs are written concurrently; when the disk fills part-way through,
    the submit is refused and none of the array is left: no spec, no workspace."""
    vq = small_vq
    vq.start_daemon()
    vq.run("daemon", "drain")  # nothing starts meanwhile
    filler = fill(vq.root)
    room = vq.root / "room.bin"  # about 32 elements' worth of pages, freed for the submit
    filler.rename(room)
    with room.open("r+b") as handle:
        handle.truncate(max(0, room.stat().st_size - 32 * 3 * 4096))
    workspaces_before = sorted(p.name for p in (vq.root / "jobs").iterdir())
    refused = vq.run("submit", "--array", "1-200", "--", "true", check=False)
    assert refused.returncode == 14, (refused.returncode, refused.stderr)
    assert refused.stderr.startswith(f"vq: error: no space left on {vq.root}"), refused.stderr
    assert "Traceback" not in refused.stderr
    assert list((vq.root / "queue").glob("*.json")) == []
    assert sorted(p.name for p in (vq.root / "jobs").iterdir()) == workspaces_before
    assert daemon_alive(vq)
    room.unlink()
    jobs = vq.run("submit", "--array", "1-3", "--", "true").stdout.split()
    vq.run("daemon", "undrain")
    for job in jobs:
        vq.wait_state(job, "COMPLETED")


def test_a_job_ending_on_a_full_disk_keeps_its_outcome_until_space_returns(
    small_vq: Vq, tmp_path: Path
) -> None:
    vq = small_vq
    go = tmp_path / "go"  # outside the tmpfs: the test's own signal to the job
    vq.start_daemon()
    job = vq.submit("--", "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; exit 0")
    wait_until(lambda: vq.spec(job)["pid"] is not None)
    payload = f"VQ_JOB_ID={job}"
    wait_until(lambda: processes_with_env(payload))
    filler = fill(vq.root)
    go.touch()
    # The command has exited; its collector cannot write the marker and keeps the code.
    wait_until(lambda: not [p for p in processes_with_env(payload) if _is_payload(p, job)])
    assert vq.state(job) == "RUNNING"  # not classified while the collector can report
    assert daemon_alive(vq)
    filler.unlink()
    vq.wait_state(job, "COMPLETED")
    spec = vq.spec(job)
    assert spec["exit_code"] == 0
    assert (vq.root / "jobs" / job / "_vq" / "exit-code").read_text() == "0\n"


def _is_payload(pid: int, job: str) -> bool:
    """The job's command (not its collector): argv is the job's ``sh -c`` line."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sh\0-c\0")
    except OSError:
        return False


def test_a_job_filling_the_disk_itself_holds_dispatch_and_nothing_is_misclassified(
    small_vq: Vq,
) -> None:
    vq = small_vq
    vq.start_daemon()
    waiting = vq.submit("--not-before", "4s", "--", "true")
    hog = vq.submit("--", "sh", "-c", "cat /dev/zero > fill.bin; exit 3")
    vq.wait_state(hog, "RUNNING")
    # The hog's own output fills the disk; its marker waits in its collector.
    wait_until(lambda: (vq.root / "jobs" / hog / "fill.bin").exists())

    def held() -> dict[str, object] | None:
        answer = vq.json("daemon", "admin-status")
        hold: dict[str, object] | None = answer.get("storage_hold")
        return hold

    hold = wait_until(held, timeout=30)
    assert f"no space left on {vq.root}" in str(hold["message"])
    status = vq.json("status", waiting)
    assert status["state"] == "PENDING"
    assert "dispatch is held: no space left on" in status["pending_reason"]
    doctor = vq.run("doctor", "--json", check=False)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["storage hold"]["status"] == "fail"
    health = vq.run("daemon", "health", "--json", check=False)
    assert health.returncode == 1, health.stdout
    named = {c["name"]: c for c in json.loads(health.stdout)["checks"]}
    assert named["dispatch"]["ok"] is True  # held, and the reason is known
    assert named["dispatch"]["detail"].startswith(f"held: storage: no space left on {vq.root}")
    assert named["state_root"]["ok"] is False
    assert named["state_root"]["detail"].startswith(f"{vq.root} is not writable")
    assert daemon_alive(vq)
    (vq.root / "jobs" / hog / "fill.bin").unlink()
    assert vq.wait_state(hog, "FAILED", "PENDING") == "FAILED"
    assert vq.spec(hog)["exit_code"] == 3  # the real exit code, kept through the full disk
    vq.wait_state(waiting, "COMPLETED")
    wait_until(lambda: held() is None)
    assert vq.run("daemon", "health").returncode == 0


def test_an_api_submit_on_a_full_disk_is_507_with_a_json_error(
    small_vq: Vq, tmp_path: Path
) -> None:
    from tests.web.conftest import start_web, stop_web

    vq = small_vq
    vq.start_daemon()
    web = start_web(vq, tmp_path / "web.log")
    try:
        admin = web.admin()
        filler = fill(vq.root)
        body = {"command": ["true"], "idempotency_key": "disk-full-1"}
        answer = web.http.post("/api/v1/jobs", json=body, headers=admin)
        assert answer.status_code == 507, answer.text
        error = answer.json()["error"]
        assert error["code"] == "no-space" and error["hint"]
        assert error["message"] == "no space left on <state-root>"
        assert "Traceback" not in answer.text and str(vq.root) not in answer.text
        upload = web.http.post(
            "/api/v1/uploads",
            content=_small_tar(),
            headers={**admin, "Content-Type": "application/gzip"},
        )
        assert upload.status_code == 507, upload.text
        assert upload.json()["error"]["code"] == "no-space"
        assert str(vq.root) not in upload.text and "Traceback" not in upload.text
        assert daemon_alive(vq)
        filler.unlink()
        accepted = web.http.post("/api/v1/jobs", json=body, headers=admin)
        assert accepted.status_code == 201, accepted.text
    finally:
        stop_web(web)


def _small_tar() -> bytes:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("a.txt")
        info.size = 4096
        tar.addfile(info, io.BytesIO(b"a" * 4096))
    return buffer.getvalue()


def test_a_terminal_write_the_disk_refuses_is_retried_once_space_returns(
    small_vq: Vq, tmp_path: Path
) -> None:
    """The exit marker lands (jobs/ has room) but the spec write does not: ``queue/`` is
    its own tiny tmpfs, filled. The daemon keeps the outcome and retries it."""
    vq = small_vq
    queue = vq.root / "queue"
    queue.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(queue)], check=True)
    go = tmp_path / "go"
    try:
        vq.start_daemon()
        job = vq.submit("--", "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; exit 0")
        wait_until(lambda: vq.spec(job)["pid"] is not None)
        filler = fill(queue)
        go.touch()
        marker = vq.root / "jobs" / job / "_vq" / "exit-code"
        wait_until(lambda: marker.exists())
        hold = wait_until(lambda: vq.json("daemon", "admin-status").get("storage_hold"))
        assert "no space left on" in hold["message"]
        assert vq.state(job) == "RUNNING" and daemon_alive(vq)
        filler.unlink()
        vq.wait_state(job, "COMPLETED")
        assert vq.spec(job)["exit_code"] == 0
        wait_until(lambda: vq.json("daemon", "admin-status").get("storage_hold") is None)
        after = vq.submit("--", "true")  # dispatch resumed
        vq.wait_state(after, "COMPLETED")
    finally:
        vq.stop_daemon()
        for pid in processes_with_env(f"VQ_STATE_DIR={vq.root}"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if subprocess.run(["umount", str(queue)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(queue)], check=True)


def _one_clear_line(result: subprocess.CompletedProcess[str], root: Path) -> None:
    assert result.returncode == 14, (result.args, result.returncode, result.stderr)
    assert result.stderr.startswith("vq: error: "), result.stderr
    assert f"no space left on {root}" in result.stderr.splitlines()[0], result.stderr
    assert result.stderr.splitlines()[1].startswith("hint: ")
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def test_every_cli_write_without_a_daemon_is_a_clear_error_and_the_daemon_refuses_to_start(
    small_vq: Vq,
) -> None:
    """The CLI's own disk path (no daemon): each verb that writes says "no space left",
    and a daemon started on a full disk refuses in one line instead of dying unexplained."""
    vq = small_vq
    pending = vq.submit("--", "true")  # acknowledged before the disk fills
    filler = fill(vq.root)
    before = sorted(p.name for p in (vq.root / "queue").iterdir())
    for args in (
        ("submit", "--", "true"),
        ("submit", "--idempotency-key", "full-1", "--", "true"),
        ("daemon", "throttle", "--max-jobs", "1", "--for", "1h"),
        ("daemon", "drain"),
        ("kill", pending),
    ):
        _one_clear_line(vq.run(*args, check=False, timeout=60), vq.root)
    started = vq.run("daemon", "start", check=False, timeout=60)
    _one_clear_line(started, vq.root)
    assert "could not start" in started.stderr
    assert not daemon_alive(vq)
    assert sorted(p.name for p in (vq.root / "queue").iterdir()) == before
    assert vq.state(pending) == "PENDING"  # nothing acknowledged was lost or changed
    filler.unlink()
    vq.start_daemon()
    vq.wait_state(pending, "COMPLETED")


def test_a_daemon_control_write_on_a_full_disk_is_that_calls_error(small_vq: Vq) -> None:
    """Through the daemon: the throttle file cannot be written, the call says so, the
    daemon holds dispatch and keeps serving."""
    vq = small_vq
    vq.start_daemon()
    filler = fill(vq.root)
    _one_clear_line(
        vq.run("daemon", "throttle", "--max-jobs", "1", "--for", "1h", check=False), vq.root
    )
    assert daemon_alive(vq)
    hold = wait_until(lambda: vq.json("daemon", "admin-status").get("storage_hold"))
    assert f"no space left on {vq.root}" in hold["message"]
    assert not (vq.root / "throttle.json").exists()
    filler.unlink()
    wait_until(lambda: vq.json("daemon", "admin-status").get("storage_hold") is None)
    vq.run("daemon", "throttle", "--max-jobs", "1", "--for", "1h")
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")
