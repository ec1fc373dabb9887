"""``vq top`` against a real daemon and real jobs: JSON, text, --watch, and no daemon."""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import sys
import termios
from typing import Any

from tests.conftest import VQ_BIN, Vq, wait_until

# Allocate and touch ~50 MB, burn CPU for ~3 s, then idle.
WORKER = (
    "import time\n"
    "x = bytearray(50 * 2**20); x[::4096] = b'x' * len(x[::4096])\n"
    "t = time.time()\n"
    "while time.time() - t < 3: pass\n"
    "time.sleep(120)\n"
)


def _top(vq: Vq) -> dict[str, Any]:
    result: dict[str, Any] = vq.json("top")
    return result


def _has_sample(vq: Vq, job: str) -> bool:
    path = vq.root / "jobs" / job / "_vq" / "samples.jsonl"
    try:
        return b"\n" in path.read_bytes()
    except OSError:
        return False


def _start_two_jobs(vq: Vq) -> tuple[str, str]:
    vq.start_daemon("--max-cpus", "4")  # both fit whatever the host's CPU count
    worker = vq.submit(
        "--mem-mb", "200", "--wall-time", "10m", "--job-name", "worker", "--",
        sys.executable, "-c", WORKER,
    )  # fmt: skip
    sleeper = vq.submit("--", "sleep", "60")
    wait_until(lambda: _has_sample(vq, worker) and _has_sample(vq, sleeper), timeout=30)
    return worker, sleeper


def test_top_json_text_and_no_daemon(vq: Vq) -> None:
    worker, sleeper = _start_two_jobs(vq)

    # The first sample may predate the allocation; a later one (every 5 s) shows it.
    def settled() -> dict[str, Any] | None:
        snap = _top(vq)
        rows = {job["id"]: job for job in snap["jobs"]}
        rss = rows.get(worker, {}).get("rss_mb")
        return snap if rss is not None and rss >= 45 else None

    snap = wait_until(settled, timeout=30, interval=0.5)
    assert snap["daemon"]["running"] is True and isinstance(snap["daemon"]["pid"], int)
    rows = {job["id"]: job for job in snap["jobs"]}
    assert set(rows) == {worker, sleeper}

    work = rows[worker]
    assert work["job_name"] == "worker" and work["state"] == "RUNNING"
    assert work["rss_mb"] > 0
    assert work["mem_limit_mb"] == 200
    assert 20 <= work["mem_percent"] <= 100
    assert work["wall_time_seconds"] == 600
    assert work["wall_percent"] is not None and 0 <= work["wall_percent"] < 50
    assert work["elapsed_seconds"] > 0
    assert work["sample_age_seconds"] is not None and work["sample_age_seconds"] < 30
    assert work["stale"] is False

    sleep = rows[sleeper]
    assert sleep["stale"] is False and sleep["rss_mb"] is not None
    assert sleep["wall_time_seconds"] is None and sleep["wall_percent"] is None

    assert snap["counts"]["RUNNING"] == 2 and snap["counts"]["PENDING"] == 0
    assert snap["capacity"]["cpus"] == {"reserved": 2, "cap": 4}
    assert snap["capacity"]["jobs"]["reserved"] == 2
    assert snap["capacity"]["mem_mb"]["reserved"] >= 200
    assert set(snap) == {
        "generated_at",
        "daemon",
        "capacity_source",
        "counts",
        "capacity",
        "jobs",
        "lanes",
    }
    assert snap["capacity_source"] == "daemon"

    text = vq.run("top").stdout
    assert worker in text and sleeper in text
    assert "daemon: running" in text

    bad = vq.run("top", "--watch", "--json", check=False)
    assert bad.returncode == 2 and "cannot be combined" in bad.stderr

    vq.stop_daemon()
    wait_until(lambda: vq.daemon_pid() is None or not (vq.root / "daemon.sock").exists())
    offline = _top(vq)
    assert offline["daemon"] == {"running": False, "pid": None}
    # the caps the daemon last advertised, said to be that (not "unknown")
    assert offline["capacity_source"] == "last_advertised"
    assert offline["capacity"]["cpus"]["cap"] == 4
    running = {job["id"] for job in offline["jobs"]}
    on_disk = {job for job in (worker, sleeper) if vq.state(job) in ("RUNNING", "SUSPENDED")}
    assert running == on_disk
    for job in offline["jobs"]:  # declared limits show, the default as last advertised
        if job["id"] == worker:
            assert job["mem_limit_mb"] == 200
    offline_text = vq.run("top").stdout
    assert "daemon: not running" in offline_text
    assert "caps as last advertised" in offline_text and "cap unknown" not in offline_text
    (vq.root / "daemon_capacity.json").unlink()
    unknown = _top(vq)
    assert unknown["capacity_source"] is None and unknown["capacity"]["cpus"]["cap"] is None
    assert "caps unknown" in vq.run("top").stdout


def test_top_watch_refreshes_until_interrupted(vq: Vq) -> None:
    worker, sleeper = _start_two_jobs(vq)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen(
        [VQ_BIN, "top", "--watch", "--interval", "0.5"],
        env={**vq.env, "TERM": "xterm-256color"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    output = bytearray()

    def drain() -> None:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                output.extend(os.read(master, 65536))
            except OSError:  # EIO once the child has closed the terminal
                pass

    def frames() -> int:
        drain()
        return output.count(b"daemon: running")

    try:
        wait_until(lambda: frames() >= 3, timeout=30, interval=0)  # 3 frames ≈ 1 s of refresh
        proc.send_signal(signal.SIGINT)
        wait_until(lambda: (drain(), proc.poll() is not None)[1], timeout=15, interval=0)
        drain()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)
    assert proc.returncode == 0, bytes(output).decode(errors="replace")[-2000:]
    assert worker.encode() in output and sleeper.encode() in output
    assert b"interrupted" not in output and b"Traceback" not in output


def test_top_json_without_any_daemon_or_jobs(vq: Vq) -> None:
    snap = _top(vq)
    assert snap["daemon"] == {"running": False, "pid": None}
    assert snap["capacity_source"] is None
    assert snap["jobs"] == [] and set(snap["counts"].values()) == {0}
    json.dumps(snap)
