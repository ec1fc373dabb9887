"""A real local HTTP receiver of terminal webhooks (§6.2) and the config helpers the
webhook tests of both tiers (subprocess and in-process) share."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq

TOKEN = "T0KEN-s3cr3t-4f1c"


class Receiver(ThreadingHTTPServer):
    """Records every POST; may answer with a status after a delay (released at teardown)."""

    def __init__(self, status: int = 200, delay: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status = status
        self.delay = delay
        self.release = threading.Event()
        self.posts: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hooks/{TOKEN}"

    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [post["body"] for post in self.posts]


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.posts.append(
                {"path": self.path, "headers": dict(self.headers), "body": json.loads(body)}
            )
        if self.server.delay:
            self.server.release.wait(self.server.delay)
        try:
            self.send_response(self.server.status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        except OSError:
            pass  # the daemon gave up waiting: that is the point of the slow receiver

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(name="receiver")
def receiver_fixture() -> Iterator[Callable[..., Receiver]]:
    servers: list[Receiver] = []

    def make(status: int = 200, delay: float = 0.0) -> Receiver:
        server = Receiver(status, delay)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.release.set()
        server.shutdown()
        server.server_close()


def _config(vq: Vq, text: str) -> None:
    config_dir = Path(vq.env["VQ_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(text)


def _daemon_log(vq: Vq) -> str:
    return (vq.root / "daemon.log").read_text()
