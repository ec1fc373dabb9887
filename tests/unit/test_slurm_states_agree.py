"""A packed allocation and a plain lane job read every Slurm state name alike: the packing
view is derived from the one Slurm state table (``vq.dialects.slurm_parse.PHASES``).

Each state is fed to both parsers as the squeue row each asks for (``%i|%T|%r|%N|%M|%l``
for a plain job, ``%i|%j|%k|%T`` for an allocation), in the shape Slurm 22.05 prints."""

from __future__ import annotations

import pytest

from vq.dialects import SLURM, CommandResult, SchedulerPhase, StatusReport
from vq.dialects.slurm_parse import PHASES
from vq.packing.slurm_text import parse_squeue

P = SchedulerPhase
ALLOC = "0123456789abcdef"

#: The packing view each plain phase must read as.
EXPECTED = {
    P.QUEUED: "QUEUED",
    P.HELD: "QUEUED",
    P.RUNNING: "RUNNING",
    P.FINISHING: "RUNNING",
}


def _plain(state: str) -> SchedulerPhase:
    row = f"12|{state}|None|vm|0:01|2:00\n"
    report = SLURM.status(["12"]).parse(CommandResult(0, row, ""))
    assert isinstance(report, StatusReport)
    return report.observed["12"].phase


def _packed(state: str) -> str:
    row = f"12|vqp-{ALLOC}|vq-pack:{ALLOC}|{state}\n"
    found = parse_squeue(0, row, "", ALLOC)
    assert found is not None
    return found.state


@pytest.mark.parametrize("state", sorted(PHASES))
def test_every_slurm_state_reads_alike_for_plain_and_packed_jobs(state: str) -> None:
    phase = _plain(state)
    assert phase is PHASES[state]
    if phase is P.ENDED:
        ending = {"COMPLETED": "SUCCEEDED", "CANCELLED": "CANCELLED", "REVOKED": "CANCELLED"}
        assert _packed(state) == ending.get(state, "FAILED")
    else:
        assert _packed(state) == EXPECTED[phase]


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
    assert (_plain(state), _packed(state)) == (phase, packed)
