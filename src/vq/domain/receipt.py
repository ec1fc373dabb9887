"""A job's resource receipt, ``jobs/<id>/_vq/resource-usage.json`` (``vq.resource-usage.v1``).

The collector writes it when the command ends (wait4's figures) and a scheduler script
writes it from GNU time; :mod:`vq.store.receipts` reads it. Pure: the shape only.
"""

from __future__ import annotations

from typing import TypedDict

__all__ = ["Receipt"]


class Receipt(TypedDict, total=False):
    """A ``vq.resource-usage.v1`` receipt, as the collector (``wait4``) or a scheduler
    script (GNU time) writes it; an ``error`` receipt carries only the outcome keys. The
    file sits in the job's workspace, so a reader checks each value's type before use."""

    schema: str
    status: str
    source: str
    wall_seconds: float
    user_cpu_seconds: float
    system_cpu_seconds: float
    active_cpu_seconds: float
    max_rss_kb: int
    exit_code: int
    signal: int | None
    command_status: str
    started_at: str | None
    finished_at: str | None
    process_count: int | None
    semantics: dict[str, str]
    error: str
