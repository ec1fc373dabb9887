"""Secret references (§7.4): env:, file: and credential: (systemd LoadCredential)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vq.config.notifications import NotificationSettings
from vq.config.secrets import SecretRef, audit, parse_reference, read_secret
from vq.daemon.notify import resolve_webhook_url
from vq.errors import ConfigError

SECRET = "https://hooks.example.invalid/T0KEN-never-shown"


def _private(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def test_references_parse_and_literals_do_not() -> None:
    assert parse_reference("env:HOOK") == SecretRef("env", "HOOK")
    assert parse_reference("file:/etc/vq/hook") == SecretRef("file", "/etc/vq/hook")
    assert parse_reference("credential:vq-hook") == SecretRef("credential", "vq-hook")
    assert parse_reference("https://example.org/x") is None
    for bad in ("env:1X", "file:relative", "credential:a/b", "credential:.."):
        with pytest.raises(ConfigError):
            parse_reference(bad)


def test_a_credential_is_read_from_the_credentials_directory(tmp_path: Path) -> None:
    _private(tmp_path / "vq-hook", SECRET, 0o400)  # how systemd installs credentials
    env = {"CREDENTIALS_DIRECTORY": str(tmp_path)}
    assert read_secret(SecretRef("credential", "vq-hook"), env) == SECRET
    settings = NotificationSettings(webhook_url="credential:vq-hook")
    assert resolve_webhook_url(settings, env) == SECRET
    with pytest.raises(ConfigError, match="CREDENTIALS_DIRECTORY is not set") as info:
        resolve_webhook_url(settings, {})
    assert "LoadCredential=vq-hook" in (info.value.hint or "")
    _private(tmp_path / "open", SECRET, 0o644)
    with pytest.raises(ConfigError, match="mode 0644") as opened:
        read_secret(SecretRef("credential", "open"), env)
    assert SECRET not in opened.value.message


def test_audit_reports_each_failure_without_the_value(tmp_path: Path) -> None:
    good = _private(tmp_path / "good", SECRET)
    loose = _private(tmp_path / "loose", SECRET, 0o640)
    not_url = _private(tmp_path / "word", "hunter2")
    env = {"HOOK": SECRET}

    def url(value: str) -> str | None:
        return None if value.startswith("https://") else "not a URL"

    assert audit("k", "", env, url) is None
    assert audit("k", "env:HOOK", env, url).ok  # type: ignore[union-attr]
    assert audit("k", f"file:{good}", env, url).ok  # type: ignore[union-attr]
    findings = [
        audit("k", "env:MISSING", env, url),
        audit("k", f"file:{loose}", env, url),
        audit("k", f"file:{tmp_path / 'absent'}", env, url),
        audit("k", f"file:{not_url}", env, url),
        audit("k", "credential:x", env, url),
        audit("k", SECRET, env, url),
    ]
    problems = []
    for finding in findings:
        assert finding is not None and not finding.ok
        assert SECRET not in str(finding.as_dict()) and "hunter2" not in str(finding.as_dict())
        problems.append(finding.problem or "")
    assert "MISSING is not set" in problems[0]
    assert "mode 0640" in problems[1]
    assert "cannot read the secret file" in problems[2]
    assert "not a URL" in problems[3]
    assert "CREDENTIALS_DIRECTORY" in problems[4]
    assert "inline" in problems[5] and findings[5].reference is None  # type: ignore[union-attr]
