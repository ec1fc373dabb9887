"""DNS rebinding: the console answers only to loopback and configured host names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import Vq
from tests.web.conftest import Web, start_web, stop_web


def test_a_foreign_host_header_is_refused_with_400(web: Web) -> None:
    admin = web.admin()
    for path in ("/api/v1/jobs", "/api/v1/docs", "/", "/health/live"):
        answer = web.http.get(path, headers={**admin, "Host": "evil.example:8477"})
        assert answer.status_code == 400, (path, answer.text)
        if path.startswith("/api"):
            assert answer.json()["error"]["code"] == "bad-host"
        else:
            assert "host names" in answer.text and "<" not in answer.text
    post = web.http.post(
        "/api/v1/jobs",
        json={"command": ["true"], "idempotency_key": "k"},
        headers={**admin, "Host": "evil.example"},
    )
    assert post.status_code == 400 and not (web.vq.root / "queue").exists()
    for host in ("localhost:1", "127.0.0.1", "[::1]:8477"):
        assert web.http.get("/api/v1/jobs", headers={**admin, "Host": host}).status_code == 200


def test_configured_hosts_are_served(vq: Vq, tmp_path: Path) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('[web]\nallowed_hosts = ["queue.lab.example"]\n')
    served = start_web(vq, tmp_path / "web.log", "--allowed-host", "other.example")
    try:
        for host in ("queue.lab.example:8477", "other.example"):
            assert served.http.get("/health/live", headers={"Host": host}).status_code == 200
        assert served.http.get("/health/live", headers={"Host": "x.example"}).status_code == 400
    finally:
        stop_web(served)


def test_allow_remote_needs_the_host_names(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "VQ_CONFIG_DIR": str(tmp_path), "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "vq.web", "--host", "0.0.0.0", "--port", "1", "--allow-remote"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 2 and "--allowed-host" in result.stderr
