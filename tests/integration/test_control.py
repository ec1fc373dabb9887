"""The daemon control plane: drain, throttle, reload, audit, and a hostile socket."""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path

from tests.conftest import Vq


def _exchange(sock_path: Path, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(str(sock_path))
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the daemon may close an oversized request early
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def test_malformed_and_oversized_messages_never_hurt_the_daemon(vq: Vq) -> None:
    vq.start_daemon()
    sock_path = vq.root / "daemon.sock"
    rng = random.Random(7)
    jobs = [vq.submit("--", "sh", "-c", "sleep 0.2") for _ in range(5)]
    hostile = [
        b"not json\n",
        b"[1, 2, 3]\n",
        b'{"id": 1}\n',
        b'{"id": 2, "method": "nope"}\n',
        b'{"id": 3, "method": "status", "params": []}\n',
        b'{"id": 4, "method": "submit", "params": {"command": []}}\n',
        b'{"id": 5, "method": "kill", "params": {"id": "../../etc"}}\n',
        b'{"id": 6, "method": "throttle", "params": {"max_jobs": -1}}\n',
        b"[" * 100_000 + b"\n",
        bytes(rng.getrandbits(8) for _ in range(4096)) + b"\n",
        b"\xff\xfe\n",
    ]
    for payload in hostile:
        reply = _exchange(sock_path, payload)
        for line in reply.splitlines():
            assert "error" in json.loads(line)
    huge = b'{"id": 9, "method": "ping", "params": {"x": "' + b"a" * (17 * 2**20) + b'"}}\n'
    reply = _exchange(sock_path, huge)
    assert b"request too large" in reply or reply == b""
    assert vq.json("daemon", "ping")["pid"] == vq.daemon_pid()
    for job in jobs:
        vq.wait_state(job, "COMPLETED")
    # Nothing hostile was written: exactly our five specs exist.
    assert sorted(p.stem for p in (vq.root / "queue").glob("*.json")) == sorted(jobs)
