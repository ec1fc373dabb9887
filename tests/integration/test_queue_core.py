"""The local queue core end to end: real daemon, real `vq` subprocesses, real jobs."""

from __future__ import annotations

import os

from tests.conftest import Vq


def test_second_daemon_refused_clearly(vq: Vq) -> None:
    vq.start_daemon()
    again = vq.run("daemon", "start", check=False)
    assert again.returncode == 6
    assert again.stderr.startswith("vq: error: a vq daemon already runs")
    assert "hint:" in again.stderr
    status = vq.json("daemon", "status")
    assert status["running"] is True and status["pid"] == vq.daemon_pid()
    assert oct(os.stat(vq.root / "daemon.sock").st_mode & 0o777) == "0o600"
    vq.stop_daemon()
    stopped = vq.run("daemon", "status", check=False)
    assert stopped.returncode == 5 and "vq: error:" in stopped.stderr
