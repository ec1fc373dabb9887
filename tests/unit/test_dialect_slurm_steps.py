"""Step-level control text of a packed allocation: a slot's step by name, scancel."""

from __future__ import annotations

import pytest

from vq.dialects.slurm_alloc import ObservationError
from vq.dialects.slurm_steps import (
    parse_scancel,
    parse_squeue_steps,
    scancel_argv,
    squeue_steps_argv,
)

ALLOC = "0123456789abcdef"


def test_squeue_steps_is_bounded_and_refuses_a_non_job_id() -> None:
    argv = squeue_steps_argv("1510")
    assert argv[-4:] == ["--noheader", "--steps", "--jobs=1510", "--format=%i|%j"]
    assert "LC_ALL=C" in argv
    with pytest.raises(ObservationError):
        squeue_steps_argv("1510;rm")


def test_slots_map_to_steps_by_name_not_by_launch_order() -> None:
    out = (
        f"1510.0|vqp-{ALLOC}-1\n1510.1|vqp-{ALLOC}-0\n1510.batch|batch\n"
        "1510.extern|extern\n1510.2|something-else\n"
    )
    assert parse_squeue_steps(0, out, "1510", ALLOC) == {1: "1510.0", 0: "1510.1"}
    assert parse_squeue_steps(0, "", "1510", ALLOC) == {}
    # another allocation's step names are not ours
    assert parse_squeue_steps(0, "1510.0|vqp-ffffffffffffffff-0\n", "1510", ALLOC) == {}


@pytest.mark.parametrize(
    ("rc", "out"),
    [
        (1, ""),
        (0, f"1511.0|vqp-{ALLOC}-0\n"),  # another job's row
        (0, f"1510.0|vqp-{ALLOC}-0\n1510.3|vqp-{ALLOC}-0\n"),  # two steps, one slot
        (0, f"1510.x|vqp-{ALLOC}-0\n"),
        (0, "no separator\n"),
        (0, "".join(f"1510.{i}|x\n" for i in range(600))),
    ],
)
def test_untrustworthy_step_lists_abort(rc: int, out: str) -> None:
    with pytest.raises(ObservationError):
        parse_squeue_steps(rc, out, "1510", ALLOC)


def test_scancel_of_the_allocation_or_one_of_its_steps() -> None:
    assert scancel_argv("1510")[-2:] == ["scancel", "1510"]
    assert scancel_argv("1510", "1510.4")[-2:] == ["scancel", "1510.4"]
    with pytest.raises(ObservationError, match="not a step of job 1510"):
        scancel_argv("1510", "1511.4")
    with pytest.raises(ObservationError):
        scancel_argv("1510", "1510.batch")


def test_scancel_answers() -> None:
    assert parse_scancel(0, "") == "sent"
    gone = "scancel: error: Kill job error on job step id 1510: Invalid job id specified\n"
    assert parse_scancel(225, gone) == "gone"
    done = "scancel: error: Kill job error on job id 1510: Job/step already completing or completed"
    assert parse_scancel(1, done) == "gone"
    with pytest.raises(ObservationError, match="exit status 1"):
        parse_scancel(1, "scancel: error: Access/permission denied")
