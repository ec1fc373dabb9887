"""Fleet mode is opt-in: `--fleet`, `vq daemon start --web --fleet` or `[web] fleet = true`.

Real processes on a private state root with no hosts configured: the fleet routes exist
only in fleet mode, the health routes answer the same either way, and `--fleet` without
`--web` is a usage error.
"""

from __future__ import annotations

import httpx

from tests.conftest import Vq, wait_until
from tests.web.conftest import free_port


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/health/live", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def test_daemon_web_sidecar_serves_the_fleet_console(vq: Vq) -> None:
    refused = vq.run("daemon", "start", "--fleet", check=False)
    assert refused.returncode == 2 and "need --web" in refused.stderr
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    vq.start_daemon("--web", "--fleet", "--web-port", str(port))
    try:
        wait_until(lambda: _answers(url), timeout=30)
        hosts = httpx.get(url + "/api/v1/fleet/hosts", timeout=10).json()["hosts"]
        assert [(h["name"], h["status"]) for h in hosts] == [("localhost", "ok")]  # this queue
    finally:
        vq.stop_daemon()
