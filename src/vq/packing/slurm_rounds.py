"""One observation round over several packed allocations of a lane (pure).

A lane's daemon observes its packed allocations together: one ``squeue --jobs=J1,J2,…``,
one ``sacct --duplicates --name=vqp-<a1>,vqp-<a2>,…`` and one read of every allocation's
slot markers per round, instead of those three commands per allocation — so one token of
the host's scheduler budget observes up to :data:`ROUND_SIZE` allocations.

This module cuts the allocations into rounds (:func:`rounds`, within the command text
bound) and reads the slot markers (vq's own files, by
:func:`~vq.packing.evidence.parse_markers`); the round's ``squeue`` and ``sacct`` words
and answers are the Slurm dialect's (:mod:`vq.dialects.slurm_alloc`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vq.dialects.slurm_alloc import (
    MAX_COMMAND_TEXT,
    MAX_LINES,
    AccountingRecord,
    ObservationError,
    QueueRow,
    bounded_lines,
    checked,
    job_name,
)
from vq.packing.evidence import parse_markers

__all__ = [
    "MARKERS_ROUND",
    "ROUND_SIZE",
    "RoundAnswer",
    "Watched",
    "markers_round_argv",
    "parse_markers_round",
    "rounds",
]

#: The most allocations one round observes.
ROUND_SIZE = 32
#: Every allocation directory given, in order: ``index|slot|code`` per exit marker (an
#: allocation whose directory is missing has none yet).
MARKERS_ROUND = (
    'k=0; for w do if cd -- "$w" 2>/dev/null; then for s in *; do '
    'if [ -f "$s/_vq/exit-code" ]; then printf "%s|%s|%s\\n" "$k" "$s" '
    '"$(head -c 16 "$s/_vq/exit-code" | tr -dc 0-9-)"; fi; done; fi; k=$((k+1)); done'
)
#: One allocation's part of a round: (its active queue row or None, its accounting
#: records, its slot markers), or why its evidence cannot be trusted.
RoundAnswer = (
    tuple[QueueRow | None, list[AccountingRecord], dict[int, int | None]] | ObservationError
)
#: What a round's three commands spend besides the allocations' own words.
_FIXED_TEXT = 1024


@dataclass(frozen=True)
class Watched:
    """One accepted allocation a round observes."""

    allocation_id: str
    job_id: str
    work: str  # ``<work_root>/<alloc>``


def _text(words: Sequence[str]) -> int:
    return sum(len(word.encode()) + 1 for word in words)


def _cost(item: Watched) -> int:
    """The command text one allocation adds to the longest of the round's commands."""
    return max(len(item.work.encode()), len(job_name(item.allocation_id)), len(item.job_id)) + 2


def rounds(items: Sequence[Watched]) -> list[list[Watched]]:
    """``items`` in order, cut into rounds of at most :data:`ROUND_SIZE` whose commands
    stay within the command text bound."""
    groups: list[list[Watched]] = []
    current: list[Watched] = []
    used = _FIXED_TEXT + _text(MARKERS_ROUND.split())
    budget = MAX_COMMAND_TEXT
    size = used
    for item in items:
        cost = _cost(item)
        if current and (len(current) >= ROUND_SIZE or size + cost > budget):
            groups.append(current)
            current, size = [], used
        current.append(item)
        size += cost
    if current:
        groups.append(current)
    return groups


# --- markers -----------------------------------------------------------------------------
def markers_round_argv(works: Sequence[str]) -> list[str]:
    return checked(["sh", "-c", MARKERS_ROUND, "sh", *works], "slot markers")


def parse_markers_round(text: str, count: int) -> list[dict[int, int | None] | ObservationError]:
    """Per allocation, in the order asked: its slot markers (or what made them unreadable)."""
    per: list[list[str]] = [[] for _ in range(count)]
    for line in bounded_lines(text, "slot markers", MAX_LINES * count):
        index, sep, rest = line.partition("|")
        if not sep or not index.isdigit() or int(index) >= count:
            raise ObservationError("slot markers: a malformed line")
        per[int(index)].append(rest)
    markers: list[dict[int, int | None] | ObservationError] = []
    for lines in per:
        try:
            markers.append(parse_markers("\n".join(lines)))
        except ObservationError as exc:
            markers.append(exc)
    return markers
