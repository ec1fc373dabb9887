"""With no daemon running, the CLI says so instead of leaving the user guessing."""

from __future__ import annotations

import subprocess
import threading

from tests.conftest import VQ_BIN, Vq, wait_until

NO_DAEMON = "no daemon is running: it will start when one does (`vq daemon start`)"


def test_submit_says_the_job_waits_for_a_daemon(vq: Vq) -> None:
    proc = vq.run("submit", "--", "true")
    assert len(proc.stdout.strip()) == 12  # stdout stays the bare id
    assert f"vq: the job is PENDING; {NO_DAEMON}" in proc.stderr
    array = vq.run("submit", "--array", "0-2", "--", "true")
    assert f"the 3 jobs are PENDING; {NO_DAEMON}" in array.stderr
    vq.start_daemon()
    assert vq.run("submit", "--", "true").stderr == ""


def test_wait_timeout_says_pending_no_daemon(vq: Vq) -> None:
    job = vq.submit("--", "true")
    proc = vq.run("wait", job, "--timeout", "1s", check=False)
    assert proc.returncode == 124
    assert f"{job} (pending, no daemon)" in proc.stderr and "still running" not in proc.stderr
    assert "vq daemon start" in proc.stderr
    assert "after 1s:" in proc.stderr
    bare = vq.run("wait", job, "--timeout", "1", check=False)  # bare seconds, shown with a unit
    assert bare.returncode == 124 and "has not ended after 1s:" in bare.stderr


def test_wait_without_timeout_says_it_waits_for_a_daemon(vq: Vq) -> None:
    job = vq.submit("--", "sh", "-c", "exit 4")
    lines: list[str] = []
    with subprocess.Popen(
        [VQ_BIN, "wait", job[:6]], env=vq.env, stderr=subprocess.PIPE, text=True
    ) as waiter:
        assert waiter.stderr is not None
        errors = waiter.stderr
        reader = threading.Thread(target=lambda: lines.extend(iter(errors.readline, "")))
        reader.start()
        try:
            wait_until(lambda: any(f"job {job} is PENDING and {NO_DAEMON}" in x for x in lines))
            assert waiter.poll() is None  # still waiting, not given up
            vq.start_daemon()
            assert waiter.wait(timeout=60) == 4
        finally:
            waiter.kill()
            reader.join(timeout=10)
    assert sum("PENDING" in line for line in lines) == 1  # said once


def test_logs_follow_says_it_waits_for_a_daemon(vq: Vq) -> None:
    job = vq.submit("--", "echo", "finally")
    lines: list[str] = []
    with subprocess.Popen(
        [VQ_BIN, "logs", "-f", job],
        env=vq.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as follower:
        assert follower.stdout is not None and follower.stderr is not None
        errors = follower.stderr
        reader = threading.Thread(target=lambda: lines.extend(iter(errors.readline, "")))
        reader.start()
        try:
            wait_until(lambda: any("is PENDING and no daemon is running" in x for x in lines))
            vq.start_daemon()
            assert follower.wait(timeout=60) == 0
            out = follower.stdout.read()
        finally:
            follower.kill()
            reader.join(timeout=10)
    assert out == "finally\n"
