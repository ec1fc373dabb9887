"""``vq daemon install-service``: the systemd user unit, rendered, verified, installed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import VQ_BIN, Vq
from vq.services.service_unit import render_unit


def _settings(text: str) -> dict[str, list[str]]:
    section = ""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            found.setdefault(f"{section}.{key}", []).append(value)
    return found


def test_the_unit_runs_the_daemon_and_spares_the_jobs() -> None:
    text = render_unit(["/opt/vq/bin/vq"], {"VQ_STATE_DIR": "/data/50% vq", "HOME": "/h"})
    keys = _settings(text)
    assert keys["Service.ExecStart"] == ["/opt/vq/bin/vq daemon run"]
    assert keys["Service.KillMode"] == ["process"]  # a restart never kills the jobs
    assert keys["Service.Restart"] == ["on-failure"]
    assert keys["Service.RestartPreventExitStatus"] == ["9 15"]  # a refused start stays down
    assert keys["Service.Environment"] == ['"VQ_STATE_DIR=/data/50%% vq"']
    assert keys["Install.WantedBy"] == ["default.target"]
    assert "HOME" not in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_verifies_the_installed_unit(vq: Vq, tmp_path: Path) -> None:
    env = {**vq.env, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    run = subprocess.run(
        [VQ_BIN, "daemon", "install-service", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    unit = tmp_path / "xdg" / "systemd" / "user" / "vq.service"
    assert answer["path"] == str(unit) and answer["replaced"] is False
    verify = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    complaints = [line for line in verify.stderr.splitlines() if str(unit) in line]
    assert verify.returncode == 0 and not complaints, verify.stderr


def test_install_prints_the_commands_and_refuses_to_overwrite(vq: Vq, tmp_path: Path) -> None:
    env = {**vq.env, "HOME": str(tmp_path / "home")}
    env.pop("XDG_CONFIG_HOME", None)

    def install(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [VQ_BIN, "daemon", "install-service", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    first = install()
    unit = tmp_path / "home" / ".config" / "systemd" / "user" / "vq.service"
    assert first.returncode == 0, first.stderr
    assert f"wrote {unit}" in first.stdout
    assert "systemctl --user daemon-reload" in first.stdout
    assert "systemctl --user enable --now vq.service" in first.stdout
    assert f'Environment="VQ_STATE_DIR={vq.root}"' in unit.read_text()
    unit.write_text("# edited by hand\n")
    refused = install()
    assert refused.returncode == 6
    assert refused.stderr.startswith(f"vq: error: {unit} already exists")
    assert "hint: pass --force" in refused.stderr
    assert unit.read_text() == "# edited by hand\n"  # nothing changed
    forced = install("--force")
    assert forced.returncode == 0 and f"replaced {unit}" in forced.stdout
    assert "KillMode=process" in unit.read_text()
