"""Packed array elements on a lane: selection, identity, script and outcome (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.packing.evidence import TaskOutcome
from vq.packing.lane_batch import (
    Element,
    batch_allocation_id,
    element_ending,
    element_task,
    next_batch,
)
from vq.packing.planner import PlanRefused
from vq.packing.roster import RosterRefused

from .packing_support import gpu_profile, profile

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def elements(count: int, *, retry: int = 0) -> list[Element]:
    return [Element(f"{i:012x}", i, retry, ("echo", str(i))) for i in range(count)]


def test_element_of_a_spec_takes_its_index_attempt_and_command() -> None:
    spec = JobSpec.model_validate(
        {
            "id": "0123456789ab",
            "submitted_at": T0,
            "command": ["python", "run.py", "--seed", "3"],
            "cpus": 1,
            "array_index": 3,
            "array_total": 8,
            "retry_count": 2,
        }
    )
    element = Element.of(spec)
    assert (element.job_id, element.array_index, element.retry_count, element.command) == (
        "0123456789ab",
        3,
        2,
        ("python", "run.py", "--seed", "3"),
    )
    assert element.environment == (
        ("VQ_JOB_ID", "0123456789ab"),
        ("VQ_CPUS", "1"),
        ("VQ_ARRAY_INDEX", "3"),
        ("VQ_ARRAY_TOTAL", "8"),
    )
    with pytest.raises(RosterRefused, match="not an array element"):
        Element.of(spec.model_copy(update={"array_index": None}))


def test_sixteen_one_cpu_elements_cap_eight_make_two_balanced_allocations() -> None:
    pending = elements(16)
    first = next_batch("slurm", "g1", pending, profile(), free=100)
    assert first is not None
    assert [e.array_index for e in first.elements] == list(range(8))
    rest = [e for e in pending if e not in first.elements]
    second = next_batch("slurm", "g1", rest, profile(), free=100)
    assert second is not None
    assert [e.array_index for e in second.elements] == list(range(8, 16))
    assert first.allocation_id != second.allocation_id


def test_groups_are_balanced_not_greedy() -> None:
    batch = next_batch("slurm", "g1", elements(9), profile(), free=100)
    assert batch is not None and len(batch.elements) == 5  # 5 + 4, never 8 + 1


def test_selection_follows_array_order_whatever_the_input_order() -> None:
    pending = elements(5)
    shuffled = [pending[3], pending[0], pending[4], pending[1], pending[2]]
    a = next_batch("slurm", "g1", pending, profile(), free=100)
    b = next_batch("slurm", "g1", shuffled, profile(), free=100)
    assert a == b
    assert a is not None and a.slot_of(pending[2].job_id) == 2


def test_free_capacity_cuts_the_batch_and_none_when_nothing_fits() -> None:
    batch = next_batch("slurm", "g1", elements(8), profile(), free=3)
    assert batch is not None and len(batch.elements) == 3
    assert next_batch("slurm", "g1", elements(8), profile(), free=0) is None
    assert next_batch("slurm", "g1", [], profile(), free=8) is None


def test_tasks_per_allocation_lowers_packing_and_above_capacity_is_refused() -> None:
    batch = next_batch("slurm", "g1", elements(8), profile(), free=100, tasks_per_allocation=2)
    assert batch is not None and len(batch.elements) == 2
    with pytest.raises(PlanRefused, match=r"outside 1\.\.8"):
        next_batch("slurm", "g1", elements(8), profile(), free=100, tasks_per_allocation=9)
    with pytest.raises(PlanRefused):
        next_batch("slurm", "g1", elements(8), profile(), free=100, tasks_per_allocation=0)


def test_identity_is_stable_and_changes_with_lane_group_members_and_attempt() -> None:
    members = elements(4)
    base = batch_allocation_id("slurm", "g1", members)
    assert base == batch_allocation_id("slurm", "g1", list(members))
    assert len(base) == 16 and all(c in "0123456789abcdef" for c in base)
    assert base != batch_allocation_id("other", "g1", members)
    assert base != batch_allocation_id("slurm", "g2", members)
    assert base != batch_allocation_id("slurm", "g1", members[:3])
    assert base != batch_allocation_id("slurm", "g1", elements(4, retry=1))


def test_script_names_the_allocation_and_runs_each_command_in_its_slot() -> None:
    batch = next_batch("slurm", "g1", elements(3), profile(), free=100)
    assert batch is not None
    text = batch.script.decode()
    alloc = batch.allocation_id
    assert f"#SBATCH --job-name=vqp-{alloc}" in text
    assert f"#SBATCH --comment=vq-pack:{alloc}" in text
    assert "#SBATCH --ntasks=3" in text and "#SBATCH --mem=1536M" in text
    assert list(batch.directives) == [
        line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH")
    ]
    for slot in range(3):
        assert f"# slot {slot}: {slot:012x}" in text
    assert "--gres" not in text


def test_gpu_profile_requests_whole_gpus_per_allocation() -> None:
    pending = [Element(f"{i:012x}", i, 0, ("train",)) for i in range(6)]
    batch = next_batch("slurm", "g1", pending, gpu_profile(), free=100)
    assert batch is not None and len(batch.elements) == 3  # 4 GPUs: 3 + 3 balanced
    assert "--gres=gpu:3" in batch.directives


def test_a_command_a_slot_cannot_run_is_refused() -> None:
    with pytest.raises(RosterRefused, match="must not start with '-'"):
        element_task(Element("0123456789ab", 0, 0, ("-x",)))
    with pytest.raises(RosterRefused, match="non-empty"):
        next_batch("slurm", "g1", [Element("0123456789ab", 0, 0, ())], profile(), free=1)


@pytest.mark.parametrize(
    ("state", "code", "expected"),
    [
        ("SUCCEEDED", 0, (None, 0)),
        ("FAILED", 3, (None, 3)),
        ("FAILED", 137, (None, 137)),
        ("FAILED", None, (JobState.ABORTED_BY_QUEUE, None)),
        ("FAILED", 0, (JobState.ABORTED_BY_QUEUE, 0)),  # step exited 0 but wrote no marker
        ("CANCELLED", None, (JobState.ABORTED_BY_QUEUE, None)),
    ],
)
def test_slot_evidence_becomes_the_elements_ending(
    state: str, code: int | None, expected: tuple[JobState | None, int | None]
) -> None:
    ending = element_ending(TaskOutcome("k", 2, state, code))  # type: ignore[arg-type]
    assert ending is not None
    assert (ending.state, ending.exit_code) == expected
    assert (ending.reason is None) == (expected[0] is None)


@pytest.mark.parametrize("state", ["QUEUED", "RUNNING", "UNKNOWN"])
def test_a_slot_not_ended_has_no_ending(state: str) -> None:
    assert element_ending(TaskOutcome("k", 0, state, None)) is None  # type: ignore[arg-type]


def test_a_slot_exports_the_elements_variables_through_env() -> None:
    spec = JobSpec.model_validate(
        {
            "id": "0123456789ab",
            "submitted_at": T0,
            "command": ["python", "run.py"],
            "cpus": 2,
            "mem_mb": 512,
            "job_name": "sweep",
            "array_index": 1,
            "array_total": 2,
            "array_value": "lr=0.1 'quoted' $HOME",
        }
    )
    task = element_task(Element.of(spec))
    assert task.args == (
        "env",
        "VQ_JOB_ID=0123456789ab",
        "VQ_CPUS=2",
        "VQ_MEM_MB=512",
        "VQ_JOB_NAME=sweep",
        "VQ_ARRAY_INDEX=1",
        "VQ_ARRAY_TOTAL=2",
        "VQ_ARRAY_VALUE=lr=0.1 'quoted' $HOME",
        "python",
        "run.py",
    )
    batch = next_batch("slurm", "g1", [Element.of(spec)], profile(), free=1)
    assert batch is not None
    # the value reaches the step as one shell-quoted word, never expanded
    assert b"'VQ_ARRAY_VALUE=lr=0.1 '\"'\"'quoted'\"'\"' $HOME'" in batch.script
    with pytest.raises(RosterRefused, match="must not contain '='"):
        element_task(Element.of(spec.model_copy(update={"command": ["A=1", "run"]})))
    # without an environment the command is the slot's argument vector as it is
    assert element_task(Element("0123456789ab", 0, 0, ("A=1",))).args == ("A=1",)
