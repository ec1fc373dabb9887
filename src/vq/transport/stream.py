"""A running child whose stdout is read incrementally, within a deadline (the base of
``open_stream`` for both runners).

stdin bytes are written by a background thread; stderr is collected by another, capped
(exceeding the cap kills the group and the overflow is reported by :meth:`finish`). Every
read waits at most until the call's deadline; expiry kills the process group. With an
inactivity deadline (:attr:`ProcessStream.idle_s`, which a wrapper may set once the payload
began), a read that sees no byte for that long does the same and sets
:attr:`ProcessStream.idle_out` (a silent stream, not a slow one: the transfer as a whole may
take longer).
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from vq.transport.process import kill_group, spawn

__all__ = ["ProcessStream", "StreamEnd"]

_REAP_S = 5.0


@dataclass(frozen=True)
class StreamEnd:
    rc: int | None
    stderr: bytes
    timed_out: bool
    stderr_overflow: bool


class ProcessStream:
    def __init__(
        self,
        argv: list[str | bytes],
        *,
        stdin: bytes | None,
        deadline_s: float,
        max_stderr_bytes: int,
        env: Mapping[str, str] | None = None,
        idle_s: float | None = None,
    ) -> None:
        self.until = time.monotonic() + deadline_s
        self.idle_s = idle_s
        self.idle_out = False
        self._cap = max_stderr_bytes
        self._stderr = bytearray()
        self.stderr_overflow = False
        self.timed_out = False
        self._eof = False
        self._proc = spawn(argv, stdin_pipe=stdin is not None, env=env)
        self._threads = [threading.Thread(target=self._collect_stderr, daemon=True)]
        if stdin is not None:
            self._threads.append(threading.Thread(target=self._feed, args=(stdin,), daemon=True))
        for thread in self._threads:
            thread.start()

    def _feed(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        with contextlib.suppress(OSError):
            self._proc.stdin.write(data)
        with contextlib.suppress(OSError):
            self._proc.stdin.close()

    def _collect_stderr(self) -> None:
        assert self._proc.stderr is not None
        fd = self._proc.stderr.fileno()
        while chunk := os.read(fd, 65536):
            self._stderr += chunk
            if len(self._stderr) > self._cap:
                self.stderr_overflow = True
                kill_group(self._proc)
                return

    def read_raw(self, size: int) -> bytes:
        """Up to ``size`` bytes of raw stdout, b"" at EOF; on the deadline, or after
        ``idle_s`` without a byte, kill and b"" (``timed_out``; ``idle_out`` for the latter)."""
        if self._eof:
            return b""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        left = self.until - time.monotonic()
        wait = left if self.idle_s is None else min(left, self.idle_s)
        ready = select.select([fd], [], [], max(0.0, wait))[0] if wait > 0 else []
        if not ready:
            self.idle_out = wait < left
            self.timed_out = True
            self._eof = True
            kill_group(self._proc)
            return b""
        data = os.read(fd, size)
        if not data:
            self._eof = True
        return data

    def finish(self) -> StreamEnd:
        """Wait for the child within the deadline (killing it on expiry) and collect stderr."""
        try:
            rc: int | None = self._proc.wait(timeout=max(0.0, self.until - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            kill_group(self._proc)
            rc = None
        if self.timed_out or self.stderr_overflow:
            rc = None
        self.close()
        return StreamEnd(rc, bytes(self._stderr[: self._cap]), self.timed_out, self.stderr_overflow)

    def close(self) -> None:
        if self._proc.returncode is None and self._proc.poll() is None:
            kill_group(self._proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=_REAP_S)
        for thread in self._threads:
            thread.join(timeout=_REAP_S)
        for pipe in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
