"""`vq pack log` on a terminal: untrusted log bytes never reach it as control sequences."""

from __future__ import annotations

from vq.cli.pack_run import _escape


def test_controls_and_invalid_utf8_are_shown_escaped() -> None:
    raw = b"ok\tline\n\x1b[2J\x07\x7f\xc2\x9b31m caf\xc3\xa9 \xff\n"
    shown = _escape(raw)
    assert shown == "ok\tline\n\\x1b[2J\\x07\\x7f\\x9b31m café \\xff\n"
    assert not any(ord(ch) < 0x20 and ch not in "\n\t" for ch in shown)
