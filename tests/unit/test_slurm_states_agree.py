"""A packed allocation and a plain lane job read every Slurm state name alike: both go
through the Slurm dialect (:mod:`vq.dialects.slurm_parse` for a plain job,
:mod:`vq.dialects.slurm_alloc` for an allocation), and the allocation's view is derived
from the one Slurm state table (``vq.dialects.slurm_parse.PHASES``).

Each state is fed to every parser as the row it asks for, in the shape Slurm 22.05
prints: squeue ``%T`` (``%i|%T|%r|%N|%M|%l`` for a plain job, ``%i|%j|%k|%T`` for an
allocation, alone or in a round over several) and sacct ``State`` (``CANCELLED by 0``
included). The names are written out here, not read from the table, so a state the
table lost or misfiled fails."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vq.dialects import AccountingReport, CommandResult, SchedulerPhase, StatusReport
from vq.dialects.slurm import SLURM
from vq.dialects.slurm_alloc import (
    parse_sacct,
    parse_sacct_round,
    parse_squeue,
    parse_squeue_round,
)
from vq.dialects.slurm_parse import PHASES

P = SchedulerPhase
ALLOC = "0123456789abcdef"
T = "2026-12-03T10:57:33"

#: Every job state name Slurm 22.05+ prints (squeue ``%T``, sacct ``State``) and its phase.
SLURM_STATES: dict[str, SchedulerPhase] = {
    "PENDING": P.QUEUED,
    "CONFIGURING": P.QUEUED,  # nodes booting: the script has not started
    "REQUEUED": P.QUEUED,
    "REQUEUE_FED": P.QUEUED,
    "POWER_UP_NODE": P.QUEUED,
    "REQUEUE_HOLD": P.HELD,
    "SPECIAL_EXIT": P.HELD,
    "RESV_DEL_HOLD": P.HELD,
    "SUSPENDED": P.HELD,
    "STOPPED": P.HELD,
    "RUNNING": P.RUNNING,
    "RESIZING": P.RUNNING,
    "SIGNALING": P.RUNNING,
    "COMPLETING": P.FINISHING,
    "STAGE_OUT": P.FINISHING,
    "COMPLETED": P.ENDED,
    "FAILED": P.ENDED,
    "CANCELLED": P.ENDED,
    "TIMEOUT": P.ENDED,
    "DEADLINE": P.ENDED,
    "OUT_OF_MEMORY": P.ENDED,
    "NODE_FAIL": P.ENDED,
    "PREEMPTED": P.ENDED,
    "BOOT_FAIL": P.ENDED,
    "REVOKED": P.ENDED,
}

#: squeue's compact codes (``%t``). vq asks for ``%T``, so a compact code in an answer is
#: a state vq does not know: both parsers must read it as unknown, never as an end.
SHORT_CODES = (
    "BF", "CA", "CD", "CF", "CG", "DL", "F", "NF", "OOM", "PD", "PR", "R", "RD", "RF", "RH",
    "RQ", "RS", "RV", "S", "SE", "SI", "SO", "ST", "TO",
)  # fmt: skip

#: The packing view each not-ended phase must read as.
ACTIVE_VIEW = {P.QUEUED: "QUEUED", P.HELD: "QUEUED", P.RUNNING: "RUNNING", P.FINISHING: "RUNNING"}
ENDED_VIEW = {"COMPLETED": "SUCCEEDED", "CANCELLED": "CANCELLED", "REVOKED": "CANCELLED"}


def _view(state: str, phase: SchedulerPhase) -> str:
    """What an allocation must read for ``state`` given a plain job's ``phase``."""
    if phase is P.UNKNOWN:
        return "UNKNOWN"
    if phase is P.ENDED:
        return ENDED_VIEW.get(state.split(" ", 1)[0], "FAILED")
    return ACTIVE_VIEW[phase]


def _plain_squeue(state: str) -> SchedulerPhase:
    row = f"12|{state}|None|vm|0:01|2:00\n"
    report = SLURM.status(["12"]).parse(CommandResult(0, row, ""))
    assert isinstance(report, StatusReport)
    return report.observed["12"].phase


def _plain_sacct(state: str) -> SchedulerPhase:
    row = f"12|vq-x|{state}|0:0|00:00:01|00:02:00|vm|||vq:x:n\n"
    query = SLURM.accounting(["12"], datetime(2026, 12, 3, tzinfo=UTC))
    report = query.parse(CommandResult(0, row, ""))
    assert isinstance(report, AccountingReport)
    return report.records["12"].phase


def _packed_squeue(state: str) -> tuple[str, str]:
    row = f"12|vqp-{ALLOC}|vq-pack:{ALLOC}|{state}\n"
    alone = parse_squeue(0, row, "", ALLOC)
    rounds = parse_squeue_round(0, row, "", {"12": ALLOC})["12"]
    assert alone is not None and not isinstance(rounds, Exception)
    return alone.state, rounds.state


def _packed_sacct(state: str) -> tuple[str, str]:
    row = f"12|vqp-{ALLOC}|vq-pack:{ALLOC}|{state}|0:0|{T}|{T}|{T}\n"
    (alone,) = parse_sacct(row, ALLOC)
    found = parse_sacct_round(row, [ALLOC])[ALLOC]
    assert not isinstance(found, Exception)
    return alone.state, found[0].state


def test_the_table_holds_exactly_the_states_slurm_prints() -> None:
    assert PHASES == SLURM_STATES


@pytest.mark.parametrize("state", sorted(SLURM_STATES))
def test_every_slurm_state_reads_alike_in_squeue_for_plain_and_packed_jobs(state: str) -> None:
    phase = _plain_squeue(state)
    assert phase is SLURM_STATES[state]
    assert _packed_squeue(state) == (_view(state, phase),) * 2


@pytest.mark.parametrize("state", [*sorted(SLURM_STATES), "CANCELLED by 0", "CANCELLED by 1001"])
def test_every_slurm_state_reads_alike_in_sacct_for_plain_and_packed_jobs(state: str) -> None:
    phase = _plain_sacct(state)
    assert phase is SLURM_STATES[state.split(" ", 1)[0]]
    assert _packed_sacct(state) == (_view(state, phase),) * 2


@pytest.mark.parametrize("code", SHORT_CODES)
def test_a_compact_state_code_is_unknown_to_both_never_an_end(code: str) -> None:
    assert (_plain_squeue(code), _plain_sacct(code)) == (P.UNKNOWN, P.UNKNOWN)
    assert _packed_squeue(code) == _packed_sacct(code) == ("UNKNOWN", "UNKNOWN")


@pytest.mark.parametrize(
    ("state", "phase", "packed"),
    [
        ("CONFIGURING", P.QUEUED, "QUEUED"),  # nodes booting: the script has not started
        ("POWER_UP_NODE", P.QUEUED, "QUEUED"),
        ("SUSPENDED", P.HELD, "QUEUED"),
        ("STOPPED", P.HELD, "QUEUED"),
        ("SPECIAL_EXIT", P.HELD, "QUEUED"),
    ],
)
def test_the_states_the_two_tables_disagreed_on(
    state: str, phase: SchedulerPhase, packed: str
) -> None:
    assert (_plain_squeue(state), _packed_squeue(state)[0]) == (phase, packed)
    assert (_plain_sacct(state), _packed_sacct(state)[0]) == (phase, packed)
