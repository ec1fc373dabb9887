"""Hostless per-job verbs when hosts are configured (§2.2): placeholder, filled below."""

from __future__ import annotations

__all__ = ["run_hostless"]


def run_hostless(verb: str, rest: list[str], index: int | None) -> int | list[str] | None:
    return None
