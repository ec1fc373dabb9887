"""Each owner's submit socket (``users/<uid>/submit.sock``) of the multi-user daemon.

A plain ``vq submit`` as a user is handed to the daemon over the user's own socket and
written into the user's tree *as the user*; a submit that needs the user's own files
(SOURCE) is still written by the user's CLI. Another user cannot use the socket, even
when its mode is opened, and the daemon refuses params it does not serve.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.multi_user_support import (
    SRC,
    TERMINAL,
    USER_PYTHON,
    System,
    make_system,
    needs_multi_user,
)

pytestmark = needs_multi_user

#: A raw submit over a socket, as a user: prints the daemon's answer line.
RAW_SUBMIT = (
    "import json, socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.connect(sys.argv[1])\n"
    "s.sendall(json.dumps({'id': 1, 'method': 'submit', 'params': json.loads(sys.argv[2])})"
    ".encode() + b'\\n')\n"
    "print(s.makefile().readline())\n"
)


@pytest.fixture
def system() -> Iterator[System]:
    yield from make_system()


@pytest.fixture
def team() -> Iterator[System]:
    """Teammates share a primary group, so each can reach the other's ``users/<uid>``."""
    yield from make_system(("vqteam1", "vqteam2"))


def _socket_lines(system: System) -> list[str]:
    log = (system.root / "daemon.log").read_text()
    return [line for line in log.splitlines() if "submit socket of user" in line]


def _run_raw(user: str, sock: Path, params: dict[str, object]) -> subprocess.CompletedProcess[str]:
    argv = ["runuser", "-u", user, "--", "env", f"PYTHONPATH={SRC}", USER_PYTHON, "-c"]
    return subprocess.run(
        [*argv, RAW_SUBMIT, str(sock), json.dumps(params)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _raw(user: str, sock: Path, params: dict[str, object]) -> dict[str, object]:
    proc = _run_raw(user, sock, params)
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, object] = json.loads(proc.stdout)
    return answer


def test_a_plain_submit_is_written_by_the_daemon_as_its_owner(system: System) -> None:
    vqa = pwd.getpwnam("vqa")
    sock = system.tree("vqa") / "submit.sock"
    info = wait_until(lambda: sock.exists() and os.lstat(sock), 10)
    assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert (info.st_uid, info.st_gid) == (vqa.pw_uid, vqa.pw_gid)

    job = system.submit("vqa", "--", "sh", "-c", "id -u")
    assert system.wait_state("vqa", job, *TERMINAL) == "COMPLETED", system.spec("vqa", job)
    assert system.out("vqa", job).strip() == str(vqa.pw_uid)
    assert any(line.endswith(f"user {vqa.pw_uid}: wrote {job}") for line in _socket_lines(system))
    assert system.spec("vqa", job)["submitter"] == str(vqa.pw_uid)
    # What the daemon created for the job is the owner's, as if the owner's CLI wrote it.
    workspace = system.tree("vqa") / "jobs" / job
    assert workspace.stat().st_uid == vqa.pw_uid
    environment = workspace / "_vq" / "environment"
    assert environment.stat().st_uid == vqa.pw_uid
    assert stat.S_IMODE(environment.stat().st_mode) == 0o600

    # A submit with a SOURCE (the user's own files) is written by the user's CLI.
    source = Path(tempfile.mkdtemp(prefix="vq-src-", dir="/tmp"))
    try:
        (source / "input.txt").write_text("from the source\n")
        source.chmod(0o755)
        (source / "input.txt").chmod(0o644)
        sourced = system.submit("vqa", str(source), "--", "cat", "input.txt")
        assert system.wait_state("vqa", sourced, *TERMINAL) == "COMPLETED"
        assert system.out("vqa", sourced) == "from the source\n"
        assert not any(line.endswith(sourced) for line in _socket_lines(system))
    finally:
        for child in source.iterdir():
            child.unlink()
        source.rmdir()


def test_no_one_else_submits_through_an_owners_socket(team: System) -> None:
    owner = pwd.getpwnam("vqteam1")
    sock = team.tree("vqteam1") / "submit.sock"
    wait_until(sock.exists, 10)
    queue = team.tree("vqteam1") / "queue"
    refused = _run_raw("vqteam2", sock, {"command": ["true"]})
    assert refused.returncode != 0 and "PermissionError" in refused.stderr
    # The owner opens their socket to everyone: the daemon still refuses another uid.
    os.chmod(sock, 0o666)
    answer = _raw("vqteam2", sock, {"command": ["true"]})
    assert answer["error"]["code"] == 15, answer  # type: ignore[index]
    assert f"user {owner.pw_uid}'s" in answer["error"]["message"]  # type: ignore[index]
    # The owner may not send what the daemon does not serve (their files, a submitter).
    for extra in ({"source": "/etc"}, {"submitter": "0"}, {"profile": "big"}):
        answer = _raw("vqteam1", sock, {"command": ["true"], **extra})
        error = answer["error"]  # type: ignore[index]
        assert error["code"] == 4 and next(iter(extra)) in error["message"], answer
    assert list(queue.glob("*.json")) == []
    assert _socket_lines(team) == []
