"""The ``failure_tail`` of a non-COMPLETED job (§4.6): the last lines of its stderr."""

from __future__ import annotations

__all__ = ["TAIL_BYTES", "TAIL_LINES", "failure_tail"]

TAIL_BYTES = 4096
TAIL_LINES = 20


def failure_tail(data: bytes | None) -> str | None:
    """At most :data:`TAIL_LINES` lines from the trailing :data:`TAIL_BYTES` of ``data``.

    ``data`` is the end of the stderr file. Pass ``TAIL_BYTES + 1`` bytes (when the file
    is that long) so the function can tell whether the window's first line was cut: it is
    dropped only when the byte before the window is not a newline (and other lines
    remain). Missing, empty, whitespace-only or binary (NUL-bearing) input gives None.
    Undecodable bytes are replaced, never fatal.
    """
    if not data:
        return None
    window = data[-TAIL_BYTES:]
    if b"\x00" in window:
        return None
    lines = window.decode("utf-8", errors="replace").split("\n")
    first_line_cut = len(data) > TAIL_BYTES and data[-TAIL_BYTES - 1 : -TAIL_BYTES] != b"\n"
    if first_line_cut and len(lines) > 1:
        lines = lines[1:]
    lines = [line.rstrip("\r") for line in lines]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return None
    return "\n".join(lines[-TAIL_LINES:])
