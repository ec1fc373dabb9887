"""Long-polls are bounded: the daemon serves at most ``[daemon] max_connections``
connections (one thread each) and answers the rest "daemon busy" at once; a stalled
daemon-socket peer is dropped; the console caps waits per credential and per address
(503 + Retry-After) and closes connections that never finish their request head."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Vq
from tests.web.conftest import Web, start_web, stop_web
from vq.daemon.rpc import RpcServer
from vq.web import connections, waits


def test_a_stalled_daemon_socket_peer_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "test.sock"
    server = RpcServer(path, {}, idle_seconds=0.5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(path))
            sock.sendall(b'{"id": 1, "method": "pi')  # never finished
            started = time.monotonic()
            assert sock.recv(100) == b""  # closed by the server
            assert time.monotonic() - started < 5
    finally:
        server.shutdown()
        server.server_close()


async def _waits_over_the_cap(
    url: str, headers: dict[str, str], count: int, over: int
) -> tuple[list[httpx.Response], int]:
    """Open ``count`` waits at once; once ``over`` of them are answered (or 30 s passed),
    the answered ones and how many were still held. Every wait is closed afterwards."""
    limits = httpx.Limits(max_connections=count + 10)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        tasks = [asyncio.ensure_future(client.get(url, headers=headers)) for _ in range(count)]
        deadline = time.monotonic() + 30
        while sum(t.done() for t in tasks) < over and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        answered = [t.result() for t in tasks if t.done()]
        pending = sum(not t.done() for t in tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return answered, pending


@pytest.fixture
def console(vq: Vq, tmp_path: Path) -> Iterator[Web]:
    served = start_web(vq, tmp_path / "web.log")
    yield served
    stop_web(served)


def test_a_connection_that_never_finishes_its_request_head_is_closed(console: Web) -> None:
    host, port = console.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        started = time.monotonic()
        assert sock.recv(100) == b""
        elapsed = time.monotonic() - started
    assert connections.HEADER_SECONDS - 1 <= elapsed < connections.HEADER_SECONDS + 10


def test_console_waits_over_the_per_credential_cap_get_503_with_retry_after(
    vq: Vq, console: Web
) -> None:
    vq.start_daemon()
    job = vq.submit("--not-before", "1h", "--", "true")
    admin = console.admin()
    url = f"{console.base_url}/api/v1/jobs/{job}/wait?timeout=30"

    answered, pending = asyncio.run(_waits_over_the_cap(url, admin, waits.PER_TOKEN + 2, 2))
    assert len(answered) == 2 and pending == waits.PER_TOKEN  # the cap, not an answer
    for extra in answered:
        assert extra.status_code == 503, extra.text
        assert extra.headers["retry-after"] == "5"
        assert extra.json()["error"]["code"] == "too-many-waits"
    # Once they are gone, a wait is admitted again (it times out normally).
    again = httpx.get(f"{console.base_url}/api/v1/jobs/{job}/wait?timeout=0", headers=admin)
    assert again.status_code == 200 and again.json()["timed_out"] is True


def test_the_console_wait_caps_come_from_the_configuration(vq: Vq, tmp_path: Path) -> None:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[web]\nwait_max_total = 3\n")
    vq.start_daemon()
    job = vq.submit("--not-before", "1h", "--", "true")
    served = start_web(vq, tmp_path / "web.log")
    try:
        admin = served.admin()
        url = f"{served.base_url}/api/v1/jobs/{job}/wait?timeout=30"

        answered, pending = asyncio.run(_waits_over_the_cap(url, admin, 5, 2))
    finally:
        stop_web(served)
    assert pending == 3  # the configured cap, far below the per-credential default
    assert [r.status_code for r in answered] == [503, 503]
    assert all(r.json()["error"]["code"] == "too-many-waits" for r in answered)
