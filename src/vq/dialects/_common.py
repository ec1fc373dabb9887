"""Small helpers the dialect parsers share."""

from __future__ import annotations

from collections.abc import Sequence

from vq.dialects.model import CommandResult, ParseFailure, ParseFailureKind

__all__ = ["bounded", "command_failed", "failure", "lines_of", "ordered_unique"]

_DETAIL_LIMIT = 300


def bounded(text: str, limit: int = _DETAIL_LIMIT) -> str:
    """One line of at most ``limit`` characters (control characters replaced)."""
    flat = " ".join(text.split())
    flat = "".join(ch if ch.isprintable() else "?" for ch in flat)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def failure(command: str, kind: ParseFailureKind, detail: str) -> ParseFailure:
    return ParseFailure(command=command, kind=kind, detail=bounded(detail))


def command_failed(command: str, result: CommandResult) -> ParseFailure:
    said = result.stderr.strip() or result.stdout.strip() or "no output"
    return failure(command, "command_failed", f"exit {result.returncode}: {said}")


def lines_of(text: str) -> list[str]:
    """The non-blank lines of ``text``, right-stripped."""
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def ordered_unique(ids: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))
