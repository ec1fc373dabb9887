"""Scheduler answers stored under tests/fixtures/dialects/ (see the README there).

A transcript file is ``#`` comment lines (title, source, argv), ``returncode: N``, then
``--- stdout`` and ``--- stderr`` sections holding the exact text.
"""

from __future__ import annotations

from pathlib import Path

from vq.dialects import CommandResult

ROOT = Path(__file__).parent.parent / "fixtures" / "dialects"


def transcript(name: str) -> CommandResult:
    """``transcript("slurm/squeue_phases")`` → the stored answer as a CommandResult."""
    text = (ROOT / f"{name}.txt").read_text(encoding="utf-8")
    head, rest = text.split("--- stdout\n", 1)
    stdout, stderr = rest.split("--- stderr\n", 1)
    codes = [line for line in head.splitlines() if line.startswith("returncode: ")]
    assert len(codes) == 1, f"{name}: needs exactly one returncode line"
    return CommandResult(int(codes[0].split(": ", 1)[1]), stdout, stderr)


def all_transcripts(dialect: str) -> list[str]:
    return sorted(f"{dialect}/{path.stem}" for path in (ROOT / dialect).glob("*.txt"))
