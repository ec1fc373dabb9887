"""Malformed, hostile or unlucky requests to the agent API: never a 500, never a path."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import wait_until
from tests.web.conftest import Web
from vq.api_client import AsyncClient


@pytest.fixture
def admin(web: Web) -> dict[str, str]:
    return web.admin()


def test_async_client_streams_a_directory_upload(web: Web, tmp_path: Path) -> None:
    token = web.init_token()
    web.vq.start_daemon()
    source = tmp_path / "inputs"
    (source / "deep").mkdir(parents=True)
    (source / "deep" / "f.txt").write_bytes(b"streamed\n" * 1000)

    async def go() -> str:
        async with AsyncClient(web.base_url, token=token) as client:
            with pytest.raises(ValueError):
                await client.submit(["true"], files={"a": b"x"}, upload=source)
            result = await client.run(
                ["cp", "deep/f.txt", "copy.txt"], upload=source, outputs=tmp_path / "out"
            )
            assert result.state == "COMPLETED", result
            return (tmp_path / "out" / "copy.txt").read_text()

    assert asyncio.run(go()) == "streamed\n" * 1000


def test_an_upload_cut_off_midway_leaves_nothing(web: Web, admin: dict[str, str]) -> None:
    url = urlsplit(web.base_url)
    head = (
        "POST /api/v1/uploads HTTP/1.1\r\n"
        f"Host: {url.netloc}\r\nAuthorization: {admin['Authorization']}\r\n"
        "Content-Type: application/gzip\r\nContent-Length: 1000000\r\n\r\n"
    ).encode()
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80)) as client:
        client.sendall(head + b"\x1f\x8b" + b"\0" * 200_000)
        uploads = web.vq.root / "uploads"
        wait_until(lambda: uploads.exists() and any(uploads.iterdir()))  # it was receiving
    wait_until(lambda: not any(uploads.iterdir()), timeout=10)
