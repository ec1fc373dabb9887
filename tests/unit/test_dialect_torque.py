"""The Torque dialect: argv shapes and the parsers on stored qsub/qstat -f answers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vq.dialects import (
    TORQUE,
    CommandResult,
    ControlOutcome,
    ParseFailure,
    SchedulerPhase,
    StatusReport,
    SubmitAccepted,
    UnsafeSchedulerValue,
    dialect_for,
)
from vq.dialects import torque_parse as parse
from vq.domain.states import JobState

from .dialect_transcripts import all_transcripts, transcript

P = SchedulerPhase
J = "0123456789ab"
H = "torque-server.example.org"
SINCE = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def test_argv_shapes() -> None:
    assert dialect_for("torque") is TORQUE
    assert TORQUE.submit("/s/_vq/job.sh").argv == ("qsub", "/s/_vq/job.sh")
    assert TORQUE.status([f"11.{H}", "12"]).argv == (
        "env",
        "LC_ALL=C",
        "TZ=UTC",
        "qstat",
        "-f",
        f"11.{H}",
        "12",
    )
    assert TORQUE.control("cancel", "11").argv == ("qdel", "11")
    assert TORQUE.control("hold", "11").argv == ("qhold", "11")
    assert TORQUE.control("release", "11").argv == ("qrls", "11")
    assert TORQUE.accounting(["11"], SINCE) is None
    (by_name,) = TORQUE.find_by_tag(J, SINCE)
    assert by_name.argv == ("env", "LC_ALL=C", "TZ=UTC", "qstat", "-f")


@pytest.mark.parametrize("bad", ["11;x", "11 12", "", "-f", "11.", "１１"])
def test_hostile_ids_are_refused(bad: str) -> None:
    with pytest.raises(UnsafeSchedulerValue) as caught:
        TORQUE.status([bad])
    assert caught.value.field == "scheduler_job_id"
    with pytest.raises(UnsafeSchedulerValue):
        TORQUE.control("cancel", bad)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("qsub_real", f"11.{H}"), ("qsub_wrapper", "11")],
)
def test_submit_ids(name: str, expected: str) -> None:
    assert TORQUE.submit("/s/j.sh").parse(transcript(f"torque/{name}")) == SubmitAccepted(expected)


@pytest.mark.parametrize(
    ("name", "kind"), [("qsub_rejected", "command_failed"), ("qsub_empty", "empty")]
)
def test_submit_failures(name: str, kind: str) -> None:
    answer = parse.parse_submit(transcript(f"torque/{name}"))
    assert isinstance(answer, ParseFailure) and answer.kind == kind
    garbage = parse.parse_submit(CommandResult(0, "qsub: job submitted\n"))
    assert isinstance(garbage, ParseFailure) and garbage.kind == "garbage"


def test_qstat_phases_comment_hosts_walltimes() -> None:
    ids = [f"{n}.{H}" for n in (11, 12, 13, 14)]
    report = TORQUE.status(ids).parse(transcript("torque/qstat_phases"))
    assert isinstance(report, StatusReport)
    seen = report.observed
    assert [seen[i].phase for i in ids] == [P.RUNNING, P.QUEUED, P.HELD, P.FINISHING]
    running, queued, held, exiting = (seen[i] for i in ids)
    assert running.exec_host == "node07" and running.job_name == f"vq-{J}"
    assert (running.walltime_used_seconds, running.walltime_limit_seconds) == (62, 7200)
    assert running.queued_reason is None
    assert (
        queued.queued_reason == "Not Running: Not enough of the right type of nodes are available"
    )
    assert held.queued_reason is None  # no comment: not reported, not "no reason"
    assert exiting.exec_host == "n1,n2"
    assert report.unlisted == () and report.absent == () and report.warnings == ()


def test_continuation_lines_join_their_attribute() -> None:
    text = f"Job Id: 11.{H}\n    job_state = R\n    Variable_List = A=1,\n\tB=2,\n\tC=3\n"
    blocks = parse._blocks(text)
    assert not isinstance(blocks, ParseFailure)
    assert blocks[0][1]["Variable_List"] == "A=1,B=2,C=3"


@pytest.mark.parametrize(
    ("job", "code", "signal", "verdict"),
    [
        ("20", 0, None, None),
        ("21", 3, None, None),
        ("22", None, 15, None),  # 271 = 256 + SIGTERM, inside the walltime
        ("23", None, None, JobState.TIME_EXCEEDED),  # -11: pbs_mom's walltime code
        ("24", None, None, JobState.OOM_KILLED),  # -10: memory limit
        ("25", None, None, JobState.ABORTED_BY_QUEUE),  # -1: could not start
        ("26", None, 9, JobState.TIME_EXCEEDED),  # 265 after using the whole walltime
    ],
)
def test_completed_jobs_exit_evidence(
    job: str, code: int | None, signal: int | None, verdict: JobState | None
) -> None:
    ids = [str(n) for n in range(20, 27)]
    report = TORQUE.status(ids).parse(transcript("torque/qstat_completed"))
    assert isinstance(report, StatusReport)
    seen = report.observed[job]
    assert seen.phase is P.ENDED and seen.raw_state == "C"
    assert (seen.exit_code, seen.exit_signal, seen.abnormal_end_state) == (code, signal, verdict)


@pytest.mark.parametrize(
    ("status", "used", "limit", "expected"),
    [
        (255, None, None, (255, None, None)),
        (256, None, None, (None, None, None)),
        (271, 10, None, (None, 15, None)),
        (265, 100, 100, (None, 9, JobState.TIME_EXCEEDED)),
        (265, 99, 100, (None, 9, None)),
        (-12, None, None, (None, None, JobState.ABORTED_BY_QUEUE)),
        (None, 100, 100, (None, None, None)),
    ],
)
def test_exit_status_decoding(
    status: int | None, used: int | None, limit: int | None, expected: tuple[object, ...]
) -> None:
    assert parse.exit_evidence(status, used, limit) == expected


def test_exit_status_of_a_job_not_ended_is_ignored() -> None:
    text = f"Job Id: 11.{H}\n    job_state = R\n    exit_status = 0\n"
    report = parse.parse_status(["11"], CommandResult(0, text))
    assert isinstance(report, StatusReport) and report.observed["11"].exit_code is None


def test_unknown_id_among_several_is_absent_and_the_other_observed() -> None:
    ids = [f"11.{H}", f"19.{H}"]
    report = TORQUE.status(ids).parse(transcript("torque/qstat_one_unknown"))
    assert isinstance(report, StatusReport)
    assert set(report.observed) == {f"11.{H}"} and report.absent == (f"19.{H}",)
    assert report.observed[f"11.{H}"].phase is P.RUNNING


def test_ids_match_on_the_sequence_number() -> None:
    """qsub of slurm-wlm-torque prints ``11``; a server may answer with ``11.host``."""
    report = TORQUE.status(["11", "19"]).parse(transcript("torque/qstat_one_unknown"))
    assert isinstance(report, StatusReport)
    assert set(report.observed) == {"11"} and report.absent == ("19",)
    old = TORQUE.status([f"19.{H}"]).parse(transcript("torque/qstat_unknown_old"))
    assert old == StatusReport(observed={}, absent=(f"19.{H}",))


def test_unknown_id_nobody_asked_about_is_a_failure() -> None:
    answer = parse.parse_status(["11"], CommandResult(153, "", "qstat: Unknown Job Id 77.x\n"))
    assert isinstance(answer, ParseFailure) and answer.kind == "command_failed"


def test_wrapper_output_tabs_no_exit_status_and_unknown_letter() -> None:
    report = TORQUE.status(["11", "12"]).parse(transcript("torque/qstat_wrapper"))
    assert isinstance(report, StatusReport)
    done, odd = report.observed["11"], report.observed["12"]
    assert done.phase is P.ENDED and done.exit_code is None and done.exec_host == "vm"
    assert done.walltime_limit_seconds == 120
    assert odd.phase is P.UNKNOWN and odd.raw_state == "U"
    assert any("'U'" in w for w in report.warnings)


def test_unknown_state_letter_warns_and_is_not_terminal() -> None:
    report = TORQUE.status([f"11.{H}"]).parse(transcript("torque/qstat_unknown_state"))
    assert isinstance(report, StatusReport)
    assert report.observed[f"11.{H}"].phase is P.UNKNOWN
    assert report.observed[f"11.{H}"].abnormal_end_state is None
    assert len(report.warnings) == 1


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("qstat_server_down", "command_failed"),
        ("qstat_partial", "partial"),
        ("qstat_garbage", "garbage"),
    ],
)
def test_unreadable_qstat_answers_are_typed_failures(name: str, kind: str) -> None:
    answer = TORQUE.status([f"11.{H}"]).parse(transcript(f"torque/{name}"))
    assert isinstance(answer, ParseFailure) and answer.kind == kind


def test_empty_qstat_answer_lists_nobody() -> None:
    report = parse.parse_status([f"11.{H}"], CommandResult(0, ""))
    assert report == StatusReport(observed={}, unlisted=(f"11.{H}",))


def test_find_by_tag_filters_on_job_name() -> None:
    (query,) = TORQUE.find_by_tag(J, SINCE)
    found = query.parse(transcript("torque/qstat_all_by_name"))
    assert isinstance(found, tuple)
    assert [(m.scheduler_job_id, m.phase) for m in found] == [
        (f"11.{H}", P.RUNNING),
        (f"20.{H}", P.ENDED),
    ]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("qdel_ok", "done"),
        ("qdel_unknown", "unknown_job"),
        ("qdel_completed", "already_ended"),
        ("qhold_running", "not_pending"),
        ("qrls_denied", "failed"),
    ],
)
def test_control_outcomes(name: str, kind: str) -> None:
    outcome = TORQUE.control("cancel", "11").parse(transcript(f"torque/{name}"))
    assert isinstance(outcome, ControlOutcome) and outcome.kind == kind


# --------------------------------------------------------------------------------------
# recorded from slurm-wlm-torque over the live Slurm testbed (job 18: a rendered script)
# --------------------------------------------------------------------------------------
def test_live_wrapper_submit_and_status() -> None:
    assert TORQUE.submit("/s/j.sh").parse(transcript("torque/live_qsub_wrapper")) == (
        SubmitAccepted("18")
    )
    running = TORQUE.status(["18"]).parse(transcript("torque/live_qstat_wrapper_running"))
    assert isinstance(running, StatusReport)
    seen = running.observed["18"]
    assert (seen.phase, seen.exec_host, seen.job_name) == (P.RUNNING, "vm", "vq-eeeeeeeeeeee")
    assert seen.walltime_limit_seconds == 120  # 90 s, rounded up to minutes by Slurm
    done = TORQUE.status(["18"]).parse(transcript("torque/live_qstat_wrapper_completed"))
    assert isinstance(done, StatusReport)
    assert done.observed["18"].phase is P.ENDED
    assert done.observed["18"].exit_code is None  # the wrappers print no exit_status


def test_live_wrapper_unknown_ids_are_never_evidence() -> None:
    batch = TORQUE.status(["18", "999999"]).parse(
        transcript("torque/live_qstat_wrapper_with_unknown")
    )
    assert isinstance(batch, StatusReport)
    assert set(batch.observed) == {"18"} and batch.unlisted == ("999999",)
    alone = TORQUE.status(["999999"]).parse(transcript("torque/live_qstat_wrapper_unknown_single"))
    assert isinstance(alone, ParseFailure) and alone.kind == "command_failed"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("live_qdel_wrapper_unknown", "failed"),
        ("live_qdel_wrapper_completed", "failed"),
        ("live_qhold_wrapper_unknown", "unknown_job"),
    ],
)
def test_live_wrapper_control(name: str, kind: str) -> None:
    assert parse.parse_control(transcript(f"torque/{name}")).kind == kind


def test_live_wrapper_find_by_tag_sees_both_submissions() -> None:
    (query,) = TORQUE.find_by_tag("eeeeeeeeeeee", SINCE)
    found = query.parse(transcript("torque/live_qstat_wrapper_all"))
    assert isinstance(found, tuple)
    assert [(m.scheduler_job_id, m.phase, m.nonce) for m in found] == [
        ("17", P.ENDED, None),
        ("18", P.ENDED, None),
    ]


@given(st.text(max_size=400), st.text(max_size=100), st.integers(-1, 255))
def test_status_parser_is_total(stdout: str, stderr: str, code: int) -> None:
    answer = parse.parse_status(["11", "12"], CommandResult(code, stdout, stderr))
    assert isinstance(answer, StatusReport | ParseFailure)


def test_every_torque_transcript_parses_without_raising() -> None:
    for name in all_transcripts("torque"):
        result = transcript(name)
        parse.parse_submit(result)
        parse.parse_status(["11"], result)
        parse.parse_tag(J, result)
        parse.parse_control(result)
