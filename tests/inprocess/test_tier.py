"""The in-process tier's own guarantees: the daemon on a thread serves the CLI and the app
over its real socket, a test may drive its loop one pass at a time, and a stop leaves no
thread behind."""

from __future__ import annotations

import threading
from collections.abc import Callable
from subprocess import CompletedProcess

import pytest
from starlette.testclient import TestClient

from tests.conftest import wait_until
from tests.inproc_support import InprocDaemon, InprocVq


def test_the_cli_in_process_reaches_the_daemon_on_a_thread(
    inproc_daemon: InprocDaemon, cli: Callable[..., CompletedProcess[str]]
) -> None:
    submitted = cli("submit", "--", "true")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()

    def ended() -> bool:
        return '"COMPLETED"' in cli("status", job_id, "--json").stdout

    wait_until(ended)
    assert inproc_daemon.running


def test_the_app_in_process_answers_from_the_daemon(
    inproc_daemon: InprocDaemon, web_client: TestClient
) -> None:
    assert web_client.get("/health/live").status_code == 200
    ready = web_client.get("/health/ready")
    assert ready.status_code == 200, ready.text


def test_a_test_drives_the_loop_one_pass_at_a_time(
    daemon_thread: InprocDaemon, vq: InprocVq
) -> None:
    daemon = daemon_thread.compose()
    daemon.acquire()
    try:
        assert daemon.start()
        job_id = vq.submit("--", "true")  # written straight to disk: no daemon answers
        daemon.parts.index.refresh_names()  # what a pass does every rescan interval

        def ticked_to_the_end() -> bool:
            daemon.tick()
            return vq.state(job_id) == "COMPLETED"

        wait_until(ticked_to_the_end)
    finally:
        daemon.shutdown()


def test_a_stop_joins_the_loop_and_every_thread_it_started(daemon_thread: InprocDaemon) -> None:
    before = set(threading.enumerate())
    daemon_thread.start()
    assert any(t.name == "vq-rpc" for t in threading.enumerate())
    daemon_thread.stop()
    assert set(threading.enumerate()) <= before


def test_process_verbs_are_refused_in_process(vq: InprocVq) -> None:
    for verb in ("start", "stop", "run"):
        with pytest.raises(AssertionError, match="forks or signals"):
            vq.run("daemon", verb)


def test_a_crash_point_is_refused_before_it_can_kill_the_test_process(vq: InprocVq) -> None:
    vq.env["VQ_TEST_FAULT"] = "fetch_after_copy"
    with pytest.raises(AssertionError, match="SIGKILL the test process"):
        vq.run("list")
    with pytest.raises(AssertionError, match="SIGKILL the test process"):
        vq.start_daemon()
