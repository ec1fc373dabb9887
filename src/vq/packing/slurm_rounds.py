"""One observation round over several packed allocations of a lane (pure).

A lane's daemon observes its packed allocations together: one ``squeue --jobs=J1,J2,…``,
one ``sacct --duplicates --name=vqp-<a1>,vqp-<a2>,…`` and one read of every allocation's
slot markers per round, instead of those three commands per allocation — so one token of
the host's scheduler budget observes up to :data:`ROUND_SIZE` allocations.

The rules are :mod:`vq.packing.slurm_text`'s, per allocation: a queue row must repeat its
allocation's exact name and comment (otherwise that allocation's observation fails, not
its neighbours'), accounting is parsed per allocation by
:func:`~vq.packing.slurm_text.parse_sacct` (another allocation's rows are other jobs), and
markers by :func:`~vq.packing.evidence.parse_markers`. The line bound grows with the
allocations observed (:data:`~vq.packing.slurm_text.MAX_LINES` each); the command text
bound (:func:`rounds`) and the 1 MiB per stream stay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vq.packing.evidence import parse_markers
from vq.packing.script import comment, job_name
from vq.packing.slurm_text import (
    _JOB_ID,
    _SACCT_FIELDS,
    _SQUEUE_FORMAT,
    _TIME,
    ENV,
    MAX_COMMAND_TEXT,
    MAX_LINES,
    AccountingRecord,
    ForeignJob,
    ObservationError,
    QueueRow,
    _lines,
    normalize_state,
    parse_sacct,
)

__all__ = [
    "MARKERS_ROUND",
    "ROUND_SIZE",
    "RoundAnswer",
    "Watched",
    "markers_round_argv",
    "parse_markers_round",
    "parse_sacct_round",
    "parse_squeue_round",
    "rounds",
    "sacct_round_argv",
    "squeue_round_argv",
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


def _checked(argv: list[str], what: str) -> list[str]:
    full = [*ENV, *argv]
    if _text(full) > MAX_COMMAND_TEXT:
        raise ObservationError(f"{what}: the command is over {MAX_COMMAND_TEXT} bytes")
    if any("\x00" in arg or "\n" in arg for arg in full):
        raise ObservationError(f"{what}: an argument holds a NUL or a newline")
    return full


# --- squeue ------------------------------------------------------------------------------
def squeue_round_argv(job_ids: Sequence[str]) -> list[str]:
    if not job_ids or not all(_JOB_ID.fullmatch(job) for job in job_ids):
        raise ObservationError("squeue: a round needs job ids")
    jobs = ",".join(job_ids)
    argv = ["squeue", "--noheader", f"--jobs={jobs}", f"--format={_SQUEUE_FORMAT}"]
    return _checked(argv, "squeue")


def parse_squeue_round(
    rc: int, stdout: str, stderr: str, allocations: Mapping[str, str]
) -> dict[str, QueueRow | ObservationError]:
    """Each asked job's active row (job id → row); a job without one is absent (ended or
    purged). ``allocations``: job id → its allocation id. A row under another name or
    comment is that job's :class:`~vq.packing.slurm_text.ForeignJob`; a failed command
    or a malformed row raises for the whole round."""
    if rc != 0:
        if len(allocations) == 1 and "Invalid job id specified" in stderr:
            return {}  # the single-job form's "no such active job"
        raise ObservationError(f"squeue failed (exit status {rc})")
    rows: dict[str, QueueRow | ObservationError] = {}
    for line in _lines(stdout, "squeue", MAX_LINES * len(allocations)):
        parts = line.split("|")
        if len(parts) != 4 or not _JOB_ID.fullmatch(parts[0]):
            raise ObservationError("squeue: a malformed row")
        job, name, found_comment, raw = parts
        allocation_id = allocations.get(job)
        if allocation_id is None:
            raise ObservationError(f"squeue answered job {job}, which was not asked")
        if job in rows:
            raise ObservationError(f"squeue: more than one row for job {job}")
        if name != job_name(allocation_id) or found_comment != comment(allocation_id):
            rows[job] = ForeignJob(f"squeue: job {job} is not allocation {allocation_id}")
            continue
        rows[job] = QueueRow(job, normalize_state(raw), raw)
    return rows


# --- sacct -------------------------------------------------------------------------------
def sacct_round_argv(allocation_ids: Sequence[str], since: str) -> list[str]:
    """Every accounting record (requeues too) named after one of ``allocation_ids``."""
    if not allocation_ids:
        raise ObservationError("sacct: a round needs allocations")
    if not _TIME.fullmatch(since) or since in ("Unknown", "None"):
        raise ObservationError(f"{since!r} is not a YYYY-MM-DDTHH:MM:SS time")
    names = ",".join(job_name(allocation) for allocation in allocation_ids)
    argv = [
        "sacct",
        "--duplicates",
        "--noheader",
        "--parsable2",
        f"--name={names}",
        f"--starttime={since}",
        f"--format={','.join(_SACCT_FIELDS)}",
    ]
    return _checked(argv, "sacct")


def parse_sacct_round(
    stdout: str, allocation_ids: Sequence[str]
) -> dict[str, list[AccountingRecord] | ObservationError]:
    """Each allocation's records (:func:`~vq.packing.slurm_text.parse_sacct`), or the
    error that makes its accounting untrustworthy."""
    bound = MAX_LINES * len(allocation_ids)
    found: dict[str, list[AccountingRecord] | ObservationError] = {}
    for allocation in allocation_ids:
        try:
            found[allocation] = parse_sacct(stdout, allocation, max_lines=bound)
        except ObservationError as exc:
            found[allocation] = exc
    return found


# --- markers -----------------------------------------------------------------------------
def markers_round_argv(works: Sequence[str]) -> list[str]:
    return _checked(["sh", "-c", MARKERS_ROUND, "sh", *works], "slot markers")


def parse_markers_round(text: str, count: int) -> list[dict[int, int | None] | ObservationError]:
    """Per allocation, in the order asked: its slot markers (or what made them unreadable)."""
    per: list[list[str]] = [[] for _ in range(count)]
    for line in _lines(text, "slot markers", MAX_LINES * count):
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
