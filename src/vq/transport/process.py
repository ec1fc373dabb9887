"""Spawn one external command in its own process group and capture it within bounds.

The single place that starts child processes for the runners: never through a shell,
always in a new session (so the whole group can be killed), stdin from the given bytes or
/dev/null, both output streams read concurrently with a per-stream byte cap and an overall
deadline. Hitting either bound kills the child's process group with SIGKILL and reports
which bound was hit; it never truncates silently. Both runners translate the result into
their own errors.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Captured", "capture", "kill_group"]

_CHUNK = 65536
#: How long to wait for a killed group's leader to be reaped.
_REAP_S = 5.0


@dataclass(frozen=True)
class Captured:
    """What a bounded capture saw. ``rc`` is None when the child was killed by us."""

    rc: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    overflow: str | None = None  # "stdout" or "stderr": the stream that exceeded its cap
    elapsed_s: float = 0.0


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's process group (only while the leader is not yet reaped, so the
    group id cannot have been reused)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def spawn(
    argv: Sequence[str | bytes],
    *,
    stdin_pipe: bool,
    env: Mapping[str, str] | None = None,
    stdout: int = subprocess.PIPE,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session; OSError (missing program…) propagates."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=dict(env) if env is not None else None,
        close_fds=True,
    )


def capture(
    argv: Sequence[str | bytes],
    *,
    stdin: bytes | None,
    deadline_s: float,
    max_output_bytes: int,
    env: Mapping[str, str] | None = None,
) -> Captured:
    """Run ``argv`` to completion or to a bound; see the module docstring."""
    started = time.monotonic()
    until = started + deadline_s
    proc = spawn(argv, stdin_pipe=stdin is not None, env=env)
    try:
        return _pump(proc, stdin, until, max_output_bytes, started)
    finally:
        if proc.returncode is None:  # an exception escaped: leave nothing behind
            kill_group(proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_REAP_S)
        _close(proc)


def _pump(
    proc: subprocess.Popen[bytes],
    stdin: bytes | None,
    until: float,
    cap: int,
    started: float,
) -> Captured:
    assert proc.stdout is not None and proc.stderr is not None
    chunks: dict[int, list[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
    sizes = dict.fromkeys(chunks, 0)
    names = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
    pending = memoryview(stdin or b"")
    stdin_fd = -1
    with selectors.DefaultSelector() as sel:
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        if proc.stdin is not None:
            if pending:
                stdin_fd = proc.stdin.fileno()
                os.set_blocking(stdin_fd, False)
                sel.register(stdin_fd, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        while sel.get_map():
            left = until - time.monotonic()
            if left <= 0:
                return _killed(proc, chunks, started, timed_out=True)
            for key, _ in sel.select(left):
                fd = int(key.fd)
                if fd == stdin_fd:
                    try:
                        pending = pending[os.write(fd, pending[:_CHUNK]) :]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(fd)
                        assert proc.stdin is not None
                        proc.stdin.close()
                    continue
                data = os.read(fd, _CHUNK)
                if not data:
                    sel.unregister(fd)
                    continue
                chunks[fd].append(data)
                sizes[fd] += len(data)
                if sizes[fd] > cap:
                    return _killed(proc, chunks, started, overflow=names[fd])
    try:
        rc = proc.wait(timeout=max(0.0, until - time.monotonic()))
    except subprocess.TimeoutExpired:
        return _killed(proc, chunks, started, timed_out=True)
    out, err = (b"".join(c) for c in chunks.values())
    return Captured(rc, out, err, elapsed_s=time.monotonic() - started)


def _killed(
    proc: subprocess.Popen[bytes],
    chunks: dict[int, list[bytes]],
    started: float,
    *,
    timed_out: bool = False,
    overflow: str | None = None,
) -> Captured:
    kill_group(proc)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_REAP_S)
    out, err = (b"".join(c) for c in chunks.values())
    return Captured(None, out, err, timed_out, overflow, time.monotonic() - started)


def _close(proc: subprocess.Popen[bytes]) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def describe_os_error(program: str | bytes, exc: OSError) -> str:
    """One line for a failure to start ``program``."""
    name = os.fsdecode(program)
    if exc.errno == errno.ENOENT:
        return f"{name}: command not found"
    return f"{name}: {exc.strerror or exc}"
