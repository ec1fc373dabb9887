"""`vq config show` and `vq config check` on real files."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import Vq, wait_until

TOKEN = "T0KEN-must-never-print"


def _write(vq: Vq, text: str) -> Path:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    path = config_dir / "config.toml"
    path.write_text(text)
    return path


def test_show_names_the_source_of_each_value_and_redacts_secrets(vq: Vq) -> None:
    path = _write(
        vq,
        f'[daemon]\nmax_jobs = 3\n\n[notifications]\nwebhook_url = "https://hooks.example.invalid/{TOKEN}"\n',
    )
    shown = vq.json("config", "show")
    assert shown["settings"]["daemon.max_jobs"] == 3
    assert shown["sources"]["daemon.max_jobs"] == f"user:{path}"
    assert shown["sources"]["daemon.max_cpus"] == "default"
    text = vq.run("config", "show").stdout + vq.run("config", "show", "--json").stdout
    assert TOKEN not in text and "hooks.example.invalid" in text


def test_check_reports_key_file_and_line(vq: Vq, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[daemon]\nmax_jobs = 3\n\n[watchdog]\nbogus = 1\n")
    result = vq.run("config", "check", str(bad), check=False)
    assert result.returncode == 9
    assert result.stderr.startswith(f"vq: error: {bad}:5: watchdog.bogus: unknown key")
    good = tmp_path / "good.toml"
    good.write_text("[daemon]\nmax_jobs = 3\n")
    assert vq.run("config", "check", str(good)).stdout.strip() == f"{good}: valid"
    broken = tmp_path / "broken.toml"
    broken.write_text("[daemon\n")
    assert vq.run("config", "check", str(broken), check=False).returncode == 9


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
    os.mkfifo(path)
    held = wait_until(lambda: vq.json("daemon", "admin-status")["config_error"], timeout=15)
    assert "FIFO" in held
    result = vq.run("config", "check", str(path), check=False, timeout=20)
    assert result.returncode == 9 and "FIFO" in result.stderr
    assert (queue / "fffffffffff1.json").exists()  # quarantined, never removed
