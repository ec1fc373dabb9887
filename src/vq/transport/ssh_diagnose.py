"""What an ``ssh`` exit status 255 means, read from OpenSSH's own stderr wording (pure).

OpenSSH exits 255 for every failure of its own (and passes the remote status through
otherwise; vq's framing tells the two apart). The messages matched here are OpenSSH's:

- "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@" and "Host key for HOST has
  changed and you have requested strict checking." → the host key changed;
- "No ED25519 host key is known for HOST and you have requested strict checking." and the
  bare "Host key verification failed." → the host key is unknown;
- "Permission denied (publickey)." / "Too many authentication failures" → credentials;
- "mux_client_…", "Control socket connect(…)", "master hung up" → a broken ControlMaster;
- "Connection refused/timed out", "No route to host", "Could not resolve hostname",
  "Connection timed out during banner exchange", "Connection closed by …",
  "Timeout, server … not responding." → the host is unreachable.
"""

from __future__ import annotations

import re
from enum import Enum

__all__ = ["Failure", "classify", "last_line"]


class Failure(Enum):
    HOST_KEY_CHANGED = "host-key-changed"
    HOST_KEY_UNKNOWN = "host-key-unknown"
    AUTH = "auth"
    MUX = "mux"
    UNREACHABLE = "unreachable"
    OTHER = "other"


_RULES: tuple[tuple[Failure, re.Pattern[str]], ...] = (
    (
        Failure.HOST_KEY_CHANGED,
        re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|host key for .* has changed", re.I),
    ),
    (
        Failure.HOST_KEY_UNKNOWN,
        re.compile(r"host key is known for|Host key verification failed", re.I),
    ),
    (
        Failure.AUTH,
        re.compile(r"Permission denied \(|Too many authentication failures|no mutual signature"),
    ),
    (
        Failure.MUX,
        re.compile(r"mux_client_|Control socket connect|master hung up|read from master failed"),
    ),
    (
        Failure.UNREACHABLE,
        re.compile(
            r"Connection (refused|timed out|closed by|reset by)|No route to host"
            r"|Network is unreachable|Could not resolve hostname|Name or service not known"
            r"|Temporary failure in name resolution|banner exchange|kex_exchange_identification"
            r"|Timeout, server .* not responding|Broken pipe|client_loop: send disconnect",
            re.I,
        ),
    ),
)


def classify(stderr: bytes) -> Failure:
    """The kind of an ssh failure (exit status 255) from its stderr."""
    text = stderr.decode(errors="replace")
    for failure, pattern in _RULES:
        if pattern.search(text):
            return failure
    return Failure.OTHER


def last_line(stderr: bytes) -> str:
    """ssh's last non-empty stderr line (its most specific words), for messages."""
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
