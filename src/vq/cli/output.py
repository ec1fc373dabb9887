"""Writing results and errors (stdlib only, so the fast submit path can use it)."""

from __future__ import annotations

import sys

from vq.cli.json_text import dumps_indented

# typing is imported for the type checker only: this module is on the Click-free
# `vq submit` fast path, where importing typing costs milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from vq.errors import StorageError


__all__ = ["NO_DAEMON", "echo_json", "note", "print_error", "storage_failure", "warn"]

#: The one wording for "this waits for a daemon" (submit, logs -f, wait --timeout).
NO_DAEMON = "no daemon is running: it will start when one does (`vq daemon start`)"


def print_error(message: str, hint: str | None) -> None:
    """The one error format: ``vq: error: <message>`` then ``hint: <hint>``."""
    sys.stderr.write(f"vq: error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    sys.stderr.flush()


def storage_failure(exc: BaseException) -> StorageError | None:
    """The clear error for a write the disk refused (ENOSPC, EDQUOT, EIO) that no
    service turned into one: naming the state root when the file lies under it.
    None for any other exception."""
    import os

    from vq.config.roots import state_root
    from vq.errors import storage_error_under

    return storage_error_under(exc, state_root(os.environ))


def warn(message: str) -> None:
    sys.stderr.write(f"vq: warning: {message}\n")


def note(message: str) -> None:
    """An informational line on stderr (stdout stays machine-readable)."""
    sys.stderr.write(f"vq: {message}\n")
    sys.stderr.flush()


def echo_json(payload: Any) -> None:
    """``payload`` as indented JSON (``json.dumps(payload, indent=2)``) and a newline."""
    sys.stdout.write(dumps_indented(payload) + "\n")
    sys.stdout.flush()
