"""One observation round over several packed allocations: the commands' words and bounds,
and each allocation's part of the answers (a bad part fails its allocation alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vq.dialects.slurm_alloc import (
    MAX_COMMAND_TEXT,
    MAX_LINES,
    ForeignJob,
    ObservationError,
    QueueRow,
    parse_sacct_round,
    parse_squeue_round,
    sacct_round_argv,
    squeue_round_argv,
)
from vq.packing.slurm_rounds import (
    ROUND_SIZE,
    Watched,
    markers_round_argv,
    parse_markers_round,
    rounds,
)
from vq.transport.local import LocalRunner

A, B = "00000000000000aa", "00000000000000bb"
T = "2026-12-03T10:53:09"


def test_one_command_of_each_kind_names_every_allocation() -> None:
    assert squeue_round_argv(["7", "8"]) == [
        "env", "LC_ALL=C", "TZ=UTC",
        "squeue", "--noheader", "--jobs=7,8", "--format=%i|%j|%k|%T",
    ]  # fmt: skip
    sacct = sacct_round_argv([A, B], T)
    assert f"--name=vqp-{A},vqp-{B}" in sacct and "--duplicates" in sacct
    assert f"--starttime={T}" in sacct
    with pytest.raises(ObservationError):
        sacct_round_argv([A], "yesterday")
    with pytest.raises(ObservationError):
        squeue_round_argv(["7;rm"])


def test_rounds_are_cut_by_size_and_by_command_text() -> None:
    short = [Watched(f"{n:016x}", str(n), f"/w/{n:016x}") for n in range(ROUND_SIZE * 2 + 1)]
    assert [len(group) for group in rounds(short)] == [ROUND_SIZE, ROUND_SIZE, 1]
    assert [item for group in rounds(short) for item in group] == short  # order kept
    long = [Watched(f"{n:016x}", str(n), "/" + "w" * 3000) for n in range(6)]
    groups = rounds(long)
    assert len(groups) > 1
    for group in groups:  # every round's markers command fits the bound
        argv = markers_round_argv([item.work for item in group])
        assert sum(len(word.encode()) + 1 for word in argv) <= MAX_COMMAND_TEXT


def test_queue_rows_go_to_their_jobs_and_a_foreign_row_fails_its_job_alone() -> None:
    text = f"7|vqp-{A}|vq-pack:{A}|RUNNING\n8|vqp-{B}|vq-pack:other|PENDING\n"
    rows = parse_squeue_round(0, text, "", {"7": A, "8": B, "9": A})
    assert rows["7"] == QueueRow("7", "RUNNING", "RUNNING")
    assert isinstance(rows["8"], ForeignJob)
    assert "9" not in rows  # no active row: ended or purged
    # the single-job form's answer for a purged job
    assert (
        parse_squeue_round(1, "", "slurm_load_jobs error: Invalid job id specified", {"7": A}) == {}
    )
    with pytest.raises(ObservationError, match="exit status"):
        parse_squeue_round(
            1, "", "slurm_load_jobs error: Invalid job id specified", {"7": A, "8": B}
        )
    with pytest.raises(ObservationError, match="not asked"):
        parse_squeue_round(0, f"5|vqp-{A}|vq-pack:{A}|RUNNING\n", "", {"7": A})
    with pytest.raises(ObservationError, match="malformed"):
        parse_squeue_round(0, "7|x\n", "", {"7": A})


def _sacct(job: str, alloc: str, comment: str = "", state: str = "COMPLETED") -> str:
    times = f"{T}|{T}|{T}"
    return (
        f"{job}|vqp-{alloc}|{comment}|{state}|0:0|{times}\n"
        f"{job}.batch|batch||{state}|0:0|{times}\n"
        f"{job}.0|vqp-{alloc}-0||{state}|0:0|{times}\n"
    )


def test_accounting_is_split_per_allocation_and_a_duplicate_fails_its_own() -> None:
    text = (
        _sacct("7", A) + _sacct("8", B, f"vq-pack:{B}", "FAILED") + _sacct("9", B, f"vq-pack:{B}")
    )
    found = parse_sacct_round(text, [A, B])
    records = found[A]
    assert not isinstance(records, ObservationError)
    assert [(r.job_id, r.state, sorted(r.steps)) for r in records] == [
        ("7", "SUCCEEDED", ["0", "batch"])
    ]
    other = found[B]  # two jobs carry B's exact identity: parsed here, judged by evidence
    assert not isinstance(other, ObservationError)
    assert sorted(r.job_id for r in other) == ["8", "9"]
    # the line bound grows with the allocations of the round
    many = _sacct("7", A) * (MAX_LINES // 3 + 1)
    assert isinstance(parse_sacct_round(many, [A])[A], ObservationError)
    assert not isinstance(parse_sacct_round(many, [A, B])[A], ObservationError)


def test_markers_of_every_allocation_in_one_read(tmp_path: Path) -> None:
    first, missing, second = tmp_path / "a", tmp_path / "gone", tmp_path / "b"
    for work, slot, code in ((first, 0, "0"), (first, 1, "3"), (second, 2, "")):
        (work / str(slot) / "_vq").mkdir(parents=True)
        (work / str(slot) / "_vq" / "exit-code").write_text(code)
    (first / "5" / "_vq").mkdir(parents=True)  # a slot still running: no marker
    argv = markers_round_argv([str(first), str(missing), str(second)])
    result = LocalRunner().run(argv)
    assert result.rc == 0, result.stderr
    assert parse_markers_round(result.stdout.decode(), 3) == [{0: 0, 1: 3}, {}, {2: None}]
    with pytest.raises(ObservationError, match="malformed"):
        parse_markers_round("3|0|0\n", 3)
    bad = parse_markers_round("0|x|0\n1|0|0\n", 2)
    assert isinstance(bad[0], ObservationError) and bad[1] == {0: 0}
