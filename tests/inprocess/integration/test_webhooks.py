"""Terminal webhooks (§6.2) against a real daemon and a real local HTTP receiver."""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import Vq, wait_until
from tests.webhook_support import (
    TOKEN,
    Receiver,
    _config,
    _daemon_log,
    receiver_fixture,  # noqa: F401 (the `receiver` fixture)
)
from vq.config.notifications import NotificationSettings
from vq.daemon.notify import display_url, resolve_webhook_url, summary_line
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import ConfigError

HOST = socket.gethostname()


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


# --- delivery ------------------------------------------------------------------------


def test_state_filter_posts_only_failures_with_the_full_payload(
    vq: Vq, receiver: Callable[..., Receiver]
) -> None:
    server = receiver()
    vq.env["VQ_TEST_HOOK"] = server.url
    _config(
        vq,
        '[notifications]\nwebhook_url = "env:VQ_TEST_HOOK"\n'
        'notify_on_states = ["FAILED", "failed", "Killed"]\n',
    )
    vq.start_daemon()
    failed = vq.submit("--job-name", "scf", "--", "sh", "-c", "exit 3")
    vq.wait_state(failed, "FAILED")
    done = vq.submit("--job-name", "ok", "--", "true")
    vq.wait_state(done, "COMPLETED")
    # A later failure is the barrier: one thread delivers in order, so once its POST has
    # arrived, a POST for the earlier COMPLETED job would have arrived before it.
    signaled = vq.submit("--", "sh", "-c", "kill -KILL $$")
    vq.wait_state(signaled, "FAILED")
    wait_until(lambda: len(server.bodies()) >= 2)
    bodies = server.bodies()
    assert [b["job"]["id"] for b in bodies] == [failed, signaled]

    spec = vq.spec(failed)
    first = bodies[0]
    summary = f"vq job {failed} (scf) FAILED: exited with code 3 on {HOST}"
    assert first["text"] == first["content"] == summary
    job = dict(first["job"])
    for key in ("submitted_at", "started_at", "finished_at"):
        assert _moment(job.pop(key)) == _moment(spec[key]), key
    assert job == {
        "id": failed,
        "name": "scf",
        "state": "FAILED",
        "exit_code": 3,
        "failure_reason": "exited with code 3",
        "command": ["sh", "-c", "exit 3"],
        "host": HOST,
    }
    assert "killed by SIGKILL (exit code 137)" in bodies[1]["text"]
    post = server.posts[0]
    assert post["path"] == f"/hooks/{TOKEN}"
    assert post["headers"]["Content-Type"] == "application/json"

    log = _daemon_log(vq)
    assert "webhook notifications to http://127.0.0.1 for failed, killed" in log
    assert TOKEN not in log and server.url not in log


def test_without_a_filter_every_ended_job_posts(vq: Vq, receiver: Callable[..., Receiver]) -> None:
    server = receiver()
    _config(vq, f'[notifications]\nwebhook_url = "{server.url}"\n')
    vq.start_daemon()
    failed = vq.submit("--", "sh", "-c", "exit 2")
    done = vq.submit("--", "true")
    vq.wait_state(failed, "FAILED")
    vq.wait_state(done, "COMPLETED")
    wait_until(lambda: len(server.bodies()) >= 2)
    states = {b["job"]["id"]: b["job"]["state"] for b in server.bodies()}
    assert states == {failed: "FAILED", done: "COMPLETED"}
    completed = next(b for b in server.bodies() if b["job"]["id"] == done)
    assert completed["text"] == f"vq job {done} COMPLETED on {HOST}"
    assert TOKEN not in _daemon_log(vq)


def test_an_error_status_is_logged_and_dropped(vq: Vq, receiver: Callable[..., Receiver]) -> None:
    server = receiver(status=500)
    _config(vq, f'[notifications]\nwebhook_url = "{server.url}"\n')
    vq.start_daemon()
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")
    wait_until(lambda: f"for job {job} answered HTTP 500" in _daemon_log(vq))
    assert len(server.bodies()) == 1  # no retry
    assert vq.state(job) == "COMPLETED"
    assert TOKEN not in _daemon_log(vq)


# --- configuration -------------------------------------------------------------------


# --- pure parts ----------------------------------------------------------------------


def test_secret_references_resolve_without_echoing_the_value(tmp_path: Path) -> None:
    url = f"https://hooks.example.org/services/{TOKEN}"
    settings = NotificationSettings(webhook_url="env:HOOK")
    assert resolve_webhook_url(settings, {"HOOK": url}) == url
    with pytest.raises(ConfigError, match="HOOK is not set") as info:
        resolve_webhook_url(settings, {})
    assert info.value.exit_code == 9
    with pytest.raises(ConfigError, match="not an http") as info:
        resolve_webhook_url(settings, {"HOOK": f"ftp://x/{TOKEN}"})
    assert TOKEN not in info.value.message
    missing = NotificationSettings(webhook_url=f"file:{tmp_path}/nope")
    with pytest.raises(ConfigError, match="cannot read the secret file"):
        resolve_webhook_url(missing, {})
    assert resolve_webhook_url(NotificationSettings(), {}) == ""
    assert display_url(url) == "https://hooks.example.org"


def test_summary_names_signals_and_reasons() -> None:
    now = datetime(2026, 5, 1, tzinfo=UTC)
    spec = JobSpec(
        id="0123456789ab",
        command=["x"],
        cpus=1,
        submitted_at=now,
        state=JobState.TIME_EXCEEDED,
        exit_code=143,
        failure_reason="exceeded its wall time\nof 60s",
    )
    assert summary_line(spec, "node7") == (
        "vq job 0123456789ab TIME_EXCEEDED: exceeded its wall time of 60s; "
        "killed by SIGTERM (exit code 143) on node7"
    )
