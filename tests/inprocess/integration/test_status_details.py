"""`vq status` shows who paused a job and since when, and an ended job's receipt figures."""

from __future__ import annotations

from tests.conftest import Vq, wait_until


def test_paused_by_operator_with_when(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "60")
    vq.wait_state(job, "RUNNING")
    wait_until(lambda: vq.spec(job)["pgid"])  # pausable: its process is recorded
    vq.run("pause", job)
    view = vq.status(job)
    assert view["paused_by"] == "operator" and view["paused_at"]
    text = vq.run("status", job).stdout
    assert "paused by" in text and "an operator (vq pause), since " in text
    vq.run("kill", job)


def test_ended_job_shows_peak_rss_and_cpu_time_from_its_receipt(vq: Vq) -> None:
    vq.start_daemon()
    burn = "x = bytearray(40 * 1024 * 1024); s = sum(range(3_000_000))"
    job = vq.submit("--", "python3", "-c", burn)
    assert vq.run("wait", job).returncode == 0
    wait_until(lambda: (vq.root / "jobs" / job / "_vq" / "resource-usage.json").exists())
    usage = vq.status(job)["resource_usage"]
    assert usage["source"] == "receipt"
    assert usage["peak_rss_mb"] >= 40
    assert usage["cpu_seconds"] > 0
    assert usage["cpu_seconds"] == round(usage["user_cpu_seconds"] + usage["system_cpu_seconds"], 3)
    text = vq.run("status", job).stdout
    assert "peak RSS" in text and "(receipt: largest process)" in text
    assert "CPU time" in text and "user " in text and "system " in text
    pending = vq.submit("--not-before", "1h", "--", "true")
    assert "resource_usage" not in vq.status(pending)
