"""Slurm argv builders and parsers of packed allocations, on output recorded from the
testbed's Slurm 22.05 (tests/golden/packing/slurm/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vq.dialects.model import CommandResult, ParseFailure, SubmitAccepted
from vq.dialects.slurm_alloc import (
    MAX_FIELD_BYTES,
    MAX_LINES,
    ObservationError,
    bounded,
    normalize_state,
    parse_receipt,
    parse_sacct,
    parse_sbatch_test_only,
    parse_squeue,
    parse_squeue_named,
    sacct_argv,
    sbatch_test_only_argv,
    squeue_argv,
    squeue_named_argv,
    submit_argv,
)
from vq.dialects.slurm_parse import parse_submit
from vq.packing.evidence import attempt_evidence

RECORDED = Path(__file__).resolve().parents[1] / "golden" / "packing" / "slurm"


def _read(name: str) -> str:
    return (RECORDED / name).read_text()


def test_argv_are_bounded_and_run_in_the_c_locale() -> None:
    assert submit_argv() == ["env", "LC_ALL=C", "TZ=UTC", "sbatch", "--parsable"]
    assert sbatch_test_only_argv()[-2:] == ["sbatch", "--test-only"]
    assert squeue_argv("30")[3:] == ["squeue", "--noheader", "--jobs=30", "--format=%i|%j|%k|%T"]
    argv = sacct_argv("00000000000000aa", "2026-12-03T00:00:00")
    assert "--duplicates" in argv and "--name=vqp-00000000000000aa" in argv
    assert len(argv) <= 16
    with pytest.raises(ObservationError):
        squeue_argv("30; rm -rf /")
    with pytest.raises(ObservationError):
        sacct_argv("00000000000000aa", "now-1day")
    with pytest.raises(ObservationError):
        bounded(["x"] * 14)
    with pytest.raises(ObservationError):
        bounded(["x", "y" * 16384])


@pytest.mark.parametrize("stdout", ["28\n", "28;alpha\n", "28\n29\n", "  31 \n"])
def test_an_allocation_reads_its_receipt_as_a_plain_lane_job_does(stdout: str) -> None:
    """One ``sbatch --parsable`` parser for both: the allocation's receipt is exactly the
    plain lane's :func:`parse_submit` answer (the last line names the job)."""
    plain = parse_submit(CommandResult(0, stdout, ""))
    assert isinstance(plain, SubmitAccepted)
    assert parse_receipt(stdout) == plain


@pytest.mark.parametrize("stdout", ["", "x\n", "28;bad cluster\n", "28\nx\n"])
def test_an_unreadable_receipt_is_refused_by_both(stdout: str) -> None:
    assert isinstance(parse_submit(CommandResult(0, stdout, "")), ParseFailure)
    with pytest.raises(ObservationError, match="sbatch --parsable"):
        parse_receipt(stdout)
    with pytest.raises(ObservationError, match="sbatch --parsable"):
        parse_receipt("28\n" * (MAX_LINES + 1))  # beyond the allocation's bounds


def test_test_only_answers() -> None:
    answer = parse_sbatch_test_only(0, _read("test-only-ok.stderr"))
    assert (answer.job_id, answer.processors, answer.nodes, answer.partition) == (
        "28",
        2,
        "vm",
        "debug",
    )
    with pytest.raises(ObservationError, match="Requested node configuration"):
        parse_sbatch_test_only(1, _read("test-only-refused.stderr"))


def test_squeue_rows_must_repeat_the_exact_identity() -> None:
    row = parse_squeue(0, _read("squeue-running.txt"), "", "00000000000000aa")
    assert row is not None and (row.job_id, row.state) == ("30", "RUNNING")
    assert parse_squeue(1, "", _read("squeue-invalid.stderr"), "00000000000000aa") is None
    assert parse_squeue(0, "", "", "00000000000000aa") is None  # ended and purged
    with pytest.raises(ObservationError, match="not allocation"):
        parse_squeue(0, _read("squeue-running.txt"), "", "00000000000000bb")
    other = _read("squeue-running.txt").replace("vq-pack:00000000000000aa", "someone")
    with pytest.raises(ObservationError):
        parse_squeue(0, other, "", "00000000000000aa")
    with pytest.raises(ObservationError):
        parse_squeue(1, "", "slurm_load_jobs error: Unable to contact slurm controller", "a")
    with pytest.raises(ObservationError):
        parse_squeue(0, "30|vqp-x\n", "", "00000000000000aa")


def test_sacct_records_steps_and_foreign_jobs() -> None:
    (record,) = parse_sacct(_read("sacct-packed.txt"), "ed392e7690a2c0c2")
    assert (record.job_id, record.state, record.exit_code) == ("27", "FAILED", "1:0")
    assert record.steps == {
        "batch": ("FAILED", "1:0"),
        "0": ("FAILED", "3:0"),
        "1": ("SUCCEEDED", "0:0"),
    }
    (cancelled,) = parse_sacct(_read("sacct-cancelled.txt"), "00000000000000aa")
    assert (cancelled.state, cancelled.raw_state) == ("CANCELLED", "CANCELLED by 0")
    # the same name under another comment is someone else's job: ignored with its steps
    foreign = _read("sacct-packed.txt").replace(
        "vqp-ed392e7690a2c0c2||", "vqp-ed392e7690a2c0c2|vq-pack:other|", 1
    )
    assert parse_sacct(foreign, "ed392e7690a2c0c2") == []
    exact = _read("sacct-packed.txt").replace(
        "vqp-ed392e7690a2c0c2||", "vqp-ed392e7690a2c0c2|vq-pack:ed392e7690a2c0c2|", 1
    )
    assert len(parse_sacct(exact, "ed392e7690a2c0c2")) == 1


def test_sacct_bounds_and_malformed_rows_abort() -> None:
    row = _read("sacct-packed.txt").splitlines()[0]
    with pytest.raises(ObservationError, match="lines"):
        parse_sacct("\n".join([row] * (MAX_LINES + 1)), "ed392e7690a2c0c2")
    with pytest.raises(ObservationError, match="field"):
        parse_sacct(row.replace("FAILED", "F" * (MAX_FIELD_BYTES + 1)), "ed392e7690a2c0c2")
    with pytest.raises(ObservationError, match="malformed"):
        parse_sacct(row + "|extra", "ed392e7690a2c0c2")
    with pytest.raises(ObservationError, match="before its job row"):
        parse_sacct(_read("sacct-packed.txt").splitlines()[2], "ed392e7690a2c0c2")


def test_state_normalization() -> None:
    assert normalize_state("PENDING") == "QUEUED"
    assert normalize_state("COMPLETING") == "RUNNING"
    assert normalize_state("COMPLETED") == "SUCCEEDED"
    assert normalize_state("OUT_OF_MEMORY") == "FAILED"
    assert normalize_state("CANCELLED by 1000") == "CANCELLED"
    assert normalize_state("SOMETHING_NEW") == "UNKNOWN"


def test_active_jobs_of_an_identity_need_its_exact_name_and_comment() -> None:
    alloc = "00000000000000aa"
    assert squeue_named_argv(alloc)[3:] == [
        "squeue",
        "--noheader",
        "--states=all",  # an allocation that already ended is still proven by its name
        f"--name=vqp-{alloc}",
        "--format=%i|%j|%k|%T",
    ]
    rows = (
        f"41|vqp-{alloc}|vq-pack:{alloc}|RUNNING\n"
        f"42|vqp-{alloc}|someone else|PENDING\n"
        f"43|vqp-{alloc}|vq-pack:{alloc}|PENDING\n"
    )
    assert parse_squeue_named(0, rows, alloc) == ["41", "43"]
    assert parse_squeue_named(0, "", alloc) == []
    with pytest.raises(ObservationError, match="malformed"):
        parse_squeue_named(0, "41|only|three\n", alloc)
    with pytest.raises(ObservationError, match="exit status 1"):
        parse_squeue_named(1, "", alloc)


def test_a_requeued_allocation_is_judged_by_its_latest_incarnation() -> None:
    """``sacct --duplicates`` repeats a requeued job id with a later submit time: the
    receipt anchors both rows, and the latest one owns the state and the step rows."""
    alloc = "ed392e7690a2c0c2"
    first = (
        f"27|vqp-{alloc}|vq-pack:{alloc}|REQUEUED|0:0|"
        "2026-12-03T10:50:00|2026-12-03T10:50:01|2026-12-03T10:50:05\n"
        f"27.0|vqp-{alloc}-0||FAILED|9:0|2026-12-03T10:50:01|2026-12-03T10:50:01|"
        "2026-12-03T10:50:05\n"
    )
    later = (
        f"27|vqp-{alloc}|vq-pack:{alloc}|COMPLETED|0:0|"
        "2026-12-03T10:53:09|2026-12-03T10:53:10|2026-12-03T10:53:12\n"
        f"27.0|vqp-{alloc}-0||COMPLETED|0:0|2026-12-03T10:53:10|2026-12-03T10:53:10|"
        "2026-12-03T10:53:12\n"
    )
    # accounting may list the incarnations in any order: the submit time decides
    for text in (first + later, later + first):
        records = parse_sacct(text, alloc)
        evidence = attempt_evidence(alloc, "27", ["k0"], None, records, {0: 0})
        assert (evidence.state, evidence.incarnations) == ("SUCCEEDED", 2)
        assert evidence.submit == "2026-12-03T10:53:09"
        assert [(t.key, t.state, t.exit_code) for t in evidence.tasks] == [("k0", "SUCCEEDED", 0)]
    # without its marker the slot is judged by the latest incarnation's step row, not
    # the first incarnation's failure
    records = parse_sacct(first + later, alloc)
    (task,) = attempt_evidence(alloc, "27", ["k0"], None, records, {}).tasks
    assert task.state == "FAILED"  # a step that ended without its marker
    assert task.exit_code == 0
