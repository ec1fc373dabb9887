"""The agent API under abuse: abandoned long-polls, archive bombs, racing submits, bad bodies.

Real daemon, real `vq web serve`, real sockets; every wait is a poll with a deadline.
"""

from __future__ import annotations

import io
import json
import socket
import tarfile
import threading
import time
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import Vq, wait_until
from tests.web.conftest import Web


def daemon_threads(vq: Vq) -> int:
    pid = vq.daemon_pid()
    assert pid is not None
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads: line")


@pytest.fixture
def admin(web: Web) -> dict[str, str]:
    web.vq.start_daemon()
    return web.admin()


def running_sleeper(web: Web, admin: dict[str, str], key: str) -> str:
    answer = web.http.post(
        "/api/v1/jobs", json={"command": ["sleep", "60"], "idempotency_key": key}, headers=admin
    )
    assert answer.status_code == 201, answer.text
    job_id: str = answer.json()["id"]
    web.vq.wait_state(job_id, "RUNNING")
    return job_id


def kill(web: Web, job_id: str, admin: dict[str, str]) -> None:
    assert web.http.post(f"/api/v1/jobs/{job_id}/kill", headers=admin).status_code == 200


def settled_threads(vq: Vq) -> int:
    """The daemon's thread count once it stopped changing for a moment."""
    previous = -1

    def stable() -> int | None:
        nonlocal previous
        now = daemon_threads(vq)
        same = now == previous
        previous = now
        return now if same else None

    return int(wait_until(stable, timeout=10, interval=0.3))


def test_abandoned_rpc_waits_free_their_daemon_threads(web: Web, admin: dict[str, str]) -> None:
    job_id = running_sleeper(web, admin, "rpc-abandon")
    baseline = settled_threads(web.vq)
    request = {
        "id": 1,
        "method": "wait_change",
        "params": {"id": job_id, "timeout": 120, "since_state": "RUNNING"},
    }
    peers = []
    for _ in range(20):
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.connect(str(web.vq.root / "daemon.sock"))
        peer.sendall(json.dumps(request).encode() + b"\n")
        peers.append(peer)
    wait_until(lambda: daemon_threads(web.vq) >= baseline + 20, timeout=10)
    for peer in peers:
        peer.close()
    wait_until(lambda: daemon_threads(web.vq) <= baseline + 2, timeout=5)
    kill(web, job_id, admin)


def test_abandoned_http_waits_free_their_daemon_threads(web: Web, admin: dict[str, str]) -> None:
    job_id = running_sleeper(web, admin, "http-abandon")
    baseline = settled_threads(web.vq)
    url = urlsplit(web.base_url)
    head = (
        f"GET /api/v1/jobs/{job_id}/wait?timeout=120&since_state=RUNNING HTTP/1.1\r\n"
        f"Host: {url.netloc}\r\nAuthorization: {admin['Authorization']}\r\n\r\n"
    ).encode()
    clients = []
    for _ in range(20):
        client = socket.create_connection((url.hostname or "127.0.0.1", url.port or 80))
        client.sendall(head)
        clients.append(client)
    wait_until(lambda: daemon_threads(web.vq) >= baseline + 20, timeout=10)
    started = time.monotonic()
    for client in clients:
        client.close()
    wait_until(lambda: daemon_threads(web.vq) <= baseline + 2, timeout=6)
    assert time.monotonic() - started < 6
    # the server still answers a wait normally afterwards
    quick = web.http.get(
        f"/api/v1/jobs/{job_id}/wait", params={"timeout": 0.2}, headers=admin
    ).json()
    assert quick["timed_out"] and quick["state"] == "RUNNING"
    kill(web, job_id, admin)


def gz_tar(*files: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def uploads_left(vq: Vq) -> list[str]:
    directory = vq.root / "uploads"
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_uploads_are_capped_by_what_they_unpack_to(web: Web) -> None:
    admin = web.admin()
    web.config_dir.mkdir(parents=True, exist_ok=True)
    (web.config_dir / "config.toml").write_text(
        "[web]\nupload_max_unpacked_bytes = 100000\nupload_max_members = 5\n"
    )
    headers = {**admin, "Content-Type": "application/gzip"}
    bomb = gz_tar(("zeros.bin", b"\0" * 200_000))
    assert len(bomb) < 2000  # tiny on the wire, under upload_max_bytes by far
    answer = web.http.post("/api/v1/uploads", content=bomb, headers=headers)
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["code"] == "too-large" and "100000" in error["message"]
    assert "upload_max_unpacked_bytes" in error["message"]
    many = gz_tar(*((f"f{i}.txt", b"x") for i in range(6)))
    crowded = web.http.post("/api/v1/uploads", content=many, headers=headers)
    assert crowded.status_code == 413 and "upload_max_members" in crowded.text
    assert uploads_left(web.vq) == []
    fits = gz_tar(("zeros.bin", b"\0" * 100_000))
    assert web.http.post("/api/v1/uploads", content=fits, headers=headers).status_code == 201


def test_racing_first_submits_of_one_key_are_charged_once(web: Web) -> None:
    web.vq.start_daemon()
    made = web.vq.json(
        "web", "token", "create", "racer", "--scope", "read,submit", "--max-jobs-per-day", "3"
    )
    headers = {"Authorization": f"Bearer {made['token']}"}
    body = {"command": ["true"], "idempotency_key": "one-intent"}
    answers: list[httpx.Response] = []
    lock = threading.Lock()
    gate = threading.Barrier(10)

    def one() -> None:
        with httpx.Client(base_url=web.base_url, timeout=60) as client:
            gate.wait(10)
            answer = client.post("/api/v1/jobs", json=body, headers=headers)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=one) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 9 + [201], [a.text for a in answers]
    assert len({a.json()["id"] for a in answers}) == 1
    usage = json.loads((web.config_dir / "web-token-usage.json").read_text())
    assert usage["days"][made["id"]]["count"] == 1
    for key in ("second", "third"):  # the quota still has room for exactly two more
        assert (
            web.http.post(
                "/api/v1/jobs", json={**body, "idempotency_key": key}, headers=headers
            ).status_code
            == 201
        )
    over = web.http.post("/api/v1/jobs", json={**body, "idempotency_key": "4th"}, headers=headers)
    assert over.status_code == 429


def test_inline_files_are_capped_by_count_too(web: Web) -> None:
    admin = web.admin()
    web.config_dir.mkdir(parents=True, exist_ok=True)
    (web.config_dir / "config.toml").write_text("[web]\nupload_max_members = 3\n")
    files = {f"f{i}": "" for i in range(4)}  # empty files: tiny body, four inodes
    body = {"command": ["true"], "idempotency_key": "many", "inputs": {"files": files}}
    answer = web.http.post("/api/v1/jobs", json=body, headers=admin)
    assert answer.status_code == 413, answer.text
    assert "upload_max_members" in answer.json()["error"]["message"]
    uploads = web.vq.root / "uploads"
    assert not uploads.exists() or list(uploads.iterdir()) == []
    del files["f3"]
    assert web.http.post("/api/v1/jobs", json=body, headers=admin).status_code == 201
