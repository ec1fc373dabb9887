"""``vq logs HOST ID -f`` and ``vq wait HOST ID…``: remote verbs that ride out partitions.

- :func:`follow_logs` streams the remote ``vq logs -f`` and counts the bytes it wrote;
  after a dropped connection it reconnects with ``--from-byte <count>``, so after a heal
  no byte is lost or printed twice. With ``--tail N`` the start offset is asked for
  first (``--tell``).
- :func:`wait_remote` runs the remote ``vq wait`` in bounded slices; a transient
  transport failure is waited out (the job keeps running on its host) and the final exit
  status is the remote job's.

Both report each loss of contact once on stderr and back off 1, 2, 4 … 10 s between
attempts; the host's health file records every failure (a stream dropped mid-read
included) and a stream's first answer after one.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import BinaryIO

from vq.domain.durations import format_duration
from vq.domain.text import escape_control_bytes
from vq.errors import TransportError, WaitTimeout
from vq.protocol.remote_answers import BadAnswer, WaitAnswer, read_offset
from vq.remote.host import RemoteHost, job_words, remote_error

__all__ = ["follow_logs", "wait_remote"]

_FOLLOW_DEADLINE_S = 7 * 24 * 3600.0
_WAIT_SLICE_S = 30.0
_RETRY_MAX_S = 10.0


def _note(message: str) -> None:
    sys.stderr.write(f"vq: {message}\n")
    sys.stderr.flush()


class _Retry:
    """Backoff between attempts after a transient failure (noted once per outage)."""

    def __init__(self, host: RemoteHost, sleep: Callable[[float], None]) -> None:
        self.host, self.sleep, self.delay, self.down = host, sleep, 1.0, False

    def failed(self, exc: TransportError, what: str) -> None:
        if not exc.transient:
            raise exc
        if not self.down:
            _note(f"lost contact with host {self.host.name} ({exc.message}); {what}")
            self.down = True
        self.sleep(self.delay)
        self.delay = min(self.delay * 2, _RETRY_MAX_S)

    def answered(self) -> None:
        if self.down:
            _note(f"host {self.host.name} answers again")
        self.down, self.delay = False, 1.0


def follow_logs(
    host: RemoteHost,
    job_id: str,
    *,
    use_stderr: bool,
    tail: int | None,
    follow: bool,
    out: BinaryIO,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Print the remote job's log (see the module docstring); returns the exit status."""
    base = ["logs", *(["--stderr"] if use_stderr else [])]
    if not follow:
        words = [*base, *(["--tail", str(tail)] if tail is not None else [])]
        return _copy_stream(host, job_words(words, [job_id]), out, _FOLLOW_DEADLINE_S)[1]
    retry = _Retry(host, sleep)
    offset: int | None = None
    while offset is None:
        try:
            if tail is None:
                offset = 0
            else:
                words = job_words([*base, "--tail", str(tail), "--tell"], [job_id])
                told = host.run(words)
                if told.rc != 0:
                    raise remote_error(host.name, told)
                try:
                    offset = read_offset(told.stdout)
                except BadAnswer as exc:
                    raise host.bad_answer(words, str(exc)) from None
        except TransportError as exc:
            retry.failed(exc, "retrying")
    while True:
        words = job_words([*base, "-f", "--from-byte", str(offset)], [job_id])
        try:
            opened = time.monotonic()
            stream = host.stream(words, deadline_s=_FOLLOW_DEADLINE_S)  # records a failure
            try:
                first = True
                while chunk := stream.read():
                    if first:
                        host.answered((time.monotonic() - opened) * 1000)
                        first = False
                    out.write(chunk)
                    out.flush()
                    offset += len(chunk)
                    retry.answered()
                result = stream.wait()
            except TransportError as exc:
                raise host.failed(exc) from exc  # a drop mid-stream marks the host
            finally:
                stream.close()
        except TransportError as exc:
            retry.failed(exc, f"resuming at byte {offset} when it answers")
            continue
        retry.answered()
        if result.rc != 0:
            raise remote_error(host.name, result)
        return 0


def _copy_stream(
    host: RemoteHost, words: list[str], out: BinaryIO, deadline_s: float
) -> tuple[int, int]:
    """Stream ``vq WORDS`` to ``out``; returns (bytes written, remote exit status)."""
    written = 0
    stream = host.stream(words, deadline_s=deadline_s)  # records a failure to start
    try:
        while chunk := stream.read():
            out.write(chunk)
            written += len(chunk)
        result = stream.wait()
    except TransportError as exc:
        raise host.failed(exc) from exc
    finally:
        stream.close()
    out.flush()
    if result.rc != 0:
        raise remote_error(host.name, result)
    return written, 0


def wait_remote(
    host: RemoteHost,
    job_ids: list[str],
    *,
    timeout_s: float | None,
    extra: list[str],
    out: BinaryIO,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Wait for remote jobs; returns the remote ``vq wait`` status (the job's code)."""
    retry = _Retry(host, sleep)
    until = None if timeout_s is None else clock() + timeout_s
    while True:
        slice_s = _WAIT_SLICE_S if until is None else max(min(_WAIT_SLICE_S, until - clock()), 1)
        words = job_words(["wait", "--timeout", f"{int(slice_s)}s", *extra], job_ids)
        try:
            result = host.run(words, deadline_s=slice_s + host.timeout + 5)
        except TransportError as exc:
            if until is not None and clock() >= until:
                raise WaitTimeout(
                    f"gave up after {format_duration(timeout_s or 0)}; host {host.name} "
                    "did not answer",
                    hint="the jobs keep running there; wait again later",
                ) from exc
            retry.failed(exc, "waiting for it to answer")
            continue
        retry.answered()
        sliced = result.rc == WaitTimeout.exit_code and b"vq: error:" in result.stderr
        if sliced and (until is None or clock() < until):
            continue  # the slice ran out (a job's own exit 124 carries no error line)
        if "--json" in extra and result.stdout.strip():
            answer = host.read(words, result.stdout, WaitAnswer)
            out.write(json.dumps(answer, indent=2).encode() + b"\n")
        else:
            out.write(escape_control_bytes(result.stdout))
        out.flush()
        sys.stderr.buffer.write(escape_control_bytes(result.stderr))
        sys.stderr.flush()
        return result.rc
