"""A collector killed *after* it wrote the exit marker: the marker must decide the outcome.

Found by the chaos run (seed 22): a harness ``kill -9`` landed on a collector between its
``_vq/exit-code`` write and its exit. The command had exited 0 and the marker said ``0``,
yet the daemon recorded FAILED, "the command's exit code is unknown". With a retry
policy the same path requeues a job that already succeeded, so it runs a second time.

The exit marker is the return-code authority (§4.6, §4.7; the orphan path of the same
supervisor already reads it): a collector killed by a signal only loses the outcome when
no valid marker exists (§4.4).

The window is microseconds wide, so the test makes it deterministic with strace: it
injects SIGKILL into the collector at its ``exit_group`` syscall, i.e. after the marker
was written and fsynced. Skipped where strace or ptrace is unavailable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.tracing import kill_at_syscall, needs_strace
from tests.conftest import Vq, wait_until


@needs_strace
@pytest.mark.parametrize("retry", [0, 2])
def test_collector_killed_after_marker_keeps_the_recorded_exit_code(
    vq: Vq, tmp_path: Path, retry: int
) -> None:
    flag, runs = tmp_path / "go", tmp_path / "runs"
    vq.start_daemon()
    job = vq.submit(
        "--retry",
        str(retry),
        "--",
        "sh",
        "-c",
        f"echo run >> {runs}; while [ ! -e {flag} ]; do sleep 0.02; done",
    )
    collector = wait_until(lambda: vq.spec(job).get("pgid"))
    with kill_at_syscall(collector, "exit_group", tmp_path) as tracer:
        flag.touch()
        assert tracer.wait(timeout=30) == 0
    # The collector wrote its marker, then died by SIGKILL at exit_group.
    assert "killed by SIGKILL" in (tmp_path / "strace.log").read_text()
    assert (vq.root / "jobs" / job / "_vq" / "exit-code").read_text() == "0\n"
    wait_until(lambda: vq.state(job) != "RUNNING", timeout=20)
    spec = vq.spec(job)
    assert runs.read_text() == "run\n"
    assert (spec["state"], spec["exit_code"], spec["retry_count"]) == ("COMPLETED", 0, 0), spec[
        "failure_reason"
    ]
