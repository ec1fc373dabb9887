"""Writing results and errors (stdlib only, so the fast submit path can use it)."""

from __future__ import annotations

import json
import sys

# typing is imported for the type checker only: this module is on the Click-free
# `vq submit` fast path, where importing typing costs milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__all__ = ["echo_json", "print_error", "warn"]


def print_error(message: str, hint: str | None) -> None:
    """The one error format: ``vq: error: <message>`` then ``hint: <hint>``."""
    sys.stderr.write(f"vq: error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    sys.stderr.write(f"vq: warning: {message}\n")


def echo_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    sys.stdout.flush()
