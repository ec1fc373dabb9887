"""Supervision with real processes: watchdog limits, pause/resume, collector death."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import Vq, processes_with_env, wait_until

HOG = "import time; x = bytearray({mb} * 2**20); x[::4096] = b'x' * len(x[::4096]); time.sleep(120)"


def _config(vq: Vq, text: str) -> None:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(text)


def _events(vq: Vq, job: str) -> list[dict[str, object]]:
    path = vq.root / "jobs" / job / "_vq" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_memory_hog_is_oom_killed_with_evidence(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--mem-mb", "100", "--", sys.executable, "-c", HOG.format(mb=400))
    vq.wait_state(job, "OOM_KILLED", timeout=30)
    spec = vq.spec(job)
    assert "exceeded the 100 MB limit" in spec["failure_reason"]
    # The state is written first and the evidence event appended right after it.
    kills = wait_until(
        lambda: [e for e in _events(vq, job) if e["kind"] == "watchdog_kill"], timeout=5
    )
    assert kills[0]["evidence"]["rss_mb"] > 100
    wait_until(lambda: not processes_with_env(f"VQ_JOB_ID={job}"), timeout=20)
    time.sleep(0.5)
    assert vq.state(job) == "OOM_KILLED"  # never revised by the collector's exit


def test_wall_time_excludes_pauses(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--wall-time", "3s", "--", "sleep", "60")
    vq.wait_state(job, "RUNNING")
    wait_until(lambda: vq.spec(job)["pgid"])
    started = time.monotonic()
    time.sleep(1.0)
    assert vq.run("pause", job).stdout.startswith(f"{job} SUSPENDED")
    time.sleep(3.0)  # paused time must not count against the 3 s limit
    assert vq.state(job) == "SUSPENDED"
    vq.run("resume", job)
    vq.wait_state(job, "TIME_EXCEEDED", timeout=15)
    took = time.monotonic() - started
    assert took >= 5.5, f"killed after {took:.1f}s; 3 s limit + 3 s paused"
    spec = vq.spec(job)
    assert spec["paused_seconds_total"] >= 2.9
    assert "limit 3s" in spec["failure_reason"]


def test_idle_job_is_starved_with_a_short_test_threshold(vq: Vq) -> None:
    _config(vq, "[watchdog]\nstarved_window_seconds = 3\nstarved_cpu_percent = 5\n")
    vq.start_daemon()
    idle = vq.submit("--", "sleep", "60")
    busy = vq.submit(
        "--", sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 6: pass"
    )
    vq.wait_state(idle, "STARVED", timeout=20)
    assert "CPU over the last" in vq.spec(idle)["failure_reason"]
    vq.wait_state(busy, "COMPLETED", timeout=20)


def test_pause_and_resume_round_trip(vq: Vq, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    vq.start_daemon()
    job = vq.submit(
        "--", "sh", "-c", f"i=0; while true; do i=$((i+1)); echo $i > {counter}; sleep 0.05; done"
    )
    wait_until(lambda: counter.exists() and counter.read_text().strip())
    wait_until(lambda: vq.spec(job)["pgid"])
    vq.run("pause", job)
    spec = vq.spec(job)
    assert spec["state"] == "SUSPENDED" and spec["paused_by"] == "operator"
    assert spec["paused_at"] and spec["paused_monotonic_at"]
    time.sleep(0.3)
    frozen = counter.read_text()
    time.sleep(1.0)
    assert counter.read_text() == frozen, "the job kept running while SUSPENDED"
    vq.run("resume", job)
    wait_until(lambda: counter.read_text() != frozen, timeout=5)
    spec = vq.spec(job)
    assert spec["state"] == "RUNNING" and spec["paused_at"] is None
    assert spec["paused_seconds_total"] >= 1.2
    assert vq.run("pause", "--all").stdout.startswith(f"{job} SUSPENDED")
    assert vq.run("resume", "--all").stdout.startswith(f"{job} RUNNING")
    vq.run("kill", job)


def test_collector_killed_reaps_group_before_failing(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "120")
    collector = wait_until(lambda: vq.spec(job)["pid"])
    wait_until(lambda: processes_with_env(f"VQ_JOB_ID={job}"))
    os.kill(collector, signal.SIGKILL)
    vq.wait_state(job, "FAILED", timeout=20)
    assert "collector" in vq.spec(job)["failure_reason"]
    assert not processes_with_env(f"VQ_JOB_ID={job}"), "the command ran on after FAILED"


def test_memory_pressure_pauses_and_resumes_only_its_own(vq: Vq) -> None:
    from vq.executors.sampling import host_memory_used_percent

    base = host_memory_used_percent()
    assert base is not None
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    hog_mb = int(total_mb * 0.08)
    _config(
        vq,
        f"[watchdog]\nmemory_pause_percent = {base + 5:.1f}\n"
        f"memory_resume_percent = {base + 2.5:.1f}\n",
    )
    vq.start_daemon("--max-cpus", "8")  # room for `held` beside the two sleepers
    mine = vq.submit("--", "sleep", "120")
    operators = vq.submit("--", "sleep", "120")
    wait_until(lambda: vq.spec(mine)["pgid"] and vq.spec(operators)["pgid"])
    vq.run("pause", operators)
    hog = subprocess.Popen([sys.executable, "-c", HOG.format(mb=hog_mb)])
    try:
        vq.wait_state(mine, "SUSPENDED", timeout=30)
        assert vq.spec(mine)["paused_by"] == "memory-pressure"
        held = vq.submit("--", "true")
        time.sleep(2.0)
        assert vq.state(held) == "PENDING", "dispatch must be held under pressure"
    finally:
        hog.kill()
        hog.wait()
    vq.wait_state(mine, "RUNNING", timeout=30)
    vq.wait_state(held, "COMPLETED", timeout=30)
    assert vq.state(operators) == "SUSPENDED"
    assert vq.spec(operators)["paused_by"] == "operator"
