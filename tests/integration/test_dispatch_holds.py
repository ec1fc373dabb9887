"""Dispatch holds that must hold and must clear (§4.3, §4.4): memory pressure and config.

Real daemon, real CLI. Memory pressure is produced without a memory hog: thresholds
below the host's current use make any host "under pressure", and a reload that raises
them above it must release the hold with no job running.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Vq, wait_until

LOW = "[watchdog]\nmemory_pause_percent = 1.0\nmemory_resume_percent = 0.5\n"
HIGH = "[watchdog]\nmemory_pause_percent = 99.9\nmemory_resume_percent = 99.8\n"


def _config(vq: Vq, text: str) -> Path:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    path = config_dir / "config.toml"
    path.write_text(text)
    return path


def _reason(vq: Vq, job: str) -> str:
    return str(vq.status(job)["pending_reason"])


def test_pressure_holds_dispatch_with_no_job_running_and_clears_after_a_reload(
    vq: Vq,
) -> None:
    _config(vq, LOW)
    vq.start_daemon()
    job = vq.submit("--", "true")
    reason = wait_until(lambda: "memory pressure" in _reason(vq, job) and _reason(vq, job))
    assert "pauses at 1%" in reason and "resumes below 0.5%" in reason
    assert vq.state(job) == "PENDING"
    assert vq.json("daemon", "admin-status")["memory_pressure_hold"] is True
    _config(vq, HIGH)
    vq.run("daemon", "reload")
    vq.wait_state(job, "COMPLETED", timeout=30)
    assert vq.json("daemon", "admin-status")["memory_pressure_hold"] is False


def test_a_drain_is_named_as_the_pending_reason(vq: Vq) -> None:
    _config(vq, HIGH)
    vq.start_daemon()
    vq.run("daemon", "drain", "--reason", "maintenance")
    job = vq.submit("--", "true")
    assert "draining: maintenance" in _reason(vq, job)
    vq.run("daemon", "undrain")
    vq.wait_state(job, "COMPLETED", timeout=30)
