"""The Slurm dialect: argv shapes and the parsers on stored squeue/sacct/sbatch answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vq.dialects import (
    INVERSE,
    SLURM,
    AccountingReport,
    CommandResult,
    ControlOutcome,
    ParseFailure,
    Query,
    RecheckRequired,
    SchedulerPhase,
    SplitRequired,
    StatusReport,
    SubmitAccepted,
    UnsafeSchedulerValue,
    dialect_for,
)
from vq.dialects import slurm_parse as parse
from vq.dialects._values import kib_from_slurm_size, slurm_duration_seconds
from vq.domain.states import JobState
from vq.errors import ConfigError

from .dialect_transcripts import all_transcripts, transcript

P = SchedulerPhase
J = "0123456789ab"
SINCE = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


# --------------------------------------------------------------------------------------
# argv
# --------------------------------------------------------------------------------------
def test_submit_argv_is_sbatch_parsable() -> None:
    assert SLURM.submit("/scratch/vq/x/_vq/job.sh").argv == (
        "sbatch",
        "--parsable",
        "/scratch/vq/x/_vq/job.sh",
    )


def _by_ids(ids: list[str]) -> Query[StatusReport | SplitRequired | RecheckRequired]:
    """The id-list query a status round falls back to (and rechecks with)."""
    fallback = SLURM.status(ids).fallback
    assert fallback is not None
    return fallback


def test_status_is_one_squeue_of_the_logins_jobs_with_an_id_list_fallback() -> None:
    query = SLURM.status(["12", "13", "12"])
    head = ("env", "LC_ALL=C", "TZ=UTC", "squeue", "--noheader")
    assert query.argv == (*head, "--me", "--states=all", "-o", "%i|%T|%r|%N|%M|%l")
    assert _by_ids(["12", "13", "12"]).argv == (
        *head,
        "--states=all",
        "--jobs=12,13",
        "-o",
        "%i|%T|%r|%N|%M|%l",
    )


def test_status_of_one_id_asks_for_that_id() -> None:
    query = SLURM.status(["12"])
    assert query.argv[5:] == ("--states=all", "--jobs=12", "-o", "%i|%T|%r|%N|%M|%l")
    assert query.fallback is None


def test_the_logins_other_jobs_are_skipped_unread() -> None:
    """Rows nobody asked about (an unsplit array row included) are not ours."""
    result = CommandResult(
        0, "7_[1-9]|PENDING|None|(null)|0:00|1:00\n12|RUNNING|None|vm|0:01|2:00\n"
    )
    report = SLURM.status(["12", "13"]).parse(result)
    assert isinstance(report, RecheckRequired)
    assert set(report.report.observed) == {"12"} and report.report.warnings == ()
    assert report.query.argv[5:7] == ("--states=all", "--jobs=13")


def test_ids_the_login_query_missed_are_rechecked_by_id_and_merged() -> None:
    login = CommandResult(0, "12|RUNNING|None|vm|0:01|2:00\n")
    recheck = SLURM.status(["12", "99", "13"]).parse(login)
    assert isinstance(recheck, RecheckRequired)
    assert recheck.query.argv[6] == "--jobs=99,13"
    by_id = recheck.query.parse(CommandResult(0, "13|PENDING|Priority|(null)|0:00|1:00\n"))
    assert isinstance(by_id, StatusReport)
    merged = recheck.merge(by_id)
    assert set(merged.observed) == {"12", "13"} and merged.unlisted == ("99",)
    assert merged.observed["13"].queued_reason == "Priority"
    failed = recheck.merge(recheck.query.parse(transcript("slurm/live_squeue_controller_down")))
    assert set(failed.observed) == {"12"} and failed.unanswered == ("99", "13")
    assert failed.unlisted == ()  # a failed recheck is unknown, never "not listed"


def test_accounting_argv_starts_before_the_oldest_submission_in_utc() -> None:
    local = timezone(timedelta(hours=2))
    query = SLURM.accounting(["20", "21"], datetime(2026, 12, 3, 11, 30, tzinfo=local))
    assert query.argv[3:7] == ("sacct", "--parsable2", "--noheader", "-j")
    assert query.argv[7] == "20,21"
    assert query.argv[8] == "--starttime=2026-12-03T08:30:00"  # 09:30 UTC minus the margin
    assert query.argv[9:] == (
        "-o",
        "JobID,JobName,State,ExitCode,Elapsed,Timelimit,NodeList,MaxRSS,TotalCPU,Comment",
    )


def test_accounting_refuses_a_naive_time() -> None:
    with pytest.raises(UnsafeSchedulerValue) as caught:
        SLURM.accounting(["20"], datetime(2026, 12, 3, 9, 0))
    assert caught.value.field == "since"


@pytest.mark.parametrize(
    ("action", "argv"),
    [
        ("cancel", ("scancel", "12")),
        ("hold", ("scontrol", "hold", "12")),
        ("release", ("scontrol", "release", "12")),
    ],
)
def test_control_argv(action: str, argv: tuple[str, ...]) -> None:
    assert SLURM.control(action, "12").argv == argv  # type: ignore[arg-type]


def test_hold_and_release_undo_each_other() -> None:
    assert INVERSE == {"hold": "release", "release": "hold"}
    assert SLURM.control(INVERSE["hold"], "12").argv == ("scontrol", "release", "12")


def test_find_by_tag_asks_squeue_then_sacct_by_name() -> None:
    live, history = SLURM.find_by_tag(J, SINCE)
    assert f"--name=vq-{J}" in live.argv and live.argv[3] == "squeue"
    assert live.argv[-2:] == ("-o", "%i|%T|%k")
    assert history.argv[3] == "sacct" and f"--name=vq-{J}" in history.argv
    assert "--starttime=2026-12-03T08:00:00" in history.argv and "-X" in history.argv


@pytest.mark.parametrize("bad", ["12;rm", "-1", "12 13", "", "abc", "12.batch", "１２"])
def test_hostile_job_ids_are_refused_in_every_argv(bad: str) -> None:
    for build in (
        lambda: SLURM.status([bad]),
        lambda: SLURM.accounting([bad], SINCE),
        lambda: SLURM.control("cancel", bad),
    ):
        with pytest.raises(UnsafeSchedulerValue) as caught:
            build()
        assert caught.value.field == "scheduler_job_id"


def test_empty_id_list_is_refused() -> None:
    with pytest.raises(UnsafeSchedulerValue):
        SLURM.status([])


def test_dialect_lookup_fails_closed_for_unimplemented_and_unknown_names() -> None:
    assert dialect_for("slurm") is SLURM
    for name, reference in (
        ("pbspro", "scheduler-dialect-unimplemented"),
        ("sge", "scheduler-dialect-unimplemented"),
        ("lsf", "scheduler-dialect-unknown"),
    ):
        with pytest.raises(ConfigError) as caught:
            dialect_for(name)
        assert caught.value.reference == reference


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0:42", 42),
        ("2:00", 120),
        ("1:02:03", 3723),
        ("00:00.010", 0.01),
        ("1-00:00:00", 86400),
        ("2-03:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5),
        ("1-02:03", 86400 + 2 * 3600 + 3 * 60),
        ("1-02", 86400 + 2 * 3600),
        ("UNLIMITED", None),
        ("INVALID", None),
        ("", None),
        ("１:00", None),
    ],
)
def test_slurm_durations(text: str, seconds: float | None) -> None:
    assert slurm_duration_seconds(text) == (pytest.approx(seconds) if seconds is not None else None)


@pytest.mark.parametrize(
    ("text", "kib"),
    [("3424K", 3424), ("1.50M", 1536), ("2G", 2 * 1024 * 1024), ("0", 0), ("", None), ("x", None)],
)
def test_sacct_sizes(text: str, kib: int | None) -> None:
    assert kib_from_slurm_size(text) == kib


# --------------------------------------------------------------------------------------
# sbatch
# --------------------------------------------------------------------------------------
def test_submit_single_cluster() -> None:
    assert SLURM.submit("/s/job.sh").parse(transcript("slurm/sbatch_parsable")) == SubmitAccepted(
        "12"
    )


def test_submit_id_with_cluster_and_a_warning_on_stderr() -> None:
    answer = SLURM.submit("/s/job.sh").parse(transcript("slurm/sbatch_parsable_cluster"))
    assert answer == SubmitAccepted("4242", cluster="vqtest")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("sbatch_rejected", "command_failed"),
        ("sbatch_empty", "empty"),
        ("sbatch_garbage", "garbage"),
    ],
)
def test_submit_failures_are_typed(name: str, kind: str) -> None:
    answer = parse.parse_submit(transcript(f"slurm/{name}"))
    assert isinstance(answer, ParseFailure) and answer.kind == kind
    if name == "sbatch_rejected":
        assert "Invalid partition name specified" in answer.detail


# --------------------------------------------------------------------------------------
# squeue
# --------------------------------------------------------------------------------------
def test_status_phases_reasons_hosts_and_walltimes() -> None:
    ids = ["12", "13", "14", "15", "16"]
    report = SLURM.status(ids).parse(transcript("slurm/squeue_phases"))
    assert isinstance(report, StatusReport)
    seen = report.observed
    assert {k: v.phase for k, v in seen.items()} == {
        "12": P.RUNNING,
        "13": P.QUEUED,
        "14": P.HELD,
        "15": P.FINISHING,
        "16": P.ENDED,
    }
    assert seen["13"].queued_reason == "Resources"
    assert seen["14"].queued_reason == "JobHeldUser"
    assert seen["12"].queued_reason is None  # "None" while running: not a waiting reason
    assert seen["12"].exec_host == "vm" and seen["13"].exec_host is None
    assert (seen["12"].walltime_used, seen["12"].walltime_used_seconds) == ("0:42", 42)
    assert (seen["12"].walltime_limit, seen["12"].walltime_limit_seconds) == ("2:00", 120)
    assert seen["15"].walltime_used_seconds == 3723
    assert seen["15"].walltime_limit_seconds == 86400
    assert seen["16"].walltime_limit == "UNLIMITED" and seen["16"].walltime_limit_seconds is None
    assert seen["16"].raw_state == "COMPLETED" and seen["16"].abnormal_end_state is None
    assert report.unlisted == () and report.absent == () and report.warnings == ()


def test_a_missing_id_in_a_batch_is_unlisted_never_absent() -> None:
    report = _by_ids(["12", "99"]).parse(transcript("slurm/squeue_one_unknown_of_many"))
    assert isinstance(report, StatusReport)
    assert set(report.observed) == {"12"}
    assert report.unlisted == ("99",) and report.absent == ()


def test_invalid_job_id_for_one_id_is_absence() -> None:
    report = SLURM.status(["99"]).parse(transcript("slurm/live_squeue_invalid_single"))
    assert report == StatusReport(observed={}, absent=("99",))


def test_invalid_job_id_for_a_batch_asks_for_a_split() -> None:
    """§8.2: the diagnostic does not say which id; each is asked alone, and only an id
    Slurm rejects on its own becomes absent while its live sibling keeps its phase."""
    batch = _by_ids(["12", "99"])
    assert batch.parse(transcript("slurm/squeue_invalid_batch")) == SplitRequired(("12", "99"))
    alone_12 = SLURM.status(["12"]).parse(transcript("slurm/squeue_one_unknown_of_many"))
    alone_99 = SLURM.status(["99"]).parse(transcript("slurm/live_squeue_invalid_single"))
    assert isinstance(alone_12, StatusReport) and isinstance(alone_99, StatusReport)
    assert alone_12.observed["12"].phase is P.RUNNING and alone_12.absent == ()
    assert alone_99.absent == ("99",) and alone_99.observed == {}


def test_a_split_resolves_into_one_report() -> None:
    split = _by_ids(["12", "99", "13"]).parse(transcript("slurm/squeue_invalid_batch"))
    assert isinstance(split, SplitRequired)
    answers = {
        "12": SLURM.status(["12"]).parse(transcript("slurm/squeue_one_unknown_of_many")),
        "99": SLURM.status(["99"]).parse(transcript("slurm/live_squeue_invalid_single")),
        "13": SLURM.status(["13"]).parse(transcript("slurm/live_squeue_controller_down")),
    }
    report = split.resolve(answers)
    assert set(report.observed) == {"12"} and report.observed["12"].phase is P.RUNNING
    assert report.absent == ("99",)
    assert report.unanswered == ("13",)  # its own query failed: unknown, not absent
    assert report.unlisted == ()
    assert split.resolve({}).unanswered == ("12", "99", "13")


def test_the_diagnostic_must_be_exact_to_count() -> None:
    near = CommandResult(1, "", "squeue: error: Invalid job id specified, and more\n")
    answer = parse.parse_status(["12", "99"], near)
    assert isinstance(answer, ParseFailure) and answer.kind == "command_failed"
    with_output = CommandResult(
        1, "12|RUNNING|None|vm|0:42|2:00\n", parse.INVALID_JOB_ID_DIAGNOSTIC + "\n"
    )
    assert isinstance(parse.parse_status(["12"], with_output), ParseFailure)


def test_unknown_state_is_unknown_with_a_warning_and_never_terminal() -> None:
    report = SLURM.status(["12", "13"]).parse(transcript("slurm/squeue_unknown_state"))
    assert isinstance(report, StatusReport)
    odd = report.observed["12"]
    assert odd.phase is P.UNKNOWN and odd.raw_state == "TELEPORTING"
    assert odd.abnormal_end_state is None
    assert report.observed["13"].phase is P.RUNNING
    assert len(report.warnings) == 1 and "TELEPORTING" in report.warnings[0]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("live_squeue_controller_down", "command_failed"),
        ("squeue_partial", "partial"),
        ("squeue_garbage", "garbage"),
    ],
)
def test_unreadable_squeue_answers_are_typed_failures(name: str, kind: str) -> None:
    answer = SLURM.status(["12", "13", "14", "15", "16"]).parse(transcript(f"slurm/{name}"))
    assert isinstance(answer, ParseFailure)
    assert answer.kind == kind and answer.command == "squeue"


def test_empty_squeue_answer_lists_nobody() -> None:
    report = _by_ids(["12", "13"]).parse(transcript("slurm/squeue_empty"))
    assert report == StatusReport(observed={}, unlisted=("12", "13"))
    recheck = SLURM.status(["12", "13"]).parse(transcript("slurm/squeue_empty"))
    assert isinstance(recheck, RecheckRequired) and recheck.query.argv[6] == "--jobs=12,13"


def test_lines_for_ids_not_asked_for_are_warned_about_and_skipped() -> None:
    result = CommandResult(0, "12|RUNNING|None|vm|0:01|2:00\n77|RUNNING|None|vm|0:01|2:00\n")
    report = parse.parse_status(["12"], result)
    assert isinstance(report, StatusReport)
    assert set(report.observed) == {"12"} and "77" in report.warnings[0]


def test_every_state_in_the_table_has_a_phase_and_terminal_ones_are_ended() -> None:
    assert set(parse.ABNORMAL_END) <= {s for s, p in parse.PHASES.items() if p is P.ENDED}
    for state in ("COMPLETED", "FAILED"):
        assert parse.PHASES[state] is P.ENDED and state not in parse.ABNORMAL_END


@given(st.text(max_size=300), st.text(max_size=100), st.integers(-1, 255))
def test_status_parser_is_total(stdout: str, stderr: str, code: int) -> None:
    answer = parse.parse_status(["12", "13"], CommandResult(code, stdout, stderr))
    assert isinstance(answer, StatusReport | SplitRequired | ParseFailure)
    if isinstance(answer, StatusReport):
        assert set(answer.observed) <= {"12", "13"}
        assert all(obs.phase is not None for obs in answer.observed.values())


# --------------------------------------------------------------------------------------
# sacct
# --------------------------------------------------------------------------------------
ENDINGS = [str(n) for n in range(20, 30)]


def _endings() -> AccountingReport:
    report = SLURM.accounting(ENDINGS, SINCE).parse(transcript("slurm/sacct_endings"))
    assert isinstance(report, AccountingReport)
    return report


def test_sacct_steps_fold_into_their_job() -> None:
    record = _endings().records["20"]
    assert record.state_code == "COMPLETED" and record.phase is P.ENDED
    assert (record.exit_code, record.exit_signal) == (0, 0)
    assert [step.step for step in record.steps] == ["batch", "extern"]
    assert record.max_rss_kb == 3424  # from the batch step; the job line has none
    assert record.total_cpu_seconds == pytest.approx(0.010)
    assert record.elapsed_seconds == 1 and record.walltime_limit_seconds == 120
    assert record.exec_host == "vm" and record.job_name == f"vq-{J}"
    assert record.comment == f"vq:{J}:n1"
    assert record.abnormal_end_state is None


@pytest.mark.parametrize(
    ("job", "code", "exit_pair", "verdict"),
    [
        ("21", "FAILED", (3, 0), None),
        ("22", "CANCELLED", (0, 0), JobState.ABORTED_BY_QUEUE),
        ("23", "TIMEOUT", (0, 0), JobState.TIME_EXCEEDED),
        ("24", "OUT_OF_MEMORY", (0, 125), JobState.OOM_KILLED),
        ("25", "FAILED", (0, 9), None),
        ("26", "NODE_FAIL", (0, 0), JobState.ABORTED_BY_QUEUE),
        ("27", "PREEMPTED", (0, 0), JobState.ABORTED_BY_QUEUE),
        ("28", "BOOT_FAIL", (0, 0), JobState.ABORTED_BY_QUEUE),
        ("29", "DEADLINE", (0, 0), JobState.TIME_EXCEEDED),
    ],
)
def test_sacct_endings_map_to_vq_verdicts(
    job: str, code: str, exit_pair: tuple[int, int], verdict: JobState | None
) -> None:
    record = _endings().records[job]
    assert record.state_code == code and record.phase is P.ENDED
    assert (record.exit_code, record.exit_signal) == exit_pair
    assert record.abnormal_end_state == verdict


def test_sacct_cancelled_by_names_the_uid_and_keeps_the_raw_state() -> None:
    record = _endings().records["22"]
    assert record.raw_state == "CANCELLED by 1001" and record.cancelled_by_uid == 1001
    batch = record.steps[0]
    assert (batch.raw_state, batch.exit_signal) == ("CANCELLED", 15)


def test_sacct_linuxproc_memory_kill_keeps_the_step_detail() -> None:
    record = _endings().records["25"]
    assert record.steps[0].raw_state == "CANCELLED by 0"
    assert record.max_rss_kb == 420000


def test_sacct_pending_job_has_no_host() -> None:
    assert _endings().records["29"].exec_host is None
    assert _endings().records["29"].walltime_limit_seconds == 86400


def test_sacct_lag_is_unlisted_not_final() -> None:
    report = SLURM.accounting(["20", "21"], SINCE).parse(transcript("slurm/sacct_lagging"))
    assert isinstance(report, AccountingReport)
    assert report.records["20"].phase is P.RUNNING
    assert report.unlisted == ("21",)


def test_sacct_comment_keeps_its_pipes() -> None:
    report = parse.parse_accounting(["20"], transcript("slurm/sacct_pipe_in_comment"))
    assert isinstance(report, AccountingReport)
    assert report.records["20"].comment == "note|with|pipes"
    assert report.records["20"].phase is P.QUEUED


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("sacct_disabled", "command_failed"),
        ("sacct_partial", "partial"),
        ("sacct_garbage", "garbage"),
    ],
)
def test_unreadable_sacct_answers_are_typed_failures(name: str, kind: str) -> None:
    answer = parse.parse_accounting(["20"], transcript(f"slurm/{name}"))
    assert isinstance(answer, ParseFailure) and answer.kind == kind


def test_sacct_empty_answer_means_nothing_recorded_yet() -> None:
    report = parse.parse_accounting(["20", "21"], CommandResult(0, ""))
    assert report == AccountingReport(records={}, unlisted=("20", "21"))


def test_sacct_orphan_steps_and_unknown_states_warn() -> None:
    text = "31.batch|batch|COMPLETED|0:0|00:00:01||vm|10K|00:00:00|\n"
    text += "20|vq-x|WEIRD|0:0|00:00:01|00:02:00|vm||00:00:00|\n"
    report = parse.parse_accounting(["20"], CommandResult(0, text))
    assert isinstance(report, AccountingReport)
    assert report.records["20"].phase is P.UNKNOWN
    assert any("WEIRD" in w for w in report.warnings)
    assert any("31" in w for w in report.warnings)


@given(st.text(max_size=300), st.integers(-1, 3))
def test_accounting_parser_is_total(stdout: str, code: int) -> None:
    answer = parse.parse_accounting(["20"], CommandResult(code, stdout, ""))
    assert isinstance(answer, AccountingReport | ParseFailure)


# --------------------------------------------------------------------------------------
# find by tag, control
# --------------------------------------------------------------------------------------
def test_find_by_tag_reads_the_nonce_from_the_comment() -> None:
    live, history = SLURM.find_by_tag(J, SINCE)
    found = live.parse(transcript("slurm/squeue_by_name"))
    assert isinstance(found, tuple)
    assert [(m.scheduler_job_id, m.phase, m.nonce) for m in found] == [
        ("30", P.QUEUED, "n1"),
        ("31", P.ENDED, None),
    ]
    ended = history.parse(transcript("slurm/sacct_by_name"))
    assert isinstance(ended, tuple)
    assert [(m.scheduler_job_id, m.raw_state, m.nonce) for m in ended] == [
        ("30", "COMPLETED", "n1"),
        ("31", "CANCELLED by 1001", None),
    ]


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("scancel_ok", "done"),
        ("scontrol_hold_not_pending", "not_pending"),
        ("live_scontrol_hold_unknown", "unknown_job"),
        ("scontrol_release_finished", "already_ended"),
        ("scancel_verbose_done", "already_ended"),
        ("scancel_denied", "failed"),
    ],
)
def test_control_outcomes(name: str, kind: str) -> None:
    outcome = SLURM.control("cancel", "12").parse(transcript(f"slurm/{name}"))
    assert isinstance(outcome, ControlOutcome) and outcome.kind == kind
    if kind == "failed":
        assert "permission denied" in outcome.detail


def test_live_answers_without_a_controller_are_failures_not_evidence() -> None:
    """Recorded from the 22.05.8 clients on this machine with no slurmctld/slurmdbd."""
    submit = SLURM.submit("/tmp/x.sh").parse(transcript("slurm/live_sbatch_controller_down"))
    assert (
        isinstance(submit, ParseFailure) and "Unable to contact slurm controller" in submit.detail
    )
    status = SLURM.status(["12", "13"]).parse(transcript("slurm/live_squeue_controller_down"))
    assert isinstance(status, ParseFailure) and status.kind == "command_failed"
    accounting = SLURM.accounting(["12"], SINCE).parse(transcript("slurm/live_sacct_no_database"))
    assert isinstance(accounting, ParseFailure) and accounting.kind == "command_failed"
    for name in ("live_scancel_controller_down", "live_scontrol_hold_controller_down"):
        outcome = SLURM.control("hold", "12").parse(transcript(f"slurm/{name}"))
        assert outcome.kind == "failed" and outcome.detail


# --------------------------------------------------------------------------------------
# recorded from a live Slurm 22.05.8 (the testbed's smoke jobs)
# --------------------------------------------------------------------------------------
LIVE_IDS = [str(n) for n in range(1, 11)]


def test_live_squeue_of_ended_jobs() -> None:
    report = SLURM.status(LIVE_IDS).parse(transcript("slurm/live_squeue_all"))
    assert isinstance(report, StatusReport)
    assert set(report.observed) == set(LIVE_IDS) and report.warnings == ()
    assert all(obs.phase is P.ENDED for obs in report.observed.values())
    assert all(obs.queued_reason is None for obs in report.observed.values())
    assert report.observed["5"].abnormal_end_state is JobState.OOM_KILLED
    assert report.observed["6"].abnormal_end_state is JobState.ABORTED_BY_QUEUE
    assert report.observed["2"].raw_state == "FAILED"
    assert report.observed["2"].abnormal_end_state is None
    assert report.observed["1"].exec_host == "vm"
    assert report.observed["1"].walltime_limit == "UNLIMITED"


def test_live_batch_with_an_unknown_id_leaves_it_unlisted() -> None:
    ids = ["6", "10", "1", "3", "7", "2", "999999"]
    report = _by_ids(ids).parse(transcript("slurm/live_squeue_batch_with_unknown"))
    assert isinstance(report, StatusReport)
    assert set(report.observed) == set(ids[:-1])
    assert report.unlisted == ("999999",) and report.absent == ()


def test_live_sacct_of_ended_jobs() -> None:
    ids = [str(n) for n in range(3, 11)]
    report = SLURM.accounting(ids, SINCE).parse(transcript("slurm/live_sacct_jobs"))
    assert isinstance(report, AccountingReport)
    assert set(report.records) == set(ids) and report.unlisted == ()
    oom = report.records["5"]
    assert (oom.state_code, oom.exit_code, oom.exit_signal) == ("OUT_OF_MEMORY", 0, 125)
    assert oom.abnormal_end_state is JobState.OOM_KILLED and oom.max_rss_kb == 3380
    killed = report.records["9"]  # memory kill without cgroups: FAILED, batch CANCELLED by 0
    assert (killed.state_code, killed.exit_signal, killed.abnormal_end_state) == ("FAILED", 9, None)
    assert killed.steps[0].raw_state == "CANCELLED by 0" and killed.max_rss_kb == 419116
    cancelled = report.records["6"]
    assert cancelled.raw_state == "CANCELLED" and cancelled.cancelled_by_uid is None
    assert cancelled.abnormal_end_state is JobState.ABORTED_BY_QUEUE
    assert report.records["7"].max_rss_kb is None  # the batch step reported no MaxRSS
    assert (report.records["4"].exit_code, report.records["4"].phase) == (3, P.ENDED)
    assert report.records["3"].total_cpu_seconds == pytest.approx(0.001)


def test_live_sacct_of_an_unknown_id_is_unlisted() -> None:
    report = parse.parse_accounting(["999999"], transcript("slurm/live_sacct_unknown_id"))
    assert report == AccountingReport(records={}, unlisted=("999999",))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("live_scontrol_hold_unknown", "unknown_job"),
        ("live_scontrol_release_unknown", "unknown_job"),
        ("live_scancel_unknown", "done"),
        ("live_scancel_verbose_unknown", "done"),  # scancel exits 0 for a gone job
    ],
)
def test_live_control_answers(name: str, kind: str) -> None:
    assert parse.parse_control(transcript(f"slurm/{name}")).kind == kind


def test_live_vq_job_from_submit_to_accounting() -> None:
    """Job 11 ran a script rendered by this dialect on the live testbed."""
    assert SLURM.submit("/s/j.sh").parse(transcript("slurm/live_sbatch_parsable")) == (
        SubmitAccepted("11")
    )
    phases = []
    for state in ("pending", "running", "failed"):
        report = SLURM.status(["11"]).parse(transcript(f"slurm/live_squeue_vq_job_{state}"))
        assert isinstance(report, StatusReport)
        phases.append(report.observed["11"].phase)
    assert phases == [P.QUEUED, P.RUNNING, P.ENDED]
    pending = SLURM.status(["11"]).parse(transcript("slurm/live_squeue_vq_job_pending"))
    assert isinstance(pending, StatusReport)
    assert pending.observed["11"].queued_reason is None  # Slurm said "None"
    assert pending.observed["11"].walltime_limit_seconds == 60
    settled = SLURM.accounting(["11"], SINCE).parse(transcript("slurm/live_sacct_vq_job"))
    assert isinstance(settled, AccountingReport)
    record = settled.records["11"]
    assert (record.job_name, record.state_code, record.exit_code) == (f"vq-{J}", "FAILED", 3)
    assert record.max_rss_kb == 6108 and record.walltime_limit_seconds == 60
    assert record.comment is None  # this cluster does not store job comments


def test_live_cancel_of_a_running_vq_job() -> None:
    before = SLURM.status(["14"]).parse(transcript("slurm/live_squeue_vq_cancel_running"))
    assert isinstance(before, StatusReport) and before.observed["14"].phase is P.RUNNING
    assert SLURM.control("cancel", "14").parse(transcript("slurm/live_scancel_vq_job")).kind == (
        "done"
    )
    after = SLURM.status(["14"]).parse(transcript("slurm/live_squeue_vq_cancelled"))
    assert isinstance(after, StatusReport)
    assert after.observed["14"].abnormal_end_state is JobState.ABORTED_BY_QUEUE
    report = SLURM.accounting(["14"], SINCE).parse(transcript("slurm/live_sacct_vq_cancelled"))
    assert isinstance(report, AccountingReport)
    record = report.records["14"]
    assert (record.state_code, record.cancelled_by_uid) == ("CANCELLED", 0)
    assert record.abnormal_end_state is JobState.ABORTED_BY_QUEUE
    assert record.steps[0].raw_state == "FAILED"


def test_live_out_of_memory_vq_job() -> None:
    status = SLURM.status(["15"]).parse(transcript("slurm/live_squeue_vq_oom"))
    assert isinstance(status, StatusReport)
    seen = status.observed["15"]
    assert (seen.phase, seen.abnormal_end_state) == (P.ENDED, JobState.OOM_KILLED)
    assert seen.queued_reason is None  # "OutOfMemory" is not a waiting reason
    report = SLURM.accounting(["15"], SINCE).parse(transcript("slurm/live_sacct_vq_oom"))
    assert isinstance(report, AccountingReport)
    record = report.records["15"]
    assert (record.exit_code, record.exit_signal) == (0, 125)
    assert record.abnormal_end_state is JobState.OOM_KILLED


def test_live_hold_and_release() -> None:
    """Job 16: submitted held, released, held again while pending, released, then held
    while running, which Slurm accepts (exit 0) without stopping the job."""
    phases = {}
    for name in (
        "held_user",
        "held_admin",
        "released_running",
        "completed_after_hold",
    ):
        report = SLURM.status(["16"]).parse(transcript(f"slurm/live_squeue_vq_{name}"))
        assert isinstance(report, StatusReport)
        phases[name] = report.observed["16"]
    assert phases["held_user"].phase is P.HELD
    assert phases["held_user"].queued_reason == "JobHeldUser"
    assert phases["held_admin"].phase is P.HELD
    assert phases["held_admin"].queued_reason == "JobHeldAdmin"
    assert phases["released_running"].phase is P.RUNNING
    done = phases["completed_after_hold"]
    assert (done.phase, done.queued_reason) == (P.ENDED, None)
    for name in ("live_scontrol_release", "live_scontrol_hold_running"):
        assert parse.parse_control(transcript(f"slurm/{name}")).kind == "done"


def test_live_accounting_right_after_the_end_is_incomplete_but_readable() -> None:
    early = SLURM.accounting(["11"], SINCE).parse(transcript("slurm/live_sacct_vq_job_early"))
    assert isinstance(early, AccountingReport)
    record = early.records["11"]
    assert record.job_name == "allocation" and record.walltime_limit is None
    assert (record.state_code, record.exit_code) == ("FAILED", 3)


def test_live_find_by_tag() -> None:
    live, history = SLURM.find_by_tag(J, SINCE)
    found = live.parse(transcript("slurm/live_squeue_vq_by_name"))
    assert isinstance(found, tuple)
    assert [(m.scheduler_job_id, m.phase, m.nonce) for m in found] == [("11", P.ENDED, "live1")]
    assert history.parse(transcript("slurm/live_sacct_vq_by_name_early")) == ()
    settled = history.parse(transcript("slurm/live_sacct_vq_by_name"))
    assert isinstance(settled, tuple)
    assert [(m.scheduler_job_id, m.nonce) for m in settled] == [("11", None)]


def test_every_slurm_transcript_parses_without_raising() -> None:
    for name in all_transcripts("slurm"):
        result = transcript(name)
        parse.parse_submit(result)
        parse.parse_status(["12"], result)
        parse.parse_accounting(["20"], result)
        parse.parse_tag_squeue(J, result)
        parse.parse_control(result)


def test_a_repeated_row_reads_the_same_each_round_warning_included() -> None:
    """Rows are read once and remembered; a remembered row still carries its warning."""
    rows = CommandResult(0, "12|PENDING|JobHeldUser|(null)|0:00|1:00\n13|WEIRD|None|vm|0:01|2:00\n")
    first, second = (parse.parse_status(["12", "13"], rows) for _ in range(2))
    assert isinstance(first, StatusReport) and first == second
    assert first.observed["12"].phase is P.HELD and first.observed["13"].phase is P.UNKNOWN
    assert len(second.warnings) == 1 and "WEIRD" in second.warnings[0]


def test_a_malformed_row_of_another_job_still_fails_a_login_answer() -> None:
    rows = CommandResult(0, "12|RUNNING|None|vm|0:01|2:00\n77|RUNNING\n")
    answer = SLURM.status(["12", "13"]).parse(rows)
    assert isinstance(answer, ParseFailure) and answer.kind == "partial"
