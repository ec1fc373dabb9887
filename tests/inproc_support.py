"""The in-process tier's parts: a daemon on a thread, the CLI through Click's runner, the
web app through an in-process ASGI client, all in the test's own process.

Every part is the real one: :func:`vq.daemon.compose.compose_daemon` builds the same daemon
``vq daemon run`` runs (its fork server and collectors are real processes; its RPC socket
is a real Unix socket), the CLI is :func:`vq.cli.main.main` (fast paths included) and the
console is :func:`vq.web.app.create_app`. What the tier leaves out is only the process
boundary: no interpreter start per command, no ``vq daemon start`` subprocess, no uvicorn.
Tests about process behaviour (signals, kill -9, crash points, start-up refusals) belong to
the subprocess tiers (``tests/integration``, ``tests/web``, ``tests/chaos``).

:class:`InprocVq` has :class:`tests.conftest.Vq`'s interface, so a test body written for
the subprocess fixture runs here unchanged; ``daemon start``/``stop``/``run`` through
:meth:`InprocVq.run` are refused (they would fork a daemon or signal the test process):
:meth:`InprocVq.start_daemon` and :meth:`InprocVq.stop_daemon` drive the thread instead.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from starlette.testclient import TestClient

from tests.conftest import Vq, check_exit, processes_with_env, wait_until
from vq.cli.main import main as vq_main
from vq.config.settings import load_settings
from vq.daemon.app import Daemon
from vq.daemon.compose import compose_daemon
from vq.paths import StatePaths
from vq.web.app import create_app
from vq.web.context import WebConfig
from vq.web.hosts import configured_hosts, fleet_configured

__all__ = [
    "InprocDaemon",
    "InprocVq",
    "InprocWeb",
    "daemon_overrides",
    "inproc_environment",
    "run_cli",
]

#: How long a started daemon may take to answer, and a stopped one to join.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0
#: How long the daemon's worker threads (RPC connections, notifier) may take to end
#: after the loop returned.
THREADS_GONE_TIMEOUT = 15.0
#: Thread name prefixes of pools this process keeps for every caller, the daemon among
#: them, by design (the store's group-commit writers): not a daemon's leak.
PROCESS_POOLS = ("vq-commit",)
#: The in-process app's base URL: a loopback name the host check admits, on a port nothing
#: listens on, so a test that opens a real socket to it fails at once (such a test belongs
#: to ``tests/web``) instead of reaching some other server.
BASE_URL = "http://127.0.0.1:1"
#: The verbs :meth:`InprocVq.run` refuses: each forks a daemon or signals its pid.
PROCESS_VERBS = (("daemon", "start"), ("daemon", "stop"), ("daemon", "run"))


def inproc_environment(tmp_path: Path) -> dict[str, str]:
    """The ``VQ_*`` variables of a private state root and config dir under ``tmp_path``."""
    return {
        "VQ_STATE_DIR": str(tmp_path / "state"),
        "VQ_CONFIG_DIR": str(tmp_path / "config"),
        **({"VQ_ALLOW_ROOT": "1"} if os.geteuid() == 0 else {}),
    }


def daemon_overrides(args: tuple[str, ...]) -> dict[str, Any]:
    """``vq daemon start``'s cap flags as ``[daemon]`` overrides (``--max-jobs 2`` →
    ``{"max_jobs": 2}``), as ``python -m vq.daemon`` reads them. Flags that only make
    sense for a daemon process (``--web``, ``--allow-root``) are refused."""
    parser = argparse.ArgumentParser(prog="inproc daemon", exit_on_error=False)
    for flag in ("max-jobs", "max-cpus", "max-mem-mb", "default-job-mem-mb"):
        parser.add_argument(f"--{flag}", type=int, default=None)
    parser.add_argument("--tick-seconds", type=float, default=None)
    parser.add_argument("--auto-resume", action="store_true")
    parsed = parser.parse_args(list(args))
    return {key: value for key, value in vars(parsed).items() if value is not None}


def refuse_crash_points(env: Mapping[str, str]) -> None:
    """A crash point (``VQ_TEST_FAULT``) SIGKILLs the process that reaches it: here, the
    test process. A crash test runs the crashing ``vq`` as a subprocess instead."""
    assert "VQ_TEST_FAULT" not in env, (
        "VQ_TEST_FAULT would SIGKILL the test process: run the crashing vq as a subprocess"
    )


def run_cli(
    args: tuple[str, ...], input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``vq ARGS`` in this process (the console script's :func:`main`, fast paths
    included) inside Click's runner isolation; its exit code, stdout and stderr.

    ``env``: the whole environment of the call, as a subprocess's would be (``os.environ``
    is set to it for the call and restored after); default: ``os.environ`` as it is.
    """
    refuse_crash_points(os.environ if env is None else env)
    changes: dict[str, str | None] = {}
    if env is not None:
        changes = {key: value for key, value in env.items() if os.environ.get(key) != value}
        changes.update({key: None for key in os.environ if key not in env})
    runner = CliRunner()
    code = 0
    with runner.isolation(input=input, env=changes) as (out, err, _):
        try:
            vq_main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()  # what a process's exit flushes
        sys.stderr.flush()
        stdout = out.getvalue().decode(errors="replace")
        stderr = err.getvalue().decode(errors="replace")
    return subprocess.CompletedProcess(["vq", *args], code, stdout, stderr)


class InprocDaemon:
    """One state root's daemon, composed in this process and run on a thread.

    :meth:`start` returns once the daemon answers on its socket; :meth:`stop` asks the
    loop to stop, joins the thread and checks that every thread the daemon started has
    ended. A test that drives the loop itself uses :meth:`compose` and ``tick()`` instead
    (then the socket is not served).
    """

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.paths = StatePaths(Path(env["VQ_STATE_DIR"]))
        self.daemon: Daemon | None = None
        self.thread: threading.Thread | None = None
        self.exit_code: int | None = None
        self.error: BaseException | None = None
        self._threads_before: set[threading.Thread] = set()
        self._log_handler: logging.Handler | None = None
        self._log_level = logging.NOTSET

    def compose(self, *args: str, env: dict[str, str] | None = None) -> Daemon:
        """The daemon ``vq daemon start ARGS`` would run, built but not started; ``env``:
        the environment it is started with (its config and its jobs' environment),
        default ``os.environ``."""
        environ = dict(os.environ if env is None else env)
        refuse_crash_points(environ)
        overrides = daemon_overrides(args)
        auto_resume = bool(overrides.pop("auto_resume", False))
        layered = {"daemon": overrides} if overrides else None
        settings = load_settings(environ, overrides=layered)
        self.paths.ensure()
        return compose_daemon(
            self.paths,
            settings,
            auto_resume=auto_resume,
            overrides=layered,
            env=environ,
        )

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self, *args: str, env: dict[str, str] | None = None) -> None:
        """Compose and run the daemon on a thread; return once it answers on its socket."""
        assert not self.running, "the in-process daemon already runs"
        self._threads_before = set(threading.enumerate())
        self._open_log()  # composing logs too (the webhook target, say)
        try:
            self.daemon = self.compose(*args, env=env)
        except BaseException:
            self._close_log()
            raise
        self.exit_code = self.error = None
        self.thread = threading.Thread(target=self._serve, name="vq-inproc-daemon")
        self.thread.start()

        def answering() -> bool:
            if not self.running:
                raise AssertionError(
                    f"the in-process daemon ended while starting (exit {self.exit_code}): "
                    f"{self.error!r}"
                )
            return run_cli(("daemon", "ping")).returncode == 0

        wait_until(answering, timeout=START_TIMEOUT)

    def _serve(self) -> None:
        assert self.daemon is not None
        try:
            self.exit_code = self.daemon.run(install_signal_handlers=False)
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        """Stop the loop, join its thread, and fail if a thread it started lives on."""
        if self.thread is None or self.daemon is None:
            return
        self.daemon.request_stop()
        self.thread.join(STOP_TIMEOUT)
        assert not self.thread.is_alive(), "the in-process daemon did not stop"
        self.thread = None
        self._close_log()
        deadline = time.monotonic() + THREADS_GONE_TIMEOUT
        while self.leaked_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        leaked = [thread.name for thread in self.leaked_threads()]
        assert not leaked, f"threads the in-process daemon started live on: {leaked}"
        if self.error is not None:
            raise AssertionError(f"the in-process daemon failed: {self.error!r}")

    def leaked_threads(self) -> list[threading.Thread]:
        """Threads started since :meth:`start` that still run (the process's own pools
        aside, :data:`PROCESS_POOLS`)."""
        return [
            thread
            for thread in threading.enumerate()
            if thread not in self._threads_before and not thread.name.startswith(PROCESS_POOLS)
        ]

    def _open_log(self) -> None:
        """``daemon.log`` gets the daemon's records, as ``python -m vq.daemon`` writes them."""
        self.paths.ensure()
        handler = logging.FileHandler(self.paths.daemon_log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("vq")
        self._log_level = logger.level
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        self._log_handler = handler

    def _close_log(self) -> None:
        if self._log_handler is not None:
            logger = logging.getLogger("vq")
            logger.removeHandler(self._log_handler)
            logger.setLevel(self._log_level)
            self._log_handler.close()
            self._log_handler = None

    def kill_jobs(self) -> None:
        """SIGKILL every process still running under this state root (jobs, collectors,
        a fork server), never this test process."""
        marker = f"VQ_STATE_DIR={self.env['VQ_STATE_DIR']}"
        for pid in processes_with_env(marker):
            if pid == os.getpid():
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass
class InprocVq(Vq):
    """:class:`tests.conftest.Vq` over the in-process CLI and daemon: the same reads of
    the state root, its commands run through Click's runner and its daemon on a thread."""

    daemon: InprocDaemon

    def run(
        self, *args: str, check: bool = True, timeout: float = 120.0, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        assert tuple(args[:2]) not in PROCESS_VERBS, (
            f"`vq {' '.join(args[:2])}` forks or signals a daemon process: in the in-process "
            "tier use start_daemon()/stop_daemon(), or keep the test in a subprocess tier"
        )
        del timeout  # an in-process call has no process to time out
        proc = run_cli(tuple(args), input=input, env=self.env)
        if check:
            check_exit(args, proc)
        return proc

    def start_daemon(self, *args: str) -> None:
        self.daemon.start(*args, env=self.env)

    def stop_daemon(self) -> None:
        self.daemon.stop()

    def daemon_pid(self) -> int | None:
        """None: the daemon is this process, which a test must never signal."""
        return None


@dataclass
class InprocWeb:
    """:class:`tests.web.conftest.Web`'s interface over the app served in-process."""

    vq: InprocVq
    fleet: bool = False
    base_url: str = BASE_URL
    http: TestClient = field(init=False)

    def __post_init__(self) -> None:
        self.http = web_client(self.fleet, self.base_url)

    @property
    def config_dir(self) -> Path:
        return Path(self.vq.env["VQ_CONFIG_DIR"])

    def init_token(self) -> str:
        """Create the admin token with the CLI and return it."""
        self.vq.run("web", "init-token", "--force")
        return (self.config_dir / "web-token").read_text().strip()

    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.init_token()}"}


def web_client(fleet: bool = False, base_url: str = BASE_URL) -> TestClient:
    """An HTTP client of the console app as ``vq web serve [--fleet]`` builds it (from the
    environment and the config), served in-process (no socket; the peer is loopback, as
    for a local browser)."""
    config = WebConfig.from_env(
        allowed_hosts=configured_hosts(()), fleet=fleet or fleet_configured()
    )
    return TestClient(
        create_app(config),
        base_url=base_url,
        raise_server_exceptions=False,  # a server error is a 500 answer, as over HTTP
        follow_redirects=False,  # as httpx.Client
        client=("127.0.0.1", 50000),
    )
