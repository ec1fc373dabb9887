"""Reading a job's resource receipt ``jobs/<id>/_vq/resource-usage.json``.

The collector writes it when the command ends (``vq.resource-usage.v1``: wait4's
``max_rss_kb``, user and system CPU seconds, wall seconds). Reads never follow a
symlink and stop at 1 MiB; a missing, unreadable or malformed receipt is None.
"""

from __future__ import annotations

import json
import os
from typing import Any

from vq.paths import StatePaths

__all__ = ["MAX_RECEIPT_BYTES", "read_receipt"]

MAX_RECEIPT_BYTES = 1 << 20


def read_receipt(paths: StatePaths, job_id: str) -> dict[str, Any] | None:
    try:
        fd = os.open(paths.resource_usage(job_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            data = json.loads(handle.read(MAX_RECEIPT_BYTES))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
