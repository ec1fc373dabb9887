"""Job scopes on a host that has them (§4.4, §4.3, §4.7), with real cgroup v1 files.

PID 1 here is not systemd, so fake ``systemd-run``/``systemctl`` executables play it —
but they place the job in *real* cgroups: each scope is a directory created under this
machine's writable v1 ``memory``, ``cpuacct`` and ``pids`` hierarchies, and the job's
processes really run in it. The daemon code under test reads the kernel's own counters.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Vq, wait_until

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "cpuacct", "pids")


def _v1_writable() -> bool:
    probe = ROOT / "pids" / f"vq-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return all((ROOT / c / "cgroup.procs").exists() for c in CONTROLLERS)


pytestmark = pytest.mark.skipif(not _v1_writable(), reason="needs writable cgroup v1 hierarchies")

#: Creates the unit's cgroup in every controller, joins it, then runs the command.
FAKE_SYSTEMD_RUN = """#!/bin/sh
echo "systemd-run $*" >> "{log}"
unit=
while [ $# -gt 0 ]; do
  case "$1" in
    --unit=*) unit="${{1#--unit=}}"; shift ;;
    --) shift; break ;;
    -p) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ -n "$unit" ]; then
  for c in {controllers}; do mkdir -p "{root}/$c/{prefix}/$unit"; done
  for c in {controllers}; do echo $$ > "{root}/$c/{prefix}/$unit/cgroup.procs"; done
fi
exec "$@"
"""
#: ``show``: the unit's cgroup, MainPID (``<log>.mainpid`` overrides the first task) and
#: state; ``stop``: kill its tasks and remove it, unless ``<log>.nostop`` exists.
FAKE_SYSTEMCTL = """#!/bin/sh
echo "systemctl $*" >> "{log}"
for unit; do :; done
dir="{root}/pids/{prefix}/$unit"
case "$*" in
  *" show "*)
    main=$(head -n 1 "$dir/cgroup.procs" 2>/dev/null)
    if [ -n "$main" ]; then
      [ -f "{log}.mainpid" ] && main=$(cat "{log}.mainpid")
      echo "ControlGroup=/{prefix}/$unit"; echo "MainPID=$main"; echo "ActiveState=active"
    elif [ -d "$dir" ]; then
      echo "ControlGroup=/{prefix}/$unit"; echo "MainPID=0"; echo "ActiveState=inactive"
    else
      echo "ControlGroup="; echo "MainPID=0"; echo "ActiveState=inactive"
    fi ;;
  *" stop "*)
    [ -f "{log}.nostop" ] && exit 0
    [ -d "$dir" ] && for p in $(cat "$dir/cgroup.procs"); do kill -9 "$p" 2>/dev/null; done
    for i in 1 2 3 4 5 6 7 8 9 10; do
      gone=1
      for c in {controllers}; do rmdir "{root}/$c/{prefix}/$unit" 2>/dev/null || \\
        [ ! -d "{root}/$c/{prefix}/$unit" ] || gone=0; done
      [ $gone = 1 ] && break
      sleep 0.1
    done ;;
esac
exit 0
"""


def _tasks(directory: Path) -> list[int]:
    try:
        return [int(x) for x in (directory / "cgroup.procs").read_text().split()]
    except OSError:
        return []


@pytest.fixture
def scopes(vq: Vq, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """Fake systemd on the daemon's PATH over real cgroups; (its log, the cgroup prefix)."""
    prefix = f"vq-test-{uuid.uuid4().hex[:8]}"
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    log = tmp_path / "systemd.log"
    values = {"log": log, "root": ROOT, "prefix": prefix, "controllers": " ".join(CONTROLLERS)}
    for name, text in (("systemd-run", FAKE_SYSTEMD_RUN), ("systemctl", FAKE_SYSTEMCTL)):
        path = bindir / name
        path.write_text(text.format(**values))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    vq.env["PATH"] = f"{bindir}:{vq.env['PATH']}"
    yield log, prefix
    vq.stop_daemon()
    for controller in CONTROLLERS:
        top = ROOT / controller / prefix
        units = [p for p in top.iterdir() if p.is_dir()] if top.exists() else []
        for unit in units:
            for pid in _tasks(unit):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            wait_until(lambda unit=unit: not _tasks(unit), timeout=10)
            unit.rmdir()
        if top.exists():
            top.rmdir()


def _samples(vq: Vq, job: str) -> list[dict[str, object]]:
    path = vq.root / "jobs" / job / "_vq" / "samples.jsonl"
    try:
        return [json.loads(line) for line in path.read_text().splitlines()]
    except OSError:
        return []


def test_samples_read_the_named_scope_and_the_receipt_counts_its_tasks(
    vq: Vq, scopes: tuple[Path, str]
) -> None:
    _, prefix = scopes
    vq.start_daemon()
    assert vq.json("daemon", "status")["cgroup_mode"] == "scope"
    job = vq.submit(
        "--",
        "sh",
        "-c",
        "sleep 6 & sleep 6 & wait; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
    )
    vq.wait_state(job, "COMPLETED", timeout=60)
    # The first scan may come before systemd-run made the scope: then the group walk.
    samples = [s for s in _samples(vq, job) if s["cgroup_lookup"] == "scope"]
    assert samples, _samples(vq, job)
    first = samples[0]
    assert first["cgroup_path"] == f"/{prefix}/vq-job-{job}.scope"
    assert first["cpu_time_source"] == "cgroup-cpuacct.usage"
    receipt = json.loads((vq.root / "jobs" / job / "_vq" / "resource-usage.json").read_text())
    assert receipt["process_count"] == 3  # the shell and its two sleeps, at most at once
    assert "pids.peak" in receipt["semantics"]["process_count"]


def test_without_a_scope_samples_walk_the_process_group(vq: Vq) -> None:
    vq.start_daemon()
    job = vq.submit("--", "sleep", "1.5")
    vq.wait_state(job, "COMPLETED", timeout=60)
    first = _samples(vq, job)[0]
    assert first["cgroup_lookup"] == "process-group"
    assert first["cpu_time_source"] == "proc-stat-process-group"
    assert first["cgroup_path"] is None
    receipt = json.loads((vq.root / "jobs" / job / "_vq" / "resource-usage.json").read_text())
    assert receipt["process_count"] is None


def _group_members(pgid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def test_without_a_scope_samples_read_the_cgroup_the_job_runs_in(vq: Vq) -> None:
    """No named scope (direct mode), but the job's processes sit in a cgroup of their own
    (as a site's wrapper or a login session may put them): samples read that cgroup."""
    vq.start_daemon()
    assert vq.json("daemon", "status")["cgroup_mode"] == "direct"
    group = f"vq-test-{uuid.uuid4().hex[:8]}"
    dirs = [ROOT / controller / group for controller in CONTROLLERS]
    job = vq.submit("--", "sh", "-c", "while :; do sleep 0.05; done")
    try:
        pgid = wait_until(lambda: vq.spec(job)["pgid"])
        members = wait_until(lambda: len(_group_members(pgid)) >= 2 and _group_members(pgid))
        for directory in dirs:
            directory.mkdir()
            for pid in members:  # a short-lived sleep may be gone; its shell's next is in
                with contextlib.suppress(ProcessLookupError):
                    (directory / "cgroup.procs").write_text(str(pid))
        moved = wait_until(
            lambda: [s for s in _samples(vq, job) if s["cgroup_lookup"] == "process-cgroup"],
            timeout=30,
        )
        sample = moved[0]
        assert sample["cgroup_path"] == f"/{group}"
        assert sample["cpu_time_source"] == "cgroup-cpuacct.usage"
        assert sample["sample_pgid"] == pgid
        assert sample["rss_mb"] is not None and sample["cpu_time_seconds"] is not None
        before = [s for s in _samples(vq, job) if s["cgroup_lookup"] != "process-cgroup"]
        assert before and all(s["cgroup_lookup"] == "process-group" for s in before)
    finally:
        vq.run("kill", job, check=False)
        for directory in dirs:
            if directory.exists():
                wait_until(lambda d=directory: not _tasks(d), timeout=20)
                directory.rmdir()


def _leak(prefix: str, job: str) -> subprocess.Popen[bytes]:
    """A process left in a scope of the job's name, as an earlier attempt would leave it."""
    leaked = subprocess.Popen(["sleep", "300"], start_new_session=True)
    for controller in CONTROLLERS:
        unit = ROOT / controller / prefix / f"vq-job-{job}.scope"
        unit.mkdir(parents=True, exist_ok=True)
        (unit / "cgroup.procs").write_text(str(leaked.pid))
    return leaked


def test_a_leaked_scope_of_the_same_name_is_stopped_before_launch(
    vq: Vq, scopes: tuple[Path, str]
) -> None:
    log, prefix = scopes
    vq.start_daemon()
    vq.run("daemon", "drain")
    job = vq.submit("--", "true")
    leaked = _leak(prefix, job)
    vq.run("daemon", "undrain")
    vq.wait_state(job, "COMPLETED", timeout=60)
    assert leaked.wait(timeout=10) == -signal.SIGKILL
    lines = log.read_text().splitlines()
    stop = lines.index(f"systemctl --user stop vq-job-{job}.scope")
    launch = next(i for i, ln in enumerate(lines) if f"--unit=vq-job-{job}.scope" in ln)
    assert stop < launch


def test_a_leaked_scope_that_will_not_stop_refuses_the_launch(
    vq: Vq, scopes: tuple[Path, str]
) -> None:
    log, prefix = scopes
    vq.start_daemon()
    vq.run("daemon", "drain")
    job = vq.submit("--", "true")
    leaked = _leak(prefix, job)
    Path(f"{log}.nostop").touch()
    try:
        vq.run("daemon", "undrain")
        assert vq.wait_state(job, "FAILED", timeout=60) == "FAILED"
        spec = vq.spec(job)
        assert "leftover cgroup scope" in spec["failure_reason"]
        assert f"main pid {leaked.pid}" in spec["failure_reason"]
        assert spec["retry_count"] == 0
    finally:
        leaked.kill()
        leaked.wait()


def test_a_scope_main_pid_outside_the_job_prevents_reattach(
    vq: Vq, scopes: tuple[Path, str]
) -> None:
    log, _ = scopes
    vq.start_daemon()
    job = vq.submit("--", "sleep", "300")
    pgid = wait_until(lambda: vq.spec(job)["pgid"])
    daemon = vq.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{daemon}").exists() or _zombie(daemon), timeout=15)
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        Path(f"{log}.mainpid").write_text(str(stranger.pid))
        vq.start_daemon()
        spec = vq.spec(job)
        assert spec["state"] == "ABORTED_BY_QUEUE"
        assert f"main pid {stranger.pid}" in spec["failure_reason"]
        wait_until(lambda: not _group_alive(pgid), timeout=15)
        assert stranger.poll() is None, "a process that is not the job's was signalled"
    finally:
        stranger.kill()
        stranger.wait()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


def _group_alive(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False
