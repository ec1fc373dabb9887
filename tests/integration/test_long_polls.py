"""Long-polls are bounded: the daemon serves at most ``[daemon] max_connections``
connections (one thread each) and answers the rest "daemon busy" at once; a stalled
daemon-socket peer is dropped; the console caps waits per credential and per address
(503 + Retry-After) and closes connections that never finish their request head."""

from __future__ import annotations

import json
import socket
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.conftest import Vq, wait_until

CAP = 6


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def _wait_request(job: str, request_id: int) -> bytes:
    message = {"id": request_id, "method": "wait_change", "params": {"id": job, "timeout": 60}}
    return json.dumps(message).encode() + b"\n"


@pytest.fixture
def capped(vq: Vq) -> Vq:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text(f"[daemon]\nmax_connections = {CAP}\n")
    return vq


def test_waits_over_the_daemon_cap_are_refused_and_threads_stay_bounded(capped: Vq) -> None:
    vq = capped
    vq.start_daemon()
    pid = vq.daemon_pid()
    assert pid is not None
    job = vq.submit("--not-before", "1h", "--", "true")  # stays PENDING: every wait blocks
    baseline = _threads(pid)
    with ExitStack() as stack:
        conns = []
        for n in range(CAP * 4):
            sock = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            sock.settimeout(10)
            sock.connect(str(vq.root / "daemon.sock"))
            sock.sendall(_wait_request(job, n))
            conns.append(sock)
        refused = []
        for sock in conns[CAP:]:
            answer = json.loads(sock.makefile("rb").readline())
            refused.append(answer)
        assert all(a["error"]["type"] == "DaemonBusy" for a in refused), refused[:2]
        assert {a["id"] for a in refused} == set(range(CAP, CAP * 4))
        assert _threads(pid) <= baseline + CAP
        busy = vq.run("daemon", "admin-status", check=False)
        assert busy.returncode == 5, (busy.returncode, busy.stderr)
        assert busy.stderr.startswith(f"vq: error: the daemon is serving {CAP} connections")
        assert "Traceback" not in busy.stderr
    # The held waits were closed by their peers: the daemon serves again.
    wait_until(lambda: vq.run("daemon", "ping", check=False).returncode == 0, timeout=15)
    wait_until(lambda: _threads(pid) <= baseline + 1, timeout=15)
