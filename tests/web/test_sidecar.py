"""``vq daemon start --web``: the daemon owns the console, restarts it, and stops it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import httpx

from tests.conftest import Vq, wait_until
from tests.web.conftest import free_port
from vq._proc_stat import is_alive

STARTED = re.compile(r"web console started \(pid (\d+)\)")


def _children(vq: Vq) -> list[int]:
    log = (vq.root / "daemon.log").read_text(errors="replace")
    return [int(pid) for pid in STARTED.findall(log)]


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/health/ready", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def test_the_daemon_restarts_and_stops_its_web_child(vq: Vq) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    vq.start_daemon("--web", "--web-port", str(port))
    wait_until(lambda: _ready(url), timeout=30)
    [first] = _children(vq)
    assert is_alive(first)
    assert httpx.get(url + "/api/v1/queue").json()["daemon"]["running"] is True

    os.kill(first, signal.SIGKILL)
    wait_until(lambda: len(_children(vq)) == 2, timeout=30)
    second = _children(vq)[1]
    assert second != first
    wait_until(lambda: _ready(url), timeout=30)
    log = (vq.root / "daemon.log").read_text()
    assert f"web console (pid {first}) exited with signal SIGKILL" in log

    vq.stop_daemon()
    assert not is_alive(first) and not is_alive(second)
    assert not _ready(url)


def test_a_killed_daemon_leaves_no_console(vq: Vq) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    vq.start_daemon("--web", "--web-port", str(port))
    wait_until(lambda: _ready(url), timeout=30)
    [child] = _children(vq)
    daemon = vq.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not is_alive(child), timeout=15)  # the child watches its parent


def test_web_options_are_checked_before_starting(vq: Vq) -> None:
    remote = vq.run("daemon", "start", "--web", "--web-host", "0.0.0.0", check=False)
    assert remote.returncode == 2 and "non-loopback" in remote.stderr
    orphan = vq.run("daemon", "start", "--web-port", "9", check=False)
    assert orphan.returncode == 2 and "--web" in orphan.stderr
    assert vq.daemon_pid() is None


def test_the_console_refuses_a_remote_bind_without_allow_remote() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vq.web", "--host", "0.0.0.0", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--allow-remote" in result.stderr
