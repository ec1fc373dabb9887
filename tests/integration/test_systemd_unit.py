"""The systemd unit of the multi-user daemon (packaging/systemd/vq-multi-user.service).

PID 1 is not systemd on every test machine, so this checks what can be checked without
it: ``systemd-analyze verify`` accepts the unit, and its ExecStart line, run with its
Environment (roots redirected to a temporary directory), starts the multi-user daemon,
which stops cleanly on the SIGTERM ``systemctl stop`` sends; a refused start exits with a
status the unit does not restart.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import VQ_BIN, wait_until
from tests.multi_user_support import needs_multi_user

UNIT = Path(__file__).resolve().parents[2] / "packaging" / "systemd" / "vq-multi-user.service"


def unit_entries(text: str) -> dict[str, list[str]]:
    """``key`` → every value of it in the unit (systemd allows repeated keys)."""
    entries: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        entries.setdefault(key.strip(), []).append(value.strip())
    return entries


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    text = UNIT.read_text()
    assert "ExecStart=/usr/local/bin/vq daemon run" in text
    # verify checks that the program exists: point it at this checkout's vq.
    unit = tmp_path / UNIT.name
    unit.write_text(text.replace("/usr/local/bin/vq", VQ_BIN))
    verified = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert verified.returncode == 0, verified.stderr
    assert UNIT.name not in verified.stderr, verified.stderr


def test_the_unit_keeps_jobs_and_does_not_restart_a_refused_start() -> None:
    entries = unit_entries(UNIT.read_text())
    assert entries["KillMode"] == ["process"]
    assert set(entries["RestartPreventExitStatus"][0].split()) == {"9", "15"}
    assert entries["WantedBy"] == ["multi-user.target"]


@pytest.fixture
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vq-unit-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_multi_user
def test_the_exec_start_line_runs_the_multi_user_daemon(base: Path) -> None:
    entries = unit_entries(UNIT.read_text())
    argv = shlex.split(entries["ExecStart"][0])
    argv[0] = VQ_BIN  # the unit's install path, here this checkout's vq
    env = {k: v for k, v in os.environ.items() if not k.startswith("VQ_")}
    for assignment in entries["Environment"]:
        key, _, value = assignment.partition("=")
        env[key] = value
    assert env["VQ_CONFIG_DIR"] == "/etc/vq" and env["VQ_MULTI_USER_ROOT"] == "/var/lib/vq"
    config = base / "etc"
    config.mkdir()
    env.update(VQ_CONFIG_DIR=str(config), VQ_MULTI_USER_ROOT=str(base / "system"))

    refused = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 9, refused.stderr  # no policy: a status not restarted
    assert not (base / "system" / "daemon.pid").exists()

    (config / "config.toml").write_text(
        '[multi_user]\nenabled = true\nprivilege_drop = "collector"\n'
    )
    log = (base / "daemon.out").open("wb")
    daemon = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    try:
        sock = base / "system" / "daemon.sock"
        wait_until(lambda: sock.exists() or daemon.poll() is not None, timeout=60)
        assert daemon.poll() is None, (base / "daemon.out").read_text()
        ping = subprocess.run(
            [VQ_BIN, "daemon", "ping", "--json"], env=env, capture_output=True, text=True
        )
        assert ping.returncode == 0 and str(daemon.pid) in ping.stdout, ping.stderr
        daemon.send_signal(signal.SIGTERM)  # what `systemctl stop` sends (KillMode=process)
        assert daemon.wait(timeout=60) == 0
        assert not sock.exists()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
