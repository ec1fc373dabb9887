"""The daemon control plane: drain, throttle, reload, audit, and a hostile socket."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.conftest import Vq, wait_until


def _config(vq: Vq, text: str) -> None:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(text)


def _running(vq: Vq, ids: list[str]) -> int:
    return sum(vq.state(job) == "RUNNING" for job in ids)


def test_drain_and_undrain_survive_a_restart(vq: Vq) -> None:
    vq.start_daemon()
    assert vq.run("daemon", "drain", "--reason", "maintenance").returncode == 0
    job = vq.submit("--", "true")
    vq.stop_daemon()
    vq.start_daemon()
    status = vq.json("daemon", "admin-status")
    assert status["drain"]["mode"] == "new" and status["drain"]["reason"] == "maintenance"
    time.sleep(1.5)  # two loop ticks: a draining daemon must not start it
    assert vq.state(job) == "PENDING"
    vq.run("daemon", "undrain")
    vq.wait_state(job, "COMPLETED")
    assert not (vq.root / "drain.json").exists()


def test_drain_can_refuse_submissions_even_without_a_daemon(vq: Vq) -> None:
    vq.run("daemon", "drain", "--reject-submits")  # no daemon: written to drain.json
    refused = vq.run("submit", "--", "true", check=False)
    assert refused.returncode == 6 and "refuses new submissions" in refused.stderr
    vq.start_daemon()
    refused = vq.run("submit", "--", "true", check=False)
    assert refused.returncode == 6
    assert not list((vq.root / "queue").glob("*.json"))
    vq.run("daemon", "undrain")
    vq.wait_state(vq.submit("--", "true"), "COMPLETED")


def test_full_drain_pauses_running_jobs_until_undrain(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "60")
    wait_until(lambda: vq.spec(job)["pgid"])
    vq.run("daemon", "drain", "--full")
    vq.wait_state(job, "SUSPENDED")
    assert vq.spec(job)["paused_by"] == "drain"
    vq.run("daemon", "undrain")
    vq.wait_state(job, "RUNNING")


def test_throttle_lowers_caps_expires_and_persists(vq: Vq) -> None:
    vq.start_daemon("--max-cpus", "8", "--max-jobs", "4")
    vq.run("daemon", "throttle", "--max-jobs", "1")
    vq.stop_daemon()
    vq.start_daemon("--max-cpus", "8", "--max-jobs", "4")  # the throttle survives
    ids = [vq.submit("--", "sleep", "30") for _ in range(3)]
    wait_until(lambda: _running(vq, ids) == 1)
    time.sleep(1.5)
    assert _running(vq, ids) == 1
    assert vq.json("daemon", "admin-status")["effective_caps"]["max_jobs"] == 1
    vq.run("daemon", "throttle", "--max-jobs", "2", "--for", "2s")
    wait_until(lambda: _running(vq, ids) == 2)
    wait_until(lambda: _running(vq, ids) == 3, timeout=15)  # expired: back to 4
    assert vq.json("daemon", "admin-status")["throttle"] is None
    vq.run("kill", *ids)


def test_reload_applies_new_caps_to_queued_jobs(vq: Vq) -> None:
    _config(vq, "[daemon]\nmax_jobs = 1\nmax_cpus = 8\n")
    vq.start_daemon()
    ids = [vq.submit("--", "sleep", "30") for _ in range(3)]
    wait_until(lambda: _running(vq, ids) == 1)
    _config(
        vq,
        "[daemon]\nmax_jobs = 3\nmax_cpus = 8\n\n[notifications]\nnotify_on_states = ['failed']\n",
    )
    report = vq.json("daemon", "reload")
    assert "daemon.max_jobs" in report["changed"]
    assert report["needs_restart"] == ["notifications.notify_on_states"]
    wait_until(lambda: _running(vq, ids) == 3)
    vq.run("kill", *ids)


def test_invalid_config_holds_dispatch_until_fixed(vq: Vq) -> None:
    _config(vq, "[daemon]\nmax_jobs = 2\n")
    vq.start_daemon()
    _config(vq, "[daemon]\nmax_jobz = 2\n")
    wait_until(lambda: vq.json("daemon", "admin-status")["config_error"], timeout=15)
    job = vq.submit("--", "true")
    time.sleep(1.5)
    assert vq.state(job) == "PENDING"
    refused = vq.run("daemon", "reload", check=False)
    assert refused.returncode == 9 and "keeps its last good one" in refused.stderr
    _config(vq, "[daemon]\nmax_jobs = 2\n")
    vq.wait_state(job, "COMPLETED", timeout=20)


def test_control_calls_are_audited_with_the_peer_uid(vq: Vq) -> None:
    vq.start_daemon()
    vq.run("daemon", "drain")
    vq.run("daemon", "undrain")
    vq.run("daemon", "throttle", "--max-jobs", "0", check=False)  # refused by Click
    vq.run("daemon", "throttle", "--clear")
    lines = [json.loads(x) for x in (vq.root / "rpc-audit.jsonl").read_text().splitlines()]
    assert [x["method"] for x in lines] == ["drain", "undrain", "throttle"]
    assert all(x["peer_uid"] == os.getuid() and x["outcome"] == "ok" for x in lines)


def test_ping_reports_provenance_and_methods(vq: Vq) -> None:
    vq.start_daemon()
    ping = vq.json("daemon", "ping")
    assert ping["provenance"]["version"] == ping["version"]
    assert ping["provenance"]["executable"].endswith("python")
    for method in ("submit", "reload", "drain", "undrain", "throttle", "capacity", "admin_status"):
        assert method in ping["methods"]
    capacity = vq.run("daemon", "admin-status", "--json").stdout
    assert '"effective_caps"' in capacity
    stopped = vq.run("daemon", "ping", check=False) if vq.stop_daemon() is None else None
    assert stopped is not None and stopped.returncode == 5
