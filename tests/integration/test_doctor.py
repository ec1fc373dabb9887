"""`vq doctor` on a healthy and on a deliberately broken state root."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.conftest import Vq, wait_until


def _checks(vq: Vq) -> tuple[int, dict[str, list[dict[str, str]]]]:
    result = vq.run("doctor", "--json", check=False)
    payload = json.loads(result.stdout)
    by_name: dict[str, list[dict[str, str]]] = {}
    for check in payload["checks"]:
        by_name.setdefault(check["name"], []).append(check)
    assert payload["ok"] is (result.returncode == 0)
    return result.returncode, by_name


def test_doctor_broken(vq: Vq) -> None:
    vq.start_daemon()
    good = vq.submit("--", "true")
    vq.wait_state(good, "COMPLETED")
    pid = vq.daemon_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # leaves daemon.sock and daemon.pid behind
    wait_until(lambda: vq.run("daemon", "status", check=False).returncode == 5)
    (vq.root / "queue" / "bbbbbbbbbbbb.json").write_text("{ truncated")
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text("[daemon]\nmax_jobz = 3\n")
    code, checks = _checks(vq)
    assert code == 1
    assert checks["config"][0]["status"] == "fail"
    assert "daemon.max_jobz: unknown key" in checks["config"][0]["message"]
    assert checks["daemon"][0]["status"] == "warn"
    stale = " ".join(c["message"] for c in checks["stale files"])
    assert "daemon.sock exists but nothing answers" in stale
    assert (
        checks["specs"][0]["status"] == "warn" and "bbbbbbbbbbbb" in checks["specs"][0]["message"]
    )
