"""cgroup mode (§5.2): the real probe fails here (no systemd); a fake proves the scope path.

PID 1 on this machine is not systemd, so `systemd-run --user --scope` cannot work: the
real probe must fail cleanly and the daemon must fall back to direct launch. The scope
path is exercised through small fake `systemd-run`/`systemctl` executables on PATH,
driven by the real daemon code.
"""

from __future__ import annotations

import stat
from pathlib import Path

from tests.conftest import Vq, wait_until

FAKE_SYSTEMD_RUN = """#!/bin/sh
echo "systemd-run $*" >> "{log}"
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; exec "$@" ;;
    -p) shift 2 ;;
    -*) shift ;;
    *) exec "$@" ;;
  esac
done
"""
FAKE_SYSTEMCTL = """#!/bin/sh
echo "systemctl $*" >> "{log}"
"""


def test_real_probe_fails_cleanly_and_falls_back(vq: Vq) -> None:
    vq.start_daemon()
    status = vq.json("daemon", "status")
    assert status["cgroup_mode"] == "direct"
    assert "systemd-run --user --scope failed" in status["cgroup_reason"]
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")


def test_scope_mode_wraps_jobs_and_stops_scopes(vq: Vq, tmp_path: Path) -> None:
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    log = tmp_path / "systemd.log"
    for name, text in (("systemd-run", FAKE_SYSTEMD_RUN), ("systemctl", FAKE_SYSTEMCTL)):
        path = bindir / name
        path.write_text(text.format(log=log))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    vq.env["PATH"] = f"{bindir}:{vq.env['PATH']}"
    vq.start_daemon()
    assert vq.json("daemon", "status")["cgroup_mode"] == "scope"
    job = vq.submit("--cpus", "2", "--mem-mb", "100", "--", "sh", "-c", "echo inside")
    vq.wait_state(job, "COMPLETED")
    assert vq.run("logs", job).stdout == "inside\n"
    lines = wait_until(lambda: [ln for ln in log.read_text().splitlines() if job in ln], timeout=10)
    launch = next(ln for ln in lines if ln.startswith("systemd-run"))
    assert f"--unit=vq-job-{job}.scope" in launch
    assert "-p MemoryMax=100M -p MemoryHigh=90M -p CPUQuota=200% -- sh -c echo inside" in launch
    wait_until(lambda: f"systemctl --user stop vq-job-{job}.scope" in log.read_text(), timeout=10)
