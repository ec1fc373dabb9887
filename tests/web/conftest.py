"""A real `vq web serve` process over the test's private state root.

``web`` starts the console as a subprocess (the installed console script, exactly as a
user runs it) on a free loopback port, waits for ``/health/live`` and yields a
:class:`Web` with an ``httpx.Client`` bound to it. Stopped at teardown.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.conftest import VQ_BIN, Vq, wait_until


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Web:
    vq: Vq
    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(base_url=self.base_url, timeout=30.0)

    @property
    def config_dir(self) -> Path:
        return Path(self.vq.env["VQ_CONFIG_DIR"])

    def init_token(self) -> str:
        """Create the admin token with the real CLI and return it."""
        self.vq.run("web", "init-token", "--force")
        return (self.config_dir / "web-token").read_text().strip()

    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.init_token()}"}

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_web(vq: Vq, log_path: Path, *extra: str) -> Web:
    port = free_port()
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [VQ_BIN, "web", "serve", "--port", str(port), *extra],
            env=vq.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    web = Web(vq, f"http://127.0.0.1:{port}", process, log_path)

    def answering() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"vq web serve exited {process.returncode}: {web.log_text()}")
        try:
            return web.http.get("/health/live").status_code == 200
        except httpx.TransportError:
            return False

    wait_until(answering, timeout=30)
    return web


def stop_web(web: Web) -> None:
    web.http.close()
    if web.process.poll() is None:
        os.killpg(web.process.pid, signal.SIGTERM)
        try:
            web.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(web.process.pid, signal.SIGKILL)
            web.process.wait()


@pytest.fixture
def web(vq: Vq, tmp_path: Path) -> Iterator[Web]:
    """The console over ``vq``'s state root (start the daemon yourself if the test needs it)."""
    served = start_web(vq, tmp_path / "web.log")
    yield served
    stop_web(served)
