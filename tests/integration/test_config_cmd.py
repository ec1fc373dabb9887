"""`vq config show` and `vq config check` on real files."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Vq, wait_until
from vq._proc_stat import is_alive


def _write(vq: Vq, text: str) -> Path:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    path = config_dir / "config.toml"
    path.write_text(text)
    return path


def test_daemon_refuses_to_start_on_an_invalid_config_naming_the_line(vq: Vq) -> None:
    path = _write(vq, "[daemon]\nmax_jobs = 0\n")
    result = vq.run("daemon", "start", check=False)
    assert result.returncode == 9
    assert f"{path}:2: daemon.max_jobs" in result.stderr


def test_non_utf8_config_is_one_error_line_and_holds_a_running_daemon(vq: Vq) -> None:
    path = _write(vq, "[daemon]\nmax_jobs = 2\n")
    vq.start_daemon()
    pid = vq.daemon_pid()
    path.write_bytes(b"[daemon]\nmax_jobs = 2\n# \xff\n")
    held = wait_until(lambda: vq.json("daemon", "admin-status")["config_error"], timeout=15)
    assert f"{path}:3:" in held and "UTF-8" in held
    assert vq.daemon_pid() == pid  # alive, holding dispatch
    result = vq.run("config", "check", str(path), check=False)
    assert result.returncode == 9
    assert result.stderr.startswith(f"vq: error: {path}:3: ")
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 2  # + hint
    vq.stop_daemon()
    refused = vq.run("daemon", "start", check=False)
    assert refused.returncode == 9 and f"{path}:3:" in refused.stderr


def test_a_fifo_config_or_spec_never_blocks_the_cli_or_the_daemon(vq: Vq) -> None:
    vq.start_daemon()
    queue = vq.root / "queue"
    os.mkfifo(queue / "fffffffffff1.json")
    listed = vq.run("list", "--json", timeout=20)
    assert listed.returncode == 0
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED", timeout=20)
    path = Path(vq.env["VQ_CONFIG_DIR"]) / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    pid = vq.daemon_pid()
    os.mkfifo(path)
    # The CLI reads the config for the multi-user policy first: a FIFO there fails closed
    # at once (exit 9, naming it) instead of blocking on the open.
    refused = vq.run("daemon", "admin-status", "--json", check=False, timeout=20)
    assert refused.returncode == 9, refused.stderr
    assert refused.stderr.startswith("vq: error: ") and "FIFO" in refused.stderr
    assert "Traceback" not in refused.stderr
    result = vq.run("config", "check", str(path), check=False, timeout=20)
    assert result.returncode == 9 and "FIFO" in result.stderr
    held = wait_until(lambda: "FIFO" in (vq.root / "daemon.log").read_text(), timeout=15)
    assert held and pid is not None and is_alive(pid)  # the daemon holds, never blocks or dies
    assert (queue / "fffffffffff1.json").exists()  # quarantined, never removed
    path.unlink()  # the CLI can reach the daemon again to stop it
