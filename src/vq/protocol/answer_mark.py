"""The answer mark: where a remote vq's own output begins, past a wrapper's banner (§2.2).

A configured ``vq_command`` may print before vq starts: ``sh -c 'echo "Loading vq/0.1
module"; exec vq "$@"'`` is the usual module or conda pattern. The SSH framing
(:mod:`vq.transport.framing`) keeps that banner, since it comes from the command run. So
the side that runs a remote vq sets :data:`MARK_ENV` to a fresh nonce (32 hex digits) in
the command's environment, and a vq that finds it there removes it from its environment
(a job it submits or a daemon it starts never inherits it) and writes
``VQ-ANSWER-<nonce>\\n`` on stdout and on stderr before anything else
(:func:`announce`). The caller keeps, on each stream, only what follows the first mark
(:func:`after_mark`, :class:`MarkSkipper`).

A remote vq older than the mark prints none: its output is then taken whole, as before
(a stream starts once :data:`HOLD_LIMIT` bytes or its complete end arrived without a
mark; a stream cut before its mark arrived yields nothing).

Stdlib only: :func:`announce` runs first thing in every ``vq`` process that has the variable.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import MutableMapping
    from typing import BinaryIO

__all__ = ["HOLD_LIMIT", "MARK_ENV", "MarkSkipper", "after_mark", "announce", "mark_line"]

MARK_ENV = "VQ_ANSWER_MARK"
#: Bytes a stream holds while looking for the mark before it takes the output whole.
HOLD_LIMIT = 64 << 10
_NONCE = re.compile(r"[0-9a-f]{32}")


def mark_line(nonce: str) -> bytes:
    """The line a remote vq writes first on each stream."""
    return f"VQ-ANSWER-{nonce}\n".encode()


def announce(environ: MutableMapping[str, str], stdout: BinaryIO, stderr: BinaryIO) -> None:
    """Remove :data:`MARK_ENV` from ``environ`` and, when it holds a nonce, write its mark
    line on both streams (flushed, so it precedes everything the command writes)."""
    nonce = environ.pop(MARK_ENV, None)
    if nonce is None or not _NONCE.fullmatch(nonce):
        return
    for stream in (stdout, stderr):
        try:
            stream.write(mark_line(nonce))
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed stream: the caller then takes the output whole


def after_mark(data: bytes, nonce: str) -> bytes:
    """What follows the first mark in ``data``; all of ``data`` when it holds none."""
    line = mark_line(nonce)
    at = data.find(line)
    return data if at < 0 else data[at + len(line) :]


class MarkSkipper:
    """:func:`after_mark` for a stream read in chunks: :meth:`feed` returns the bytes that
    are now known to follow the mark (held back until it is found, the hold limit is
    reached or :meth:`finish` is called)."""

    def __init__(self, nonce: str) -> None:
        self._line = mark_line(nonce)
        self._held = b""
        self._passing = False

    def feed(self, chunk: bytes) -> bytes:
        if self._passing:
            return chunk
        self._held += chunk
        at = self._held.find(self._line)
        if at >= 0:
            out, self._held, self._passing = self._held[at + len(self._line) :], b"", True
            return out
        if len(self._held) >= HOLD_LIMIT:  # no mark: a vq that predates it
            out, self._held, self._passing = self._held, b"", True
            return out
        return b""

    def finish(self, *, complete: bool = True) -> bytes:
        """The held bytes at the end of the stream: when it is ``complete`` (the command's
        end was seen) and no mark came, the output of a vq that predates the mark, whole;
        when it was cut, nothing (the mark may have been cut off: what is held may be a
        banner, or a piece of the mark itself)."""
        out, self._held, self._passing = self._held, b"", True
        return out if complete else b""
