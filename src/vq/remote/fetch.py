"""``vq fetch HOST ID``: placeholder."""

from __future__ import annotations

from typing import Any, TextIO

from vq.errors import UsageError
from vq.remote.host import RemoteHost

__all__ = ["fetch_remote"]


def fetch_remote(host: RemoteHost, params: dict[str, Any], *, out: TextIO) -> int:
    raise UsageError("not yet")
