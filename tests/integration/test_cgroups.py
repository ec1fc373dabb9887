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
#: A systemd-run that passes the probe but cannot create any job's scope.
FAILING_SYSTEMD_RUN = """#!/bin/sh
case "$*" in
  *--unit=vq-job-*) echo "Failed to start transient scope unit: Access denied" >&2; exit 1 ;;
esac
exec true
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


def _fake_systemd(vq: Vq, tmp_path: Path, systemd_run: str) -> Path:
    """Put fake ``systemd-run``/``systemctl`` first on the daemon's PATH; their log."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    log = tmp_path / "systemd.log"
    for name, text in (("systemd-run", systemd_run), ("systemctl", FAKE_SYSTEMCTL)):
        path = bindir / name
        path.write_text(text.format(log=log))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    vq.env["PATH"] = f"{bindir}:{vq.env['PATH']}"
    return log


def test_scope_mode_wraps_jobs_and_stops_scopes(vq: Vq, tmp_path: Path) -> None:
    log = _fake_systemd(vq, tmp_path, FAKE_SYSTEMD_RUN)
    vq.start_daemon()
    assert vq.json("daemon", "status")["cgroup_mode"] == "scope"
    job = vq.submit("--cpus", "2", "--mem-mb", "100", "--", "sh", "-c", "echo inside")
    vq.wait_state(job, "COMPLETED")
    assert vq.run("logs", job).stdout == "inside\n"
    lines = wait_until(lambda: [ln for ln in log.read_text().splitlines() if job in ln], timeout=10)
    launch = next(ln for ln in lines if ln.startswith("systemd-run"))
    assert f"--unit=vq-job-{job}.scope" in launch
    assert "-p MemoryMax=100M -p MemoryHigh=90M -p CPUQuota=200% -- /bin/sh -c" in launch
    assert launch.endswith(" sh -c echo inside")
    wait_until(lambda: f"systemctl --user stop vq-job-{job}.scope" in log.read_text(), timeout=10)


def test_a_scope_that_cannot_be_created_fails_dispatch_without_using_retries(
    vq: Vq, tmp_path: Path
) -> None:
    _fake_systemd(vq, tmp_path, FAILING_SYSTEMD_RUN)
    vq.start_daemon()
    assert vq.json("daemon", "status")["cgroup_mode"] == "scope"
    job = vq.submit("--retry", "2", "--", "sh", "-c", "echo never >&2; exit 0")
    vq.wait_state(job, "FAILED", "COMPLETED", timeout=30)
    spec = vq.spec(job)
    assert spec["state"] == "FAILED"
    assert spec["retry_count"] == 0
    assert spec["failure_reason"] == (
        f"launch failed: the job's cgroup scope vq-job-{job}.scope could not be created "
        "(systemd-run's message is in the job's stderr)"
    )
    assert "Access denied" in vq.run("logs", job, "--stderr").stdout
