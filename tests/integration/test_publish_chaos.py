"""vq.publish against real processes: kill -9 at random points, racing publishers, the CLI.

A publisher subprocess publishes directories ``d-<i>`` (FILES files of known content) and
files ``f-<i>`` in a loop until it is SIGKILLed at a random moment after it reported being
ready. After every kill each destination must be absent or complete; hidden stages are the
only residue allowed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import VQ_BIN

FILES = 6

#: A pre-imported parent forks one publisher per round (a fork costs about a millisecond,
#: an interpreter start hundreds on a loaded machine), so 200 kills fit in seconds.
#: Protocol on stdin/stdout: ``go ROOT START MODE`` → the child prints ``ready PID``;
#: ``reap PID`` → ``reaped PID STATUS``.
ZYGOTE = r"""
import os, sys
from pathlib import Path
from vq.publish import publish, publish_file
from vq.publish import _commit
native_libc = _commit._LIBC

def run(root, i, files):
    while True:
        def build(draft, i=i):
            for n in range(files):
                (draft.path / f"part-{n}").write_bytes(f"{i}:{n}:".encode() * 512)
        publish(root / f"d-{i}", build)
        publish_file(
            root / f"f-{i}", lambda stage, i=i: stage.write_bytes(f"file {i}".encode() * 64)
        )
        i += 1

for line in sys.stdin:
    word, *rest = line.split()
    if word == "go":
        root, start, mode = Path(rest[0]), int(rest[1]), rest[2]
        _commit._LIBC = None if mode == "fallback" else native_libc
        pid = os.fork()
        if pid == 0:
            print(f"ready {os.getpid()}", flush=True)
            try:
                run(root, start, int(rest[3]))
            finally:
                os._exit(1)
    elif word == "reap":
        _, status = os.waitpid(int(rest[0]), 0)
        print(f"reaped {rest[0]} {status}", flush=True)
"""

RACER = r"""
import os, sys, time
from pathlib import Path
from vq.errors import Conflict
from vq.publish import publish
from vq.publish import _commit
if sys.argv[4] == "fallback":
    _commit._LIBC = None
dest, go, me = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
print("ready", flush=True)
deadline = time.monotonic() + 20
while not go.exists():
    if time.monotonic() > deadline:
        sys.exit(9)
def build(draft):
    for n in range(20):
        (draft.path / f"p{n}").write_text(me)
try:
    publish(dest, build)
except Conflict:
    sys.exit(6)
"""


def _check_complete(root: Path) -> tuple[int, int]:
    """Assert every visible destination is complete; return (directories, files) seen."""
    dirs = files = 0
    for entry in os.listdir(root):
        path = root / entry
        if entry.startswith("."):
            assert ".vqstage-" in entry or entry == _LOCK, entry
            continue
        kind, number = entry.split("-")
        if kind == "d":
            dirs += 1
            assert sorted(os.listdir(path)) == [f"part-{n}" for n in range(FILES)], entry
            for n in range(FILES):
                assert (path / f"part-{n}").read_bytes() == f"{number}:{n}:".encode() * 512
        else:
            files += 1
            assert path.read_bytes() == f"file {number}".encode() * 64, entry
    return dirs, files


_LOCK = ".vq-publish.lock"


def _kill_rounds(root: Path, rounds: int, mode: str, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    zygote = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    assert zygote.stdin is not None and zygote.stdout is not None
    try:
        for round_number in range(rounds):
            zygote.stdin.write(f"go {root} {round_number * 1000} {mode} {FILES}\n")
            zygote.stdin.flush()
            word, pid = zygote.stdout.readline().split()
            assert word == "ready"
            time.sleep(rng.uniform(0, 0.02))  # the fault injection point, not a wait
            os.kill(int(pid), signal.SIGKILL)
            zygote.stdin.write(f"reap {pid}\n")
            zygote.stdin.flush()
            reaped = zygote.stdout.readline().split()
            assert reaped[:2] == ["reaped", pid]
            assert os.WTERMSIG(int(reaped[2])) == signal.SIGKILL
            _check_complete(root)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=10)
        zygote.stdout.close()
    return _check_complete(root)


@pytest.mark.timeout(120)
def test_two_hundred_kills_leave_every_destination_absent_or_complete(tmp_path: Path) -> None:
    started = time.monotonic()
    native = tmp_path / "native"
    fallback = tmp_path / "fallback"
    native.mkdir()
    fallback.mkdir()
    dirs, files = _kill_rounds(native, 150, "native", seed=20)
    more_dirs, more_files = _kill_rounds(fallback, 50, "fallback", seed=21)
    # The kills landed inside publications, not only between them: some finished.
    assert dirs + more_dirs > 0 and files + more_files > 0
    assert time.monotonic() - started < 60


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_thousand_kills(tmp_path: Path) -> None:
    _kill_rounds(tmp_path, 2000, "native", seed=2000)


@pytest.mark.parametrize("mode", ["native", "fallback"])
def test_eight_racing_publishers_have_exactly_one_winner(tmp_path: Path, mode: str) -> None:
    dest, go = tmp_path / "dest", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(dest), str(go), f"p{n}", mode],
            stdout=subprocess.PIPE,
        )
        for n in range(8)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
    go.touch()
    codes = [proc.wait(timeout=30) for proc in procs]
    for proc in procs:
        assert proc.stdout is not None
        proc.stdout.close()
    assert sorted(codes) == [0] + [6] * 7
    winner = f"p{codes.index(0)}"
    assert {(dest / f"p{n}").read_text() for n in range(20)} == {winner}
    assert [e for e in os.listdir(tmp_path) if ".vqstage-" in e] == []


def test_cli_publish_copies_and_refuses_an_existing_destination(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "a").write_text("a")
    (source / "sub" / "b").write_text("b")
    env = {**os.environ, "VQ_STATE_DIR": str(tmp_path / "state")}
    ok = subprocess.run(
        [VQ_BIN, "publish", str(tmp_path / "out"), "--from", str(source), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert '"files": 2' in ok.stdout
    assert (tmp_path / "out" / "sub" / "b").read_text() == "b"
    again = subprocess.run(
        [VQ_BIN, "publish", str(tmp_path / "out"), "--from", str(source)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert again.returncode == 6
    assert again.stderr.startswith("vq: error: ")
    assert "hint: " in again.stderr
    assert "Traceback" not in again.stderr
    missing = subprocess.run(
        [VQ_BIN, "publish", str(tmp_path / "out2"), "--from", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert missing.returncode == 3
    assert not (tmp_path / "out2").exists()


def test_cli_publish_refuses_a_source_name_too_long_to_look_up(tmp_path: Path) -> None:
    """A --from name over the file system's limit is bad input (exit 4), not an internal error."""
    env = {**os.environ, "VQ_STATE_DIR": str(tmp_path / "state")}
    refused = subprocess.run(
        [VQ_BIN, "publish", str(tmp_path / "out"), "--from", str(tmp_path / ("a" * 300))],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert refused.returncode == 4, refused.stderr
    assert refused.stderr.startswith("vq: error: --from cannot be looked up")
    assert "hint: " in refused.stderr and "internal error" not in refused.stderr
    assert not (tmp_path / "out").exists()
