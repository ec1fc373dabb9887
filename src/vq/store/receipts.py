"""Reading a job's resource receipt ``jobs/<id>/_vq/resource-usage.json``.

The collector writes it when the command ends (``vq.resource-usage.v1``: wait4's
``max_rss_kb``, user and system CPU seconds, wall seconds). Reads never follow a
symlink, never block (a FIFO is refused at once) and stop at 1 MiB; a missing,
unreadable or malformed receipt is None.
"""

from __future__ import annotations

from typing import cast

from vq._fs import read_json_regular
from vq.domain.receipt import Receipt
from vq.paths import StatePaths

__all__ = ["MAX_RECEIPT_BYTES", "Receipt", "read_receipt"]

MAX_RECEIPT_BYTES = 1 << 20


def read_receipt(paths: StatePaths, job_id: str) -> Receipt | None:
    try:
        data = read_json_regular(paths.resource_usage(job_id), MAX_RECEIPT_BYTES)
    except (OSError, ValueError):  # missing, a FIFO or directory, too large, malformed
        return None
    return cast(Receipt, data) if isinstance(data, dict) else None
