"""`vq config show` and `vq config check` on real files."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import VQ_BIN, Vq

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


def test_config_audit_checks_every_secret_reference(vq: Vq, tmp_path: Path) -> None:
    assert vq.run("config", "audit").stdout.strip() == "no secrets are configured"
    secret = tmp_path / "hook"
    secret.write_text(f"https://hooks.example.invalid/{TOKEN}\n")
    secret.chmod(0o644)
    _write(vq, f'[notifications]\nwebhook_url = "file:{secret}"\n')
    failed = vq.run("config", "audit", check=False)
    assert failed.returncode == 1
    assert f"FAIL  notifications.webhook_url = file:{secret}" in failed.stdout
    assert "mode 0644" in failed.stdout and "chmod 600" in failed.stdout
    as_json = vq.run("config", "audit", "--json", check=False)
    assert as_json.returncode == 1
    assert '"ok": false' in as_json.stdout
    secret.chmod(0o600)
    passed = vq.run("config", "audit", "--json")
    assert '"ok": true' in passed.stdout
    assert TOKEN not in failed.stdout + as_json.stdout + passed.stdout + failed.stderr

    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "vq-hook").write_text(f"https://hooks.example.invalid/{TOKEN}\n")
    (creds / "vq-hook").chmod(0o400)
    _write(vq, '[notifications]\nwebhook_url = "credential:vq-hook"\n')
    assert vq.run("config", "audit", check=False).returncode == 1  # no systemd credentials
    with_creds = {**vq.env, "CREDENTIALS_DIRECTORY": str(creds)}
    ran = subprocess.run(
        [VQ_BIN, "config", "audit"], env=with_creds, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "ok    notifications.webhook_url = credential:vq-hook" in ran.stdout
