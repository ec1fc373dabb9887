"""Job states and the §3.3 transition table, plus ``apply_transition`` (domain/lifecycle.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vq.domain.lifecycle import apply_transition
from vq.domain.spec import JobSpec
from vq.domain.states import (
    ACTIVE,
    ALLOWED,
    NONTERMINAL,
    TERMINAL,
    WRITABLE_TERMINAL,
    InvalidTransition,
    JobState,
    can_transition,
    check_transition,
)
from vq.errors import EXIT_CODES, Conflict

S = JobState
T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

#: The §3.3 enum, written out: three nonterminal, seven writable terminal, one legacy.
EXPECTED_NONTERMINAL = {"PENDING", "RUNNING", "SUSPENDED"}
EXPECTED_WRITABLE_TERMINAL = {
    "COMPLETED",
    "FAILED",
    "KILLED",
    "OOM_KILLED",
    "STARVED",
    "TIME_EXCEEDED",
    "ABORTED_BY_QUEUE",
}


def make_spec(state: JobState = S.PENDING, **fields: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "id": "0123456789ab",
            "submitted_at": T0,
            "command": ["true"],
            "cpus": 1,
            "state": state,
            **fields,
        }
    )


# --- the enum and the sets --------------------------------------------------------------
def test_enum_holds_exactly_the_section_3_3_states() -> None:
    names = {state.name for state in JobState}
    assert names == EXPECTED_NONTERMINAL | EXPECTED_WRITABLE_TERMINAL | {"INTERRUPTED"}
    # StrEnum: value equals name, so the on-disk text is the state name.
    for state in JobState:
        assert state.value == state.name
        assert JobState(state.name) is state


def test_state_sets_partition_the_enum() -> None:
    assert {s.name for s in NONTERMINAL} == EXPECTED_NONTERMINAL
    assert {s.name for s in WRITABLE_TERMINAL} == EXPECTED_WRITABLE_TERMINAL
    assert {s.name for s in TERMINAL} == EXPECTED_WRITABLE_TERMINAL | {"INTERRUPTED"}
    assert NONTERMINAL.isdisjoint(TERMINAL)
    assert NONTERMINAL | TERMINAL == set(JobState)
    assert {S.RUNNING, S.SUSPENDED} == ACTIVE
    assert ACTIVE <= NONTERMINAL


@pytest.mark.parametrize("state", list(JobState))
def test_is_terminal_property(state: JobState) -> None:
    assert state.is_terminal == (state.name not in EXPECTED_NONTERMINAL)
    assert make_spec(state).is_terminal == state.is_terminal


def test_every_state_has_a_table_entry() -> None:
    assert set(ALLOWED) == set(JobState)
    for targets in ALLOWED.values():
        assert targets <= set(JobState)


# --- INTERRUPTED: readable, terminal, never written -------------------------------------
def test_interrupted_is_terminal_and_not_writable() -> None:
    assert S.INTERRUPTED.is_terminal
    assert S.INTERRUPTED in TERMINAL
    assert S.INTERRUPTED not in WRITABLE_TERMINAL


def test_no_allowed_entry_targets_interrupted() -> None:
    for source, targets in ALLOWED.items():
        assert S.INTERRUPTED not in targets, source
        assert not can_transition(source, S.INTERRUPTED)


@pytest.mark.parametrize("source", sorted(NONTERMINAL))
def test_check_transition_refuses_writing_interrupted(source: JobState) -> None:
    with pytest.raises(InvalidTransition):
        check_transition(source, S.INTERRUPTED)


# --- terminal states are sticky ---------------------------------------------------------
@pytest.mark.parametrize("terminal", sorted(TERMINAL))
def test_terminal_states_have_no_outgoing_transitions(terminal: JobState) -> None:
    assert ALLOWED[terminal] == frozenset()
    for target in JobState:
        assert not can_transition(terminal, target)


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
@pytest.mark.parametrize("target", list(JobState))
def test_leaving_terminal_raises_conflict_with_hint(terminal: JobState, target: JobState) -> None:
    with pytest.raises(InvalidTransition) as info:
        check_transition(terminal, target)
    err = info.value
    assert isinstance(err, Conflict)
    assert err.exit_code == 6 == EXIT_CODES["Conflict"]
    assert err.reference == "invalid-transition"
    assert terminal.value in err.message
    assert err.hint is not None
    assert "resubmit" in err.hint


# --- the nonterminal moves of §3.3 ------------------------------------------------------
def test_principal_writable_transitions_are_allowed() -> None:
    assert can_transition(S.PENDING, S.RUNNING)
    assert can_transition(S.RUNNING, S.SUSPENDED)
    assert can_transition(S.SUSPENDED, S.RUNNING)
    assert can_transition(S.RUNNING, S.PENDING)  # retry
    for terminal in WRITABLE_TERMINAL:
        assert can_transition(S.RUNNING, terminal)
        assert can_transition(S.SUSPENDED, terminal)
    assert can_transition(S.PENDING, S.KILLED)
    assert can_transition(S.PENDING, S.FAILED)


def test_running_to_pending_is_allowed_for_retry() -> None:
    check_transition(S.RUNNING, S.PENDING)  # no exception


@pytest.mark.parametrize(
    "target",
    [S.COMPLETED, S.OOM_KILLED, S.STARVED, S.TIME_EXCEEDED, S.ABORTED_BY_QUEUE, S.SUSPENDED],
)
def test_pending_cannot_end_or_pause_without_running(target: JobState) -> None:
    assert not can_transition(S.PENDING, target)
    with pytest.raises(InvalidTransition) as info:
        check_transition(S.PENDING, target)
    assert "PENDING" in info.value.message
    assert target.value in info.value.message
    assert info.value.hint is None  # the terminal hint is only for terminal sources


def test_pending_to_completed_refused() -> None:
    with pytest.raises(Conflict):
        check_transition(S.PENDING, S.COMPLETED)


def test_suspended_cannot_return_to_pending() -> None:
    assert not can_transition(S.SUSPENDED, S.PENDING)


@pytest.mark.parametrize("state", list(JobState))
def test_self_loops_are_refused(state: JobState) -> None:
    assert not can_transition(state, state)


def test_check_transition_agrees_with_can_transition() -> None:
    for source in JobState:
        for target in JobState:
            if can_transition(source, target):
                check_transition(source, target)
            else:
                with pytest.raises(InvalidTransition):
                    check_transition(source, target)


# --- random walks -----------------------------------------------------------------------
@given(st.lists(st.sampled_from(list(JobState)), max_size=40))
def test_random_walk_never_leaves_terminal(attempts: list[JobState]) -> None:
    """Try random targets from PENDING; legal moves are taken, illegal ones refused."""
    state = S.PENDING
    entered_terminal: JobState | None = None
    for target in attempts:
        if can_transition(state, target):
            assert entered_terminal is None, f"left {entered_terminal} for {target}"
            check_transition(state, target)
            state = target
            assert state is not S.INTERRUPTED
            if state.is_terminal:
                entered_terminal = state
        else:
            with pytest.raises(InvalidTransition):
                check_transition(state, target)
    if entered_terminal is not None:
        assert state is entered_terminal


@given(st.data())
def test_random_walk_through_apply_transition(data: st.DataObject) -> None:
    """Walk only legal moves with apply_transition; once terminal, every move is refused."""
    spec = make_spec()
    now = T0
    for _ in range(data.draw(st.integers(0, 30), label="steps")):
        now += timedelta(seconds=1)
        if spec.is_terminal:
            frozen = spec.model_copy(deep=True)
            target = data.draw(st.sampled_from(list(JobState)), label="target")
            with pytest.raises(InvalidTransition):
                apply_transition(spec, target, now, reason="late")
            assert spec == frozen  # refused moves change nothing
            continue
        target = data.draw(st.sampled_from(sorted(ALLOWED[spec.state])), label="target")
        apply_transition(spec, target, now)
        assert spec.state is target
        if target.is_terminal:
            assert spec.finished_at == now


# --- apply_transition stamps ------------------------------------------------------------
def test_pending_to_running_stamps_started_and_clears_previous_attempt() -> None:
    spec = make_spec(
        S.PENDING,
        started_at=T0 - timedelta(hours=1),
        finished_at=T0 - timedelta(minutes=30),
        pid=111,
        pgid=111,
        pid_start_time=999,
        exit_code=3,
        failure_reason="exited with code 3; retry 1 of 2 in 30s",
        failure_tail="boom",
        retry_count=1,
    )
    out = apply_transition(spec, S.RUNNING, T0)
    assert out is spec  # in place, also returned
    assert spec.state is S.RUNNING
    assert spec.started_at == T0
    assert spec.finished_at is None
    assert spec.pid is None
    assert spec.pgid is None
    assert spec.pid_start_time is None
    assert spec.exit_code is None
    assert spec.failure_reason is None
    assert spec.failure_tail is None
    assert spec.retry_count == 1  # retry budget is not touched by the transition


def test_suspended_to_running_keeps_started_at_and_process() -> None:
    started = T0 - timedelta(minutes=5)
    spec = make_spec(S.SUSPENDED, started_at=started, pid=42, pgid=42, pid_start_time=7)
    apply_transition(spec, S.RUNNING, T0)
    assert spec.state is S.RUNNING
    assert spec.started_at == started
    assert (spec.pid, spec.pgid, spec.pid_start_time) == (42, 42, 7)
    assert spec.finished_at is None


@pytest.mark.parametrize("terminal", sorted(WRITABLE_TERMINAL))
def test_entering_terminal_stamps_finished_at(terminal: JobState) -> None:
    spec = make_spec(S.RUNNING, started_at=T0 - timedelta(minutes=1))
    apply_transition(spec, terminal, T0)
    assert spec.state is terminal
    assert spec.finished_at == T0
    assert spec.started_at == T0 - timedelta(minutes=1)


@pytest.mark.parametrize("terminal", sorted(WRITABLE_TERMINAL - {S.COMPLETED}))
def test_reason_becomes_failure_reason_for_non_completed(terminal: JobState) -> None:
    spec = make_spec(S.RUNNING)
    apply_transition(spec, terminal, T0, reason="because")
    assert spec.failure_reason == "because"


def test_reason_is_ignored_for_completed() -> None:
    spec = make_spec(S.RUNNING)
    apply_transition(spec, S.COMPLETED, T0, reason="should not stick")
    assert spec.state is S.COMPLETED
    assert spec.failure_reason is None


def test_reason_recorded_on_retry_to_pending() -> None:
    spec = make_spec(S.RUNNING, started_at=T0 - timedelta(seconds=10))
    apply_transition(spec, S.PENDING, T0, reason="exited with code 1; retry 1 of 3 in 30s")
    assert spec.state is S.PENDING
    assert spec.failure_reason == "exited with code 1; retry 1 of 3 in 30s"
    assert spec.finished_at is None  # PENDING is not terminal


def test_no_reason_keeps_existing_failure_reason() -> None:
    spec = make_spec(S.RUNNING, failure_reason="earlier")
    apply_transition(spec, S.FAILED, T0)
    assert spec.failure_reason == "earlier"


def test_pending_can_be_killed_without_starting() -> None:
    spec = make_spec(S.PENDING)
    apply_transition(spec, S.KILLED, T0, reason="killed by operator")
    assert spec.state is S.KILLED
    assert spec.started_at is None
    assert spec.finished_at == T0
    assert spec.failure_reason == "killed by operator"


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
@pytest.mark.parametrize("target", list(JobState))
def test_apply_transition_refuses_leaving_terminal(terminal: JobState, target: JobState) -> None:
    finished = T0 - timedelta(hours=1)
    spec = make_spec(terminal, finished_at=finished, failure_reason="original", exit_code=0)
    before = spec.model_copy(deep=True)
    with pytest.raises(InvalidTransition):
        apply_transition(spec, target, T0, reason="late evidence")
    assert spec == before
    assert spec.state is terminal
    assert spec.finished_at == finished
    assert spec.failure_reason == "original"


def test_apply_transition_refuses_pending_to_completed_without_change() -> None:
    spec = make_spec(S.PENDING)
    before = spec.model_copy(deep=True)
    with pytest.raises(InvalidTransition):
        apply_transition(spec, S.COMPLETED, T0)
    assert spec == before
