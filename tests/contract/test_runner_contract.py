"""One contract, every Runner: LocalRunner here, SshRunner to the testbed's loopback sshd
as the test user, and SshRunner as a user whose .bashrc/.profile/.bash_logout print to both
streams. Every case must give the same bytes, statuses and failures through all three.
"""

from __future__ import annotations

import io
import os
import secrets
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.testbed import SshTestbed
from vq.errors import (
    CommandFailed,
    CommandNotStarted,
    CommandTimeout,
    OutputTooLarge,
    TransportError,
)
from vq.transport.local import LocalRunner
from vq.transport.runner import Runner
from vq.transport.ssh import SshRunner

#: The ssh runners reach the shared testbed's sshd (its fixture is requested per parameter).
pytestmark = pytest.mark.testbed

TRICKY: list[str | bytes] = [
    "plain",
    "with space",
    "  leading and trailing  ",
    'it\'s "quoted" `both` ways',
    "new\nline",
    "tab\there",
    "$(touch /tmp/vq-contract-pwned)",
    "`touch /tmp/vq-contract-pwned`",
    "a;b && c || d | e > f < g",
    "*",
    "/etc/*",
    "~",
    "$HOME ${HOME} $$ $? $1",
    "\\ back\\\\slash",
    "-n",
    "--",
    "",
    "ünïcødé ✓",
    b"\xff\xfe not utf-8 \x80",
    "#not a comment",
    "!!",
]


@pytest.fixture(scope="module")
def ssh_runners(testbed: SshTestbed) -> Iterator[dict[str, SshRunner]]:
    """One runner per user for the whole module, so their master connections are reused."""
    control = Path(tempfile.mkdtemp(prefix="vqcm-", dir="/tmp"))
    options = ("-F", str(testbed.ssh_config))
    runners = {
        "ssh": SshRunner("vq-local", ssh_options=options, control_dir=control),
        "ssh-noisy": SshRunner("vq-noisy", ssh_options=options, control_dir=control),
    }
    yield runners
    for each in runners.values():
        each.close()
    shutil.rmtree(control, ignore_errors=True)


@pytest.fixture(params=["local", "ssh", "ssh-noisy"])
def runner(request: pytest.FixtureRequest) -> Runner:
    if request.param == "local":
        return LocalRunner()
    runners: dict[str, SshRunner] = request.getfixturevalue("ssh_runners")
    return runners[request.param]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every test user can read (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="vq-contract-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    for child in sorted(path.rglob("*"), reverse=True):
        child.unlink() if not child.is_dir() else child.rmdir()
    path.rmdir()


def _as_bytes(arg: str | bytes) -> bytes:
    return arg if isinstance(arg, bytes) else arg.encode()


def test_argv_round_trips_byte_exact(runner: Runner) -> None:
    result = runner.run(["printf", "%s\\0", *TRICKY])
    assert result.rc == 0
    assert result.stdout.split(b"\0")[:-1] == [_as_bytes(a) for a in TRICKY]
    assert result.stderr == b""
    assert not os.path.exists("/tmp/vq-contract-pwned")


@pytest.mark.parametrize("rc", [0, 1, 7, 126, 255])
def test_exit_status_is_passed_through(runner: Runner, rc: int) -> None:
    result = runner.run(["sh", "-c", 'printf out; printf err >&2; exit "$1"', "sh", str(rc)])
    assert (result.rc, result.stdout, result.stderr) == (rc, b"out", b"err")


def test_nonzero_status_is_an_error_only_when_checked(runner: Runner) -> None:
    result = runner.run(["sh", "-c", "echo broken >&2; exit 3"])
    with pytest.raises(CommandFailed, match="status 3: broken"):
        result.check("the probe")


def test_missing_program_is_refused_or_status_127(runner: Runner) -> None:
    if isinstance(runner, LocalRunner):
        with pytest.raises(CommandNotStarted, match="vq-no-such-program: command not found"):
            runner.run(["vq-no-such-program"])
    else:
        result = runner.run(["vq-no-such-program"])
        assert result.rc == 127 and b"vq-no-such-program" in result.stderr
        assert b"not found" in result.stderr


def test_stdin_bytes_arrive_whole(runner: Runner) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value, more than a pipe buffer
    result = runner.run(["cat"], stdin=data, max_output_bytes=len(data))
    assert result.stdout == data


def test_no_stdin_reads_as_empty(runner: Runner) -> None:
    assert runner.run(["wc", "-c"]).stdout.strip() == b"0"


def test_output_without_trailing_newline_is_kept_exactly(runner: Runner) -> None:
    result = runner.run(["printf", "no newline\n\n\nVQ-END-0 0"])
    assert result.stdout == b"no newline\n\n\nVQ-END-0 0"


def test_deadline_kills_the_command_and_leaves_no_process(runner: Runner) -> None:
    marker = f"30.{secrets.randbelow(10**6):06d}"
    started = time.monotonic()
    with pytest.raises(CommandTimeout) as caught:
        runner.run(["sh", "-c", f"sleep {marker}; echo never"], deadline_s=1.0)
    assert time.monotonic() - started < 3.0
    assert caught.value.transient

    def gone() -> bool:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                return False
        return True

    wait_until(gone, timeout=5.0)


def test_output_cap_is_an_error_not_a_cut(runner: Runner) -> None:
    cap = 1 << 20
    exact = runner.run(["head", "-c", str(cap), "/dev/zero"], max_output_bytes=cap)
    assert len(exact.stdout) == cap
    with pytest.raises(OutputTooLarge, match="stdout exceeded"):
        runner.run(["head", "-c", str(cap + 1), "/dev/zero"], max_output_bytes=cap)
    with pytest.raises(OutputTooLarge, match="stderr exceeded"):
        runner.run(["sh", "-c", "yes >&2"], max_output_bytes=4096)


def test_tar_stream_is_byte_exact(runner: Runner, shared_dir: Path) -> None:
    files = {
        "a.bin": os.urandom(300_000),
        "sub/b.txt": b"VQ-BEGIN-x 1\nVQ-END-y 0\n",
        "sub/\xe9t\xe9.dat": b"",
    }
    for name, data in files.items():
        path = shared_dir / name
        path.parent.mkdir(exist_ok=True)
        path.parent.chmod(0o755)
        path.write_bytes(data)
        path.chmod(0o644)
    with runner.open_stream(["tar", "-C", str(shared_dir), "-cf", "-", "."]) as stream:
        chunks = []
        while chunk := stream.read():
            chunks.append(chunk)
        assert stream.wait().rc == 0
    archive = tarfile.open(fileobj=io.BytesIO(b"".join(chunks)))
    got = {
        m.name.removeprefix("./"): archive.extractfile(m).read()  # type: ignore[union-attr]
        for m in archive.getmembers()
        if m.isfile()
    }
    assert got == files


def test_stream_reports_status_and_stderr(runner: Runner) -> None:
    with runner.open_stream(["sh", "-c", "seq 3; echo warn >&2; exit 4"]) as stream:
        assert stream.read() == b"1\n2\n3\n"
        result = stream.wait()
    assert (result.rc, result.stderr) == (4, b"warn\n")


def test_stream_inactivity_deadline_kills_only_a_silent_command(runner: Runner) -> None:
    """``idle_s`` bounds the silence between bytes once the output began, not the whole
    transfer: a command slow to start, then printing for longer than it, succeeds; one
    that goes quiet is killed as a transport failure long before its overall deadline."""
    # lines longer than the SSH end marker, so each one is payload as soon as it arrives
    steady = "sleep 2; for i in 1 2 3 4 5 6; do printf '%064d\\n' $i; sleep 0.4; done"
    got = b""
    with runner.open_stream(["sh", "-c", steady], deadline_s=30.0, idle_s=1.5) as stream:
        while chunk := stream.read():
            got += chunk
        assert stream.wait().rc == 0
    assert [int(line) for line in got.split()] == [1, 2, 3, 4, 5, 6]
    started = time.monotonic()
    silent = ["sh", "-c", "seq 100; sleep 30"]
    with (
        pytest.raises(TransportError, match="for 1s"),
        runner.open_stream(silent, deadline_s=60.0, idle_s=1.0) as stream,
    ):
        while stream.read():
            pass
    assert time.monotonic() - started < 10.0


def test_stream_deadline_kills_the_command(runner: Runner) -> None:
    started = time.monotonic()
    with (
        pytest.raises(CommandTimeout),
        runner.open_stream(["sh", "-c", "echo start; sleep 30"], deadline_s=1.0) as stream,
    ):
        while stream.read():
            pass
    assert time.monotonic() - started < 3.0
