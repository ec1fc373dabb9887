"""``vq queue --all`` and ``vq overview --all``: placeholder."""

from __future__ import annotations

__all__ = ["run_fleet"]


def run_fleet(verb: str, rest: list[str]) -> int | list[str] | None:
    return [verb, *rest]
