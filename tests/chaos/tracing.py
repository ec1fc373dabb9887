"""Stopping a process at an exact system call with strace, for the chaos reproductions.

strace is a test dependency (scripts/install-test-deps.sh installs it). Without it the
tests skip on a developer machine and fail in CI, where a missing tool must not pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import wait_until

needs_strace = pytest.mark.skipif(
    shutil.which("strace") is None and not os.environ.get("CI"),
    reason="needs strace (installed by scripts/install-test-deps.sh)",
)


def tracer_pid(pid: int) -> int:
    """The pid tracing ``pid`` (0 when none), from /proc/<pid>/status."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@contextmanager
def kill_at_syscall(pid: int, syscall: str, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Attach strace to ``pid`` so its next ``syscall`` is replaced by SIGKILL.

    Yields once strace is attached; the body triggers the call and may wait for the
    tracer. The tracer is killed on the way out whatever happened.
    """
    trace_err = workdir / "strace.err"
    argv = ["strace", "-p", str(pid), "-o", str(workdir / "strace.log")]
    argv += ["-e", f"trace={syscall}", "-e", f"inject={syscall}:signal=SIGKILL"]
    with open(trace_err, "wb") as err:
        tracer = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    try:
        try:
            wait_until(lambda: tracer_pid(pid) or tracer.poll() is not None, timeout=10)
        except AssertionError:
            pytest.fail("strace did not attach in time")
        if tracer.poll() is not None:
            pytest.fail(f"cannot ptrace here: {trace_err.read_text()[-300:]}")
        yield tracer
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
