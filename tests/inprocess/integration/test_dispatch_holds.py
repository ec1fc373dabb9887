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


def test_a_job_paused_for_pressure_then_killed_does_not_keep_the_hold(vq: Vq) -> None:
    """The reproduction of the frozen queue: the guard pauses a running job, the job is
    killed, a reload raises the thresholds — the next job must run, no restart needed."""
    _config(vq, HIGH)
    vq.start_daemon()
    victim = vq.submit("--", "sleep", "300")
    vq.wait_state(victim, "RUNNING")
    _config(vq, LOW)
    vq.run("daemon", "reload")
    vq.wait_state(victim, "SUSPENDED")
    assert vq.spec(victim)["paused_by"] == "memory-pressure"
    vq.run("kill", victim)
    vq.wait_state(victim, "KILLED")
    _config(vq, HIGH)
    vq.run("daemon", "reload")
    after = vq.submit("--", "true")
    vq.wait_state(after, "COMPLETED", timeout=30)
    assert vq.json("daemon", "admin-status")["memory_pressure_hold"] is False


def test_a_drain_is_named_as_the_pending_reason(vq: Vq) -> None:
    _config(vq, HIGH)
    vq.start_daemon()
    vq.run("daemon", "drain", "--reason", "maintenance")
    job = vq.submit("--", "true")
    assert "draining: maintenance" in _reason(vq, job)
    vq.run("daemon", "undrain")
    vq.wait_state(job, "COMPLETED", timeout=30)


def _doctor(vq: Vq) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in vq.json("doctor")["checks"]}


def test_a_loaded_config_file_that_disappears_holds_until_restored(vq: Vq) -> None:
    path = _config(vq, HIGH)
    vq.start_daemon()
    path.unlink()
    wait_until(lambda: vq.json("daemon", "admin-status")["holding_dispatch"])
    status = vq.json("daemon", "admin-status")
    assert status["config_missing"] == [str(path)]
    assert "is missing" in status["dispatch_hold"]
    job = vq.submit("--", "true")
    assert f"configuration file {path} the daemon loaded is missing" in _reason(vq, job)
    assert "is missing" in _doctor(vq)["dispatch"]["message"]
    human = vq.run("daemon", "admin-status").stdout
    assert f"configuration file {path}" in human
    assert vq.state(job) == "PENDING"
    path.write_text(HIGH)  # a valid file is back: the hold ends
    vq.wait_state(job, "COMPLETED", timeout=30)
    assert "dispatch" not in _doctor(vq)


def test_a_reload_accepts_a_deleted_config_file(vq: Vq) -> None:
    path = _config(vq, HIGH)
    vq.start_daemon()
    path.unlink()
    wait_until(lambda: vq.json("daemon", "admin-status")["config_missing"])
    job = vq.submit("--", "true")
    vq.run("daemon", "reload")
    vq.wait_state(job, "COMPLETED", timeout=30)
    assert vq.json("daemon", "admin-status")["config_missing"] == []
