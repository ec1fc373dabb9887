"""Terminal webhooks (§6.2) against a real daemon and a real local HTTP receiver."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
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


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- delivery ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["refused", "slow"])
def test_an_unreachable_receiver_never_delays_jobs(
    vq: Vq, receiver: Callable[..., Receiver], kind: str
) -> None:
    if kind == "slow":
        server = receiver(delay=10.0)
        url = server.url
    else:
        url = f"http://127.0.0.1:{_dead_port()}/hooks/{TOKEN}"
    _config(vq, f'[notifications]\nwebhook_url = "{url}"\n')
    vq.start_daemon()
    first = vq.submit("--", "true")
    vq.wait_state(first, "COMPLETED", timeout=10)
    if kind == "slow":  # its POST is now in flight and will hang for the 5 s timeout
        wait_until(lambda: len(server.bodies()) == 1)
    # A blocking notifier would hold the loop for the POST timeout (5 s) or the receiver's
    # 10 s; these jobs must dispatch and end well inside that.
    for _ in range(2):
        started = time.monotonic()
        job = vq.submit("--", "true")
        vq.wait_state(job, "COMPLETED", timeout=4)
        assert time.monotonic() - started < 4
    assert vq.run("daemon", "status").returncode == 0
    failure = f"webhook to http://127.0.0.1 failed for job {first}"
    wait_until(lambda: failure in _daemon_log(vq), timeout=20)
    if kind == "slow":
        assert "timed out" in _daemon_log(vq)
        started = time.monotonic()
        vq.run("daemon", "stop")  # later POSTs are queued behind the slow one
        assert time.monotonic() - started < 5
    assert TOKEN not in _daemon_log(vq)


# --- configuration -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("states", "words"),
    [('["failed", "runing"]', "'runing' is not a job state"), ('["pending"]', "not a terminal")],
)
def test_bad_state_names_refuse_the_daemon(vq: Vq, states: str, words: str) -> None:
    _config(vq, f"[notifications]\nnotify_on_states = {states}\n")
    started = vq.run("daemon", "start", check=False)
    assert started.returncode != 0
    assert "exited with code 9" in started.stderr and words in started.stderr
    ran = vq.run("daemon", "run", check=False)
    assert ran.returncode == 9
    assert "notifications.notify_on_states" in ran.stderr and words in ran.stderr
    assert vq.daemon_pid() is None


def test_file_secret_needs_mode_0600(
    vq: Vq, receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    server = receiver()
    secret = tmp_path / "webhook"
    secret.write_text(server.url + "\n")
    secret.chmod(0o644)
    _config(vq, f'[notifications]\nwebhook_url = "file:{secret}"\n')
    ran = vq.run("daemon", "run", check=False)
    assert ran.returncode == 9
    assert "mode 0644" in ran.stderr and f"hint: chmod 600 {secret}" in ran.stderr
    started = vq.run("daemon", "start", check=False)
    assert started.returncode != 0 and f"chmod 600 {secret}" in started.stderr

    secret.chmod(0o600)
    vq.start_daemon()
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")
    wait_until(lambda: [b["job"]["id"] for b in server.bodies()] == [job])
    assert TOKEN not in _daemon_log(vq) and TOKEN not in ran.stderr + started.stderr


def test_a_systemd_credential_is_the_webhook_url(
    vq: Vq, receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    """``credential:NAME`` reads ``$CREDENTIALS_DIRECTORY/NAME`` (systemd LoadCredential)
    in the daemon's environment; without that directory the daemon refuses to start."""
    server = receiver()
    _config(vq, '[notifications]\nwebhook_url = "credential:vq-webhook"\n')
    refused = vq.run("daemon", "start", check=False)
    assert refused.returncode != 0 and "CREDENTIALS_DIRECTORY" in refused.stderr
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "vq-webhook").write_text(server.url + "\n")
    (credentials / "vq-webhook").chmod(0o400)
    vq.env["CREDENTIALS_DIRECTORY"] = str(credentials)
    vq.start_daemon()
    job = vq.submit("--", "true")
    vq.wait_state(job, "COMPLETED")
    wait_until(lambda: [b["job"]["id"] for b in server.bodies()] == [job])
    assert TOKEN not in _daemon_log(vq) + refused.stderr


# --- pure parts ----------------------------------------------------------------------
