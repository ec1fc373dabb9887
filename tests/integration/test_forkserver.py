"""The fork server, its collectors and the daemon-side client, with real processes."""

from __future__ import annotations

import ast
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from vq.executors import procs
from vq.executors.forkserver_client import (
    CollectorExit,
    ForkServer,
    Launched,
    LaunchError,
    LaunchRequest,
)

T = TypeVar("T")


def wait_until(pred: Callable[[], T | None], timeout: float = 10.0, what: str = "") -> T:
    """Poll ``pred`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = pred()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or pred}")
        time.sleep(0.01)


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.exits: dict[str, CollectorExit] = {}
        self._lock = threading.Lock()
        self.groups: list[int] = []
        self.server = ForkServer(self._on_exit)

    def _on_exit(self, info: CollectorExit) -> None:
        with self._lock:
            self.exits[info.job_id] = info

    def request(
        self,
        job_id: str,
        argv: list[str],
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> LaunchRequest:
        workspace = self.tmp / job_id
        (workspace / "_vq").mkdir(parents=True)
        return LaunchRequest(
            job_id=job_id,
            argv=argv,
            cwd=cwd or workspace,
            env=dict(os.environ) if env is None else env,
            stdout=workspace / "stdout.log",
            stderr=workspace / "stderr.log",
            exit_code_path=workspace / "_vq" / "exit-code",
            usage_path=workspace / "_vq" / "resource-usage.json",
        )

    def launch(
        self, job_id: str, argv: list[str], **kwargs: object
    ) -> tuple[LaunchRequest, Launched]:
        request = self.request(job_id, argv, **kwargs)  # type: ignore[arg-type]
        launched = self.server.launch(request)
        self.groups.append(launched.pgid)
        return request, launched

    def wait_exit(self, job_id: str, timeout: float = 10.0) -> CollectorExit:
        def get() -> CollectorExit | None:
            with self._lock:
                return self.exits.get(job_id)

        return wait_until(get, timeout, f"exit event of {job_id}")

    def command_pid(self, launched: Launched, name: str) -> int:
        """The pid of the command (not the collector) once it has exec'd ``name``."""

        def find() -> int | None:
            for pid in procs.live_group_members(launched.pgid):
                if pid != launched.pid and comm(pid) == name:
                    return pid
            return None

        return wait_until(find, 10.0, f"{name} in group {launched.pgid}")

    def cleanup(self) -> None:
        for pgid in self.groups:
            if procs.group_alive(pgid):
                procs.signal_group(pgid, signal.SIGKILL)
        self.server.close()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    h.server.start()
    try:
        yield h
    finally:
        h.cleanup()


def test_launch_runs_command_and_writes_receipt_then_marker(harness: Harness) -> None:
    request, launched = harness.launch("j1", ["sh", "-c", "echo out; echo err >&2; exit 3"])
    info = harness.wait_exit("j1")
    assert info == CollectorExit(job_id="j1", pid=launched.pid, exit_code=0, signal=None)
    assert request.exit_code_path.read_text() == "3\n"
    assert request.stdout.read_text() == "out\n"
    assert request.stderr.read_text() == "err\n"
    usage = json.loads(request.usage_path.read_text())
    assert usage["schema"] == "vq.resource-usage.v1"
    assert usage["status"] == "ok"
    assert usage["source"] == "wait4"
    assert usage["exit_code"] == 3
    assert usage["signal"] is None
    assert usage["command_status"] == "exited"
    assert usage["max_rss_kb"] > 0
    assert usage["wall_seconds"] >= 0
    assert usage["active_cpu_seconds"] == pytest.approx(
        usage["user_cpu_seconds"] + usage["system_cpu_seconds"]
    )
    assert usage["process_count"] is None
    assert usage["started_at"] <= usage["finished_at"]
    assert usage["started_at"].endswith("+00:00")
    # no temp files left behind by the atomic writes
    assert sorted(p.name for p in request.exit_code_path.parent.iterdir()) == [
        "collector.pid",
        "exit-code",
        "resource-usage.json",
    ]
    pid_text, ticks_text = (request.exit_code_path.parent / "collector.pid").read_text().split()
    assert int(pid_text) > 1 and int(ticks_text) > 0


def test_output_files_are_appended_not_truncated(harness: Harness) -> None:
    request = harness.request("app", ["sh", "-c", "echo second"])
    request.stdout.write_text("first\n")
    harness.server.launch(request)
    harness.wait_exit("app")
    assert request.stdout.read_text() == "first\nsecond\n"


def test_launched_identity_is_a_process_group_leader(harness: Harness) -> None:
    _, launched = harness.launch("ident", ["sleep", "30"])
    assert launched.pgid == launched.pid
    assert launched.start_ticks is not None
    assert procs.start_ticks(launched.pid) == launched.start_ticks
    assert procs.matches_identity(launched.pid, launched.start_ticks)
    stat = procs.read_stat(launched.pid)
    assert stat is not None and stat.pgid == launched.pid
    assert os.getsid(launched.pid) == launched.pid  # leads its own session
    command = harness.command_pid(launched, "sleep")
    command_stat = procs.read_stat(command)
    assert command_stat is not None
    assert command_stat.pgid == launched.pgid
    assert command_stat.ppid == launched.pid

    assert procs.signal_group(launched.pgid, signal.SIGKILL)
    info = harness.wait_exit("ident")
    assert info.signal == signal.SIGKILL
    wait_until(lambda: not procs.group_alive(launched.pgid), 10.0, "group to die")


def test_command_runs_in_cwd_with_env_and_path_lookup(harness: Harness, tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "vq-test-hello"
    script.write_text('#!/bin/sh\npwd\necho "FOO=$FOO"\necho "HOME=${HOME-unset}"\n')
    script.chmod(0o755)
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "FOO": "bar baz"}
    request, _ = harness.launch("env", ["vq-test-hello"], cwd=workdir, env=env)
    assert harness.wait_exit("env").exit_code == 0
    assert request.exit_code_path.read_text() == "0\n"
    assert request.stdout.read_text().splitlines() == [
        str(workdir.resolve()),
        "FOO=bar baz",
        "HOME=unset",  # the daemon's environment does not leak in
    ]


def test_exec_failure_exits_127_with_message(harness: Harness) -> None:
    request, _ = harness.launch("noexec", ["/nonexistent/bin"])
    assert harness.wait_exit("noexec").exit_code == 0
    assert request.exit_code_path.read_text() == "127\n"
    assert "vq: cannot execute '/nonexistent/bin'" in request.stderr.read_text()
    usage = json.loads(request.usage_path.read_text())
    assert usage["exit_code"] == 127


def test_permission_failure_exits_126(harness: Harness, tmp_path: Path) -> None:
    not_executable = tmp_path / "script.sh"
    not_executable.write_text("#!/bin/sh\necho hi\n")
    not_executable.chmod(0o644)
    request, _ = harness.launch("noperm", [str(not_executable)])
    harness.wait_exit("noperm")
    assert request.exit_code_path.read_text() == "126\n"
    assert "vq: cannot execute" in request.stderr.read_text()


def test_missing_cwd_is_reported_as_exec_failure(harness: Harness, tmp_path: Path) -> None:
    request, _ = harness.launch("nocwd", ["true"], cwd=tmp_path / "missing")
    harness.wait_exit("nocwd")
    assert request.exit_code_path.read_text() == "127\n"
    assert "vq: cannot execute 'true'" in request.stderr.read_text()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGKILL, 137), (signal.SIGTERM, 143)])
def test_command_killed_by_signal(harness: Harness, sig: signal.Signals, code: int) -> None:
    job = f"killed-{sig.name}"
    request, launched = harness.launch(job, ["sleep", "30"])
    command = harness.command_pid(launched, "sleep")
    os.kill(command, sig)
    info = harness.wait_exit(job)
    assert info.exit_code == 0  # the collector itself survived and wrote its markers
    assert request.exit_code_path.read_text() == f"{code}\n"
    usage = json.loads(request.usage_path.read_text())
    assert usage["exit_code"] == code
    assert usage["signal"] == sig
    assert usage["command_status"] == "signaled"


def test_sigterm_to_group_kills_collector_at_once(harness: Harness) -> None:
    request, launched = harness.launch("trap", ["sh", "-c", 'trap "" TERM; sleep 30'])
    harness.command_pid(launched, "sleep")  # the trap is in place once sleep runs
    assert procs.signal_group(launched.pgid, signal.SIGTERM)
    info = harness.wait_exit("trap", timeout=5.0)
    assert info.signal == signal.SIGTERM
    assert info.exit_code is None
    # the command ignores TERM and outlives its collector; no marker was written
    assert procs.group_alive(launched.pgid)
    assert not procs.is_alive(launched.pid)
    assert not request.exit_code_path.exists()
    assert not request.usage_path.exists()

    assert procs.signal_group(launched.pgid, signal.SIGKILL)
    wait_until(lambda: not procs.group_alive(launched.pgid), 5.0, "group to die after KILL")


def test_sigpipe_is_default_in_the_command(harness: Harness) -> None:
    request, _ = harness.launch("pipe", ["sh", "-c", "yes | head -1"])
    harness.wait_exit("pipe", timeout=10.0)  # with SIGPIPE ignored, yes would never stop
    assert request.exit_code_path.read_text() == "0\n"
    assert request.stdout.read_text() == "y\n"


def test_close_leaves_collectors_running(harness: Harness) -> None:
    request, launched = harness.launch("orphan", ["sleep", "2"])
    server_pid = harness.server.server_pid
    assert server_pid is not None
    harness.server.close()
    assert not harness.server.alive()
    assert procs.read_stat(server_pid) is None  # exited and reaped by close()
    assert procs.is_alive(launched.pid)
    assert not request.exit_code_path.exists()
    wait_until(request.exit_code_path.exists, 10.0, "exit marker of the orphaned job")
    assert request.exit_code_path.read_text() == "0\n"
    assert json.loads(request.usage_path.read_text())["exit_code"] == 0
    assert "orphan" not in harness.exits  # nobody is left to report it


def test_concurrent_launches_from_two_threads(harness: Harness) -> None:
    requests = [harness.request(f"c{i}", ["sh", "-c", f"exit {i}"]) for i in range(2)]
    barrier = threading.Barrier(2)
    results: dict[int, Launched | BaseException] = {}

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = harness.server.launch(requests[i])
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10.0)
    assert all(isinstance(results.get(i), Launched) for i in range(2)), results
    for i in range(2):
        launched = results[i]
        assert isinstance(launched, Launched)
        assert launched.job_id == f"c{i}"
        harness.groups.append(launched.pgid)
        assert harness.wait_exit(f"c{i}").pid == launched.pid
        assert requests[i].exit_code_path.read_text() == f"{i}\n"


def test_server_ignores_sigint_and_answers_pings(harness: Harness) -> None:
    assert harness.server.ping()
    server_pid = harness.server.server_pid
    assert server_pid is not None
    os.kill(server_pid, signal.SIGINT)
    assert harness.server.ping()
    assert harness.server.alive()


def test_launch_timeout_then_late_launch_is_still_reported(harness: Harness) -> None:
    server_pid = harness.server.server_pid
    assert server_pid is not None
    os.kill(server_pid, signal.SIGSTOP)
    try:
        request = harness.request("late", ["true"])
        with pytest.raises(LaunchError) as caught:
            harness.server.launch(request, timeout=0.2)
        assert caught.value.reference == "launch-timeout"
    finally:
        os.kill(server_pid, signal.SIGCONT)
    harness.wait_exit("late")
    assert request.exit_code_path.read_text() == "0\n"


def test_server_death_fails_pending_launch_and_start_respawns(harness: Harness) -> None:
    server_pid = harness.server.server_pid
    assert server_pid is not None
    os.kill(server_pid, signal.SIGSTOP)
    outcome: list[BaseException] = []

    def pending() -> None:
        try:
            harness.server.launch(harness.request("doomed", ["true"]), timeout=30.0)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=pending)
    thread.start()
    conn = harness.server._conn  # white-box: wait until the launch is really in flight
    assert conn is not None
    wait_until(lambda: "doomed" in conn.pending, 5.0, "the launch to be in flight")
    os.kill(server_pid, signal.SIGKILL)
    thread.join(10.0)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], LaunchError)
    assert outcome[0].reference == "launch-failed"
    wait_until(lambda: not harness.server.alive(), 5.0, "alive() to turn False")
    assert not harness.server.ping(timeout=0.5)
    with pytest.raises(LaunchError):
        harness.server.launch(harness.request("refused", ["true"]))

    harness.server.start()
    assert harness.server.alive()
    assert harness.server.server_pid != server_pid
    assert harness.server.ping()
    request, _ = harness.launch("reborn", ["true"])
    harness.wait_exit("reborn")
    assert request.exit_code_path.read_text() == "0\n"


def test_start_is_idempotent(harness: Harness) -> None:
    pid = harness.server.server_pid
    harness.server.start()
    assert harness.server.server_pid == pid


def test_ill_formed_requests_are_rejected_locally(harness: Harness, tmp_path: Path) -> None:
    good = harness.request("bad", ["true"])
    with pytest.raises(ValueError, match="argv"):
        harness.server.launch(LaunchRequest(**{**good.__dict__, "argv": []}))
    with pytest.raises(ValueError, match="absolute"):
        harness.server.launch(LaunchRequest(**{**good.__dict__, "stdout": Path("rel.log")}))


def test_fork_server_imports_only_cheap_stdlib_modules() -> None:
    from vq.executors.forkserver_client import SERVER_SCRIPT

    allowed = {"__future__", "errno", "json", "os", "select", "signal", "sys", "time"}
    # the collector and its privilege drop, same rules (the drop also needs pwd, and
    # ctypes for prctl, imported only when a multi-user job starts)
    sibling = {
        "_collector",
        "vq.executors._collector",
        "_collector_record",
        "vq.executors._collector_record",
        "_privdrop",
        "vq.executors",
    }
    allowed |= {"pwd", "ctypes"}
    for script in (
        SERVER_SCRIPT,
        SERVER_SCRIPT.with_name("_collector.py"),
        SERVER_SCRIPT.with_name("_collector_record.py"),
        SERVER_SCRIPT.with_name("_privdrop.py"),
    ):
        imported: set[str] = set()
        for node in ast.walk(ast.parse(script.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module or "")
        # typing is imported only under a never-true TYPE_CHECKING for mypy
        assert imported - {"typing"} - sibling <= allowed, (script.name, imported)
