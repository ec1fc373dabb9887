"""Framing of a remote command's output, so a noisy login shell cannot corrupt it (pure).

A remote shell may print anything before and after the command runs (``.bashrc``,
``.profile``, ``.bash_logout``, a banner), on either stream. vq therefore wraps the
command as::

    printf 'VQ-BEGIN-<nonce> %d\\n' "$$"; printf 'VQ-BEGIN-<nonce> %d\\n' "$$" >&2; CMD
    rc=$?; printf '\\nVQ-END-<nonce> %d\\n' "$rc"; printf '\\nVQ-END-<nonce> %d\\n' "$rc" >&2

with a fresh 128-bit nonce per call, and keeps, on each stream, exactly the bytes between
the first BEGIN line and the last END trailer (binary-safe: a tar stream passes through
untouched). The BEGIN line carries the remote shell's pid, which is also its process group
(sshd starts every session with ``setsid``), so a caller whose deadline expires can kill
the remote command's whole group. The exit code comes from the END trailer; a stream with
no trailer means the command's outcome is unknown.

Each argv element is quoted exactly once with :func:`shlex.quote`; elements may be bytes
(or ``str`` holding surrogate escapes) so non-UTF-8 arguments survive byte for byte.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Framed", "MarkerStripper", "new_nonce", "quote_argv", "wrap_command"]

_RC = re.compile(rb"(\d{1,3})\n")


def new_nonce() -> str:
    """128 random bits as 32 hex characters."""
    return secrets.token_hex(16)


def quote_argv(argv: Sequence[str | bytes]) -> str:
    """One POSIX shell word per element, each quoted once; bytes kept via surrogateescape."""
    return " ".join(shlex.quote(os.fsdecode(arg)) for arg in argv)


def wrap_command(argv: Sequence[str | bytes], nonce: str) -> str:
    """The string the remote login shell runs (see the module docstring)."""
    begin = f"printf 'VQ-BEGIN-{nonce} %d\\n' \"$$\""
    end = f"printf '\\nVQ-END-{nonce} %d\\n' \"$rc\""
    return f"{begin}; {begin} >&2; {quote_argv(argv)}\nrc=$?; {end}; {end} >&2"


@dataclass(frozen=True)
class Framed:
    """One stream after framing: the payload and what the markers said."""

    payload: bytes
    began: bool
    remote_pgid: int | None
    rc: int | None


class MarkerStripper:
    """Incremental filter of one stream: feed raw chunks, get payload bytes back.

    Bytes before the BEGIN line are dropped; bytes that may belong to the END trailer are
    held back until it is complete or ruled out; everything after the trailer is dropped.
    """

    def __init__(self, nonce: str) -> None:
        self._begin = f"VQ-BEGIN-{nonce} ".encode()
        self._end = f"\nVQ-END-{nonce} ".encode()
        self._buf = b""
        self.began = False
        self.remote_pgid: int | None = None
        self.rc: int | None = None

    @property
    def ended(self) -> bool:
        return self.rc is not None

    def feed(self, chunk: bytes) -> bytes:
        """Payload bytes that are now certain (possibly empty)."""
        if self.ended:
            return b""
        self._buf += chunk
        if not self.began:
            at = self._buf.find(self._begin)
            if at < 0:
                self._buf = self._buf[-(len(self._begin) - 1) :] if self._buf else b""
                return b""
            newline = self._buf.find(b"\n", at)
            if newline < 0:
                return b""
            pid = self._buf[at + len(self._begin) : newline]
            self.remote_pgid = int(pid) if pid.isdigit() else None
            self.began = True
            self._buf = self._buf[newline + 1 :]
        at = self._buf.find(self._end)
        if at >= 0:
            match = _RC.match(self._buf, at + len(self._end))
            if match is not None:
                self.rc = int(match.group(1))
                out, self._buf = self._buf[:at], b""
                return out
            tail = self._buf[at + len(self._end) :]
            if (len(tail) < 4 and tail.isdigit()) or not tail:
                out, self._buf = self._buf[:at], self._buf[at:]  # trailer may be incomplete
                return out
            # A look-alike that is not a trailer: it is payload.
            out, self._buf = self._buf[: at + 1], self._buf[at + 1 :]
            return out + self.feed(b"")
        keep = len(self._end) - 1
        out, self._buf = self._buf[:-keep] if len(self._buf) > keep else b"", self._buf[-keep:]
        return out

    def finish(self) -> Framed:
        """The end of the stream: what the markers said overall (payload fed out already)."""
        return Framed(b"", self.began, self.remote_pgid, self.rc)


def unframe(raw: bytes, nonce: str) -> Framed:
    """Frame a whole captured stream at once."""
    stripper = MarkerStripper(nonce)
    payload = stripper.feed(raw)
    return Framed(payload, stripper.began, stripper.remote_pgid, stripper.rc)
