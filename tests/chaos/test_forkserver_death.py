"""The fork server dies with a launch in flight: the job must not be FAILED while it runs.

Found with the chaos harness (``ChaosPlan(forkserver_only_kills=150)``, seed 9: 18
"launch failed" jobs, 3 of which had really run to the end with exit marker ``0``).
When the server is killed after it forked the collector but before its ``launched``
reply left, the launch is answered with the error "the fork server exited" and
``Dispatcher.apply_launch`` records FAILED "launch failed" — while the command runs on,
unsupervised, outside the job budget, and later writes exit marker 0.

The forkserver client itself documents that such an outcome is unknown (the job "may or
may not be running"); a durable exit marker or a live group decides it, as on restart
(§4.1 item 6, §4.7). Expected here: the command ran once and exited 0, so COMPLETED.

strace makes the window deterministic: it injects SIGKILL into the fork server at its
first ``write`` — the ``launched`` reply, sent after the collector called ``setsid()``.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.chaos.tracing import kill_at_syscall, needs_strace
from tests.conftest import Vq, wait_until

TERMINAL = {"COMPLETED", "FAILED", "KILLED", "ABORTED_BY_QUEUE"}


def _children(ppid: int, needle: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == ppid and stat[0] not in (b"Z", b"X") and needle.encode() in cmdline:
            found.append(int(entry))
    return found


@needs_strace
def test_launch_in_flight_when_fork_server_dies(vq: Vq, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    vq.start_daemon()
    daemon = vq.daemon_pid()
    assert daemon is not None
    (server,) = wait_until(lambda: _children(daemon, "_forkserver.py"))
    with kill_at_syscall(server, "write", tmp_path) as tracer:
        job = vq.submit("--", "sh", "-c", f"echo ran >> {runs}")
        assert tracer.wait(timeout=30) == 0  # the server died at its `launched` reply
    marker = vq.root / "jobs" / job / "_vq" / "exit-code"
    wait_until(marker.exists, timeout=20)  # the collector was forked and ran the command
    assert marker.read_text() == "0\n"
    assert runs.read_text() == "ran\n"
    wait_until(lambda: vq.state(job) in TERMINAL, timeout=20)
    spec = vq.spec(job)
    assert (spec["state"], spec["exit_code"]) == ("COMPLETED", 0), spec["failure_reason"]
