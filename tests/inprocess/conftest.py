"""The in-process tier: every test here runs its daemon on a thread of the test process,
the CLI through Click's runner and the console through an in-process ASGI client
(:mod:`tests.inproc_support`). Each test is marked ``inprocess``.

Fixtures: ``inproc_env`` (a private state root and config dir, set in ``os.environ`` for
the test), ``daemon_thread`` (the root's daemon, not started), ``inproc_daemon`` (started),
``cli`` (``cli("list", "--json")`` → a ``CompletedProcess``), ``web_client`` (an
``httpx.Client`` of the app), and ``vq``/``web`` with the interfaces of the subprocess
fixtures of ``tests/conftest.py`` and ``tests/web/conftest.py``, so a test body moves here
unchanged. At teardown the daemon is stopped and joined, no thread it started may live on,
and every process left under the state root is killed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tests.inproc_support import (
    InprocDaemon,
    InprocVq,
    InprocWeb,
    inproc_environment,
    run_cli,
)
from tests.inproc_support import (
    web_client as make_web_client,
)

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.inprocess)


@pytest.fixture
def inproc_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A private state root and config dir, in ``os.environ`` (the CLI, the daemon and the
    app all read it there); no other ``VQ_*`` variable of the caller leaks in."""
    for key in list(os.environ):
        if key.startswith("VQ_"):
            monkeypatch.delenv(key)
    env = inproc_environment(tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def daemon_thread(inproc_env: dict[str, str]) -> Iterator[InprocDaemon]:
    """The state root's daemon, not started (``start()``/``stop()``, or ``compose()`` and
    ``tick()``); stopped, joined and checked for leaked threads at teardown."""
    daemon = InprocDaemon(inproc_env)
    try:
        yield daemon
        daemon.stop()
    finally:
        daemon.kill_jobs()


@pytest.fixture
def inproc_daemon(daemon_thread: InprocDaemon) -> InprocDaemon:
    """The state root's daemon, started on a thread and answering on its socket."""
    daemon_thread.start()
    return daemon_thread


@pytest.fixture
def cli(inproc_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``cli(*args, input=None)``: ``vq ARGS`` in-process; exit code, stdout, stderr."""

    def invoke(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_cli(args, input=input)

    return invoke


@pytest.fixture
def web_client(inproc_env: dict[str, str]) -> Iterator[TestClient]:
    """An HTTP client of the console app over this state root, served in-process."""
    client = make_web_client()
    yield client
    client.close()


@pytest.fixture
def vq(inproc_env: dict[str, str], daemon_thread: InprocDaemon) -> InprocVq:
    """The subprocess ``vq`` fixture's interface, in-process (start the daemon yourself)."""
    return InprocVq(Path(inproc_env["VQ_STATE_DIR"]), dict(os.environ), daemon_thread)


@pytest.fixture
def web(vq: InprocVq) -> Iterator[InprocWeb]:
    """The subprocess ``web`` fixture's interface, in-process (start the daemon yourself)."""
    served = InprocWeb(vq)
    yield served
    served.http.close()
