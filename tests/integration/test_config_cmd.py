"""`vq config show` and `vq config check` on real files."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Vq

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


def test_daemon_logs_its_effective_config_at_start_and_reload(vq: Vq) -> None:
    path = _write(
        vq,
        f'[daemon]\nmax_jobs = 3\n\n[notifications]\nwebhook_url = "https://hooks.example.invalid/{TOKEN}"\n',
    )
    vq.start_daemon("--max-cpus", "2")
    log = vq.root / "daemon.log"
    text = log.read_text()
    assert "effective configuration (start), secrets redacted:" in text
    assert f"daemon.max_jobs = 3  (user:{path})" in text
    assert "daemon.max_cpus = 2  (option)" in text
    assert "notifications.webhook_url = 'https://hooks.example.invalid/…(redacted)'" in text
    path.write_text(path.read_text().replace("max_jobs = 3", "max_jobs = 5"))
    vq.run("daemon", "reload")
    reloaded = log.read_text()
    assert "effective configuration (reload), secrets redacted:" in reloaded
    assert f"daemon.max_jobs = 5  (user:{path})" in reloaded
    assert TOKEN not in reloaded
