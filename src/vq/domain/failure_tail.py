"""The ``failure_tail`` of a non-COMPLETED job (§4.6): the last lines of its stderr."""

from __future__ import annotations

__all__ = ["TAIL_BYTES", "TAIL_LINES", "failure_tail"]

TAIL_BYTES = 4096
TAIL_LINES = 20


def failure_tail(data: bytes | None) -> str | None:
    """At most :data:`TAIL_LINES` lines from the trailing :data:`TAIL_BYTES` of ``data``.

    ``data`` should be the end of the stderr file (the caller reads at most TAIL_BYTES).
    Missing, empty, whitespace-only or binary (NUL-bearing) input gives None. A first
    line cut by the byte window is dropped unless it is the only one. Undecodable bytes
    are replaced, never fatal.
    """
    if not data:
        return None
    window = data[-TAIL_BYTES:]
    if b"\x00" in window:
        return None
    text = window.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if len(data) > TAIL_BYTES and len(lines) > 1:
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return None
    return "\n".join(lines[-TAIL_LINES:])
