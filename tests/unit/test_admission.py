"""Declared-resource admission (§4.3, §5.1): ordering, skipping, caps, reasons."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vq.domain.admission import (
    Caps,
    Overage,
    Request,
    Usage,
    capacity_overages,
    effective_mem_mb,
    order_key,
    pending_reason,
    plan_dispatch,
)

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


def req(
    job_id: str,
    *,
    cpus: int = 1,
    mem_mb: int | None = None,
    priority: int = 0,
    submitted: int = 0,
    not_before: datetime | None = None,
) -> Request:
    """A request submitted ``submitted`` seconds after a fixed origin."""
    return Request(
        job_id=job_id,
        cpus=cpus,
        mem_mb=mem_mb,
        priority=priority,
        submitted_at=NOW - timedelta(hours=1) + timedelta(seconds=submitted),
        not_before=not_before,
    )


# --- ordering ---------------------------------------------------------------------------
def test_priority_then_fifo_then_id() -> None:
    candidates = [
        req("a", submitted=1),
        req("b", submitted=0),
        req("c", priority=5, submitted=9),
        req("d", priority=-1, submitted=-100),
        req("e", submitted=0),  # same time as "b": id breaks the tie
    ]
    assert plan_dispatch(candidates, Usage(), Caps(), NOW) == ["c", "b", "e", "a", "d"]


def test_ordered_candidates_are_consumed_only_until_the_slots_are_taken() -> None:
    seen: list[str] = []

    def stream() -> Iterator[Request]:
        for i in range(10_000):
            seen.append(f"j{i}")
            yield req(f"j{i}", submitted=i)

    chosen = plan_dispatch(stream(), Usage(jobs=1), Caps(max_jobs=3), NOW, ordered=True)
    assert chosen == ["j0", "j1"]
    assert len(seen) == 2  # never walked the rest of the queue
    # Same answer as the sorting path for the same (already ordered) requests.
    again = [req(f"j{i}", submitted=i) for i in range(5)]
    assert plan_dispatch(reversed(again), Usage(jobs=1), Caps(max_jobs=3), NOW) == chosen


def test_order_key_is_descending_priority_then_time_then_id() -> None:
    low_early = req("x", priority=0, submitted=0)
    high_late = req("y", priority=1, submitted=50)
    assert order_key(high_late) < order_key(low_early)
    assert order_key(req("a", submitted=0)) < order_key(req("b", submitted=0))
    assert order_key(req("z", submitted=0)) < order_key(req("a", submitted=1))


def test_array_elements_start_in_index_order_not_id_order() -> None:
    """Elements of one array share a submission time; their index decides, not the id."""
    ids = ["f1", "a2", "c3", "b4", "e5", "d6"]
    elements = [
        replace(req(job_id, submitted=0), sequence=index) for index, job_id in enumerate(ids)
    ]
    assert plan_dispatch(elements, Usage(), Caps(max_jobs=6), NOW) == ids
    assert plan_dispatch(reversed(elements), Usage(), Caps(max_jobs=3), NOW) == ids[:3]


def test_input_order_does_not_matter() -> None:
    candidates = [req(f"j{i}", priority=i % 3, submitted=-i) for i in range(10)]
    forward = plan_dispatch(candidates, Usage(), Caps(max_jobs=4), NOW)
    backward = plan_dispatch(list(reversed(candidates)), Usage(), Caps(max_jobs=4), NOW)
    assert forward == backward
    assert len(forward) == 4


# --- skipping ---------------------------------------------------------------------------
def test_big_job_is_skipped_so_smaller_later_job_starts() -> None:
    caps = Caps(max_cpus=8, max_mem_mb=10_000)
    usage = Usage(jobs=1, cpus=4, mem_mb=0)
    big = req("big", cpus=6, submitted=0)
    small = req("small", cpus=2, submitted=10)
    assert plan_dispatch([big, small], usage, caps, NOW) == ["small"]
    # With room, the big one goes first (it is earlier).
    assert plan_dispatch([big, small], Usage(), caps, NOW) == ["big", "small"]


def test_big_memory_job_is_skipped_for_smaller_one() -> None:
    caps = Caps(max_mem_mb=4000)
    usage = Usage(jobs=1, cpus=1, mem_mb=3000)
    assert plan_dispatch(
        [req("big", mem_mb=2000, submitted=0), req("small", mem_mb=500, submitted=5)],
        usage,
        caps,
        NOW,
    ) == ["small"]


def test_chosen_jobs_consume_budget_for_later_candidates() -> None:
    caps = Caps(max_cpus=4)
    candidates = [req("a", cpus=3, submitted=0), req("b", cpus=2, submitted=1), req("c", cpus=1)]
    # "c" is submitted at 0 as well but sorts after "a" by id.
    assert plan_dispatch(candidates, Usage(), caps, NOW) == ["a", "c"]


def test_over_cap_job_is_never_chosen() -> None:
    caps = Caps(max_cpus=8, max_mem_mb=1000)
    huge_cpu = req("cpu", cpus=9, priority=10)
    huge_mem = req("mem", mem_mb=1001, priority=10)
    ok = req("ok", cpus=8, mem_mb=1000)
    assert plan_dispatch([huge_cpu, huge_mem, ok], Usage(), caps, NOW) == ["ok"]
    assert plan_dispatch([huge_cpu, huge_mem], Usage(), caps, NOW) == []


def test_capacity_overages_classification() -> None:
    caps = Caps(max_cpus=8, max_mem_mb=1000)
    assert capacity_overages(8, 1000, caps) == []
    assert capacity_overages(9, 10, caps) == [Overage("cpus", 9, 8)]
    assert capacity_overages(1, 1001, caps) == [Overage("mem_mb", 1001, 1000)]
    assert capacity_overages(12, 2000, caps) == [
        Overage("cpus", 12, 8),
        Overage("mem_mb", 2000, 1000),
    ]
    assert Overage("cpus", 12, 8).as_dict() == {"resource": "cpus", "requested": 12, "capacity": 8}
    # Unknown caps never classify anything as over capacity.
    assert capacity_overages(10_000, 10**9, Caps()) == []


def test_capacity_overages_ignore_current_usage_and_max_jobs() -> None:
    # Base caps only: max_jobs and usage are ordinary blockers, not impossibility.
    caps = Caps(max_jobs=1, max_cpus=4, max_mem_mb=100)
    assert capacity_overages(4, 100, caps) == []


def test_not_before_in_future_is_skipped() -> None:
    later = req("later", not_before=NOW + timedelta(seconds=1), priority=9)
    due = req("due", not_before=NOW)  # exactly now is due
    past = req("past", not_before=NOW - timedelta(days=1))
    assert plan_dispatch([later, due, past], Usage(), Caps(), NOW) == ["due", "past"]
    assert plan_dispatch([later], Usage(), Caps(), NOW + timedelta(seconds=1)) == ["later"]


def test_max_jobs_respected() -> None:
    candidates = [req(f"j{i}", submitted=i) for i in range(5)]
    assert plan_dispatch(candidates, Usage(), Caps(max_jobs=2), NOW) == ["j0", "j1"]
    assert plan_dispatch(candidates, Usage(jobs=1), Caps(max_jobs=2), NOW) == ["j0"]
    assert plan_dispatch(candidates, Usage(jobs=2), Caps(max_jobs=2), NOW) == []


def test_default_job_mem_applied_to_undeclared_memory() -> None:
    caps = Caps(max_mem_mb=1000, default_job_mem_mb=600)
    assert effective_mem_mb(None, caps) == 600
    assert effective_mem_mb(50, caps) == 50
    candidates = [req("a", submitted=0), req("b", submitted=1), req("c", mem_mb=400, submitted=2)]
    # a reserves 600; b (another 600) does not fit; c (400) does.
    assert plan_dispatch(candidates, Usage(), caps, NOW) == ["a", "c"]


def test_undeclared_memory_without_default_reserves_nothing() -> None:
    caps = Caps(max_mem_mb=1000)
    assert effective_mem_mb(None, caps) == 0
    candidates = [req(f"j{i}", submitted=i) for i in range(5)]
    assert plan_dispatch(candidates, Usage(mem_mb=1000), caps, NOW) == [
        c.job_id for c in candidates
    ]


def test_default_above_memory_cap_makes_undeclared_jobs_over_capacity() -> None:
    caps = Caps(max_mem_mb=500, default_job_mem_mb=600)
    assert capacity_overages(1, None, caps) == [Overage("mem_mb", 600, 500)]
    assert plan_dispatch([req("a")], Usage(), caps, NOW) == []


def test_empty_candidates() -> None:
    assert plan_dispatch([], Usage(), Caps(max_jobs=1), NOW) == []


# --- pending_reason ---------------------------------------------------------------------
def test_pending_reason_over_capacity() -> None:
    caps = Caps(max_cpus=8, max_mem_mb=1000)
    text = pending_reason(req("a", cpus=16, mem_mb=2000), Usage(), caps, NOW)
    assert text == (
        "over configured capacity (cpus 16 > cap 8, mem_mb 2000 > cap 1000); "
        "it stays pending until the caps change"
    )


def test_pending_reason_over_capacity_wins_over_not_before() -> None:
    caps = Caps(max_cpus=2)
    r = req("a", cpus=3, not_before=NOW + timedelta(hours=1))
    assert pending_reason(r, Usage(), caps, NOW).startswith("over configured capacity (cpus 3")


def test_pending_reason_not_before() -> None:
    r = req("a", not_before=datetime(2025, 6, 1, 13, 30, 15, 999, tzinfo=UTC))
    assert pending_reason(r, Usage(), Caps(), NOW) == "not before 2025-06-01T13:30:15+00:00"


def test_pending_reason_job_slots() -> None:
    text = pending_reason(req("a"), Usage(jobs=3), Caps(max_jobs=3), NOW)
    assert text == "all 3 job slots are in use"


def test_pending_reason_cpus() -> None:
    text = pending_reason(req("a", cpus=6), Usage(jobs=1, cpus=4), Caps(max_cpus=8), NOW)
    assert text == "waiting for CPUs (6 needed, 4 free)"


def test_pending_reason_memory_uses_effective_memory() -> None:
    caps = Caps(max_mem_mb=1000, default_job_mem_mb=600)
    text = pending_reason(req("a"), Usage(jobs=1, mem_mb=700), caps, NOW)
    assert text == "waiting for memory (600 MB needed, 300 MB free)"


def test_pending_reason_fits_but_not_yet_dispatched() -> None:
    text = pending_reason(req("a"), Usage(), Caps(max_jobs=4, max_cpus=4, max_mem_mb=10), NOW)
    assert text.startswith("waiting for the next dispatch pass")


# --- the property -----------------------------------------------------------------------
def _fits_independently(r: Request, usage: Usage, caps: Caps) -> bool:
    """A from-scratch fit check (does not reuse the module's private helper)."""
    mem = r.mem_mb if r.mem_mb is not None else (caps.default_job_mem_mb or 0)
    return (
        (caps.max_jobs is None or usage.jobs + 1 <= caps.max_jobs)
        and (caps.max_cpus is None or usage.cpus + r.cpus <= caps.max_cpus)
        and (caps.max_mem_mb is None or usage.mem_mb + mem <= caps.max_mem_mb)
    )


def _over_cap(r: Request, caps: Caps) -> bool:
    mem = r.mem_mb if r.mem_mb is not None else (caps.default_job_mem_mb or 0)
    return (caps.max_cpus is not None and r.cpus > caps.max_cpus) or (
        caps.max_mem_mb is not None and mem > caps.max_mem_mb
    )


_TIMES = st.integers(-7200, 7200).map(lambda s: NOW + timedelta(seconds=s))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Request], Usage, Caps]:
    ids = draw(st.lists(st.text("0123456789abcdef", min_size=1, max_size=6), unique=True))
    candidates = [
        Request(
            job_id=job_id,
            cpus=draw(st.integers(1, 8)),
            mem_mb=draw(st.none() | st.integers(1, 4000)),
            priority=draw(st.integers(-2, 2)),
            submitted_at=draw(_TIMES),
            not_before=draw(st.none() | _TIMES),
        )
        for job_id in ids
    ]
    caps = Caps(
        max_jobs=draw(st.none() | st.integers(1, 10)),
        max_cpus=draw(st.none() | st.integers(1, 16)),
        max_mem_mb=draw(st.none() | st.integers(1, 8000)),
        default_job_mem_mb=draw(st.none() | st.integers(1, 3000)),
    )
    usage = Usage(
        jobs=draw(st.integers(0, caps.max_jobs if caps.max_jobs is not None else 6)),
        cpus=draw(st.integers(0, caps.max_cpus if caps.max_cpus is not None else 32)),
        mem_mb=draw(st.integers(0, caps.max_mem_mb if caps.max_mem_mb is not None else 9000)),
    )
    return candidates, usage, caps


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_plan_dispatch_properties(scenario: tuple[list[Request], Usage, Caps]) -> None:
    candidates, usage, caps = scenario
    chosen = plan_dispatch(candidates, usage, caps, NOW)
    by_id = {r.job_id: r for r in candidates}

    assert len(set(chosen)) == len(chosen)
    assert set(chosen) <= set(by_id)

    # (2) no over-cap or not-yet-due job is chosen.
    for job_id in chosen:
        r = by_id[job_id]
        assert r.not_before is None or r.not_before <= NOW
        assert not _over_cap(r, caps)
        assert capacity_overages(r.cpus, r.mem_mb, caps) == []

    # (1) chosen jobs plus existing usage never exceed any cap.
    total_jobs = usage.jobs + len(chosen)
    total_cpus = usage.cpus + sum(by_id[j].cpus for j in chosen)
    total_mem = usage.mem_mb + sum(effective_mem_mb(by_id[j].mem_mb, caps) for j in chosen)
    if caps.max_jobs is not None:
        assert total_jobs <= caps.max_jobs
    if caps.max_cpus is not None:
        assert total_cpus <= caps.max_cpus
    if caps.max_mem_mb is not None:
        assert total_mem <= caps.max_mem_mb

    # (4) returned in order_key order.
    assert chosen == sorted(chosen, key=lambda j: order_key(by_id[j]))

    # (3) greedy maximality: re-simulate in order; every skipped due, non-over-cap
    # candidate did not fit the budget left at the moment it was considered.
    chosen_set = set(chosen)
    running = usage
    for r in sorted(candidates, key=lambda c: (-c.priority, c.submitted_at, c.job_id)):
        due = r.not_before is None or r.not_before <= NOW
        eligible = due and not _over_cap(r, caps)
        if r.job_id in chosen_set:
            assert eligible
            assert _fits_independently(r, running, caps)
            mem = r.mem_mb if r.mem_mb is not None else (caps.default_job_mem_mb or 0)
            running = Usage(running.jobs + 1, running.cpus + r.cpus, running.mem_mb + mem)
        elif eligible:
            assert not _fits_independently(r, running, caps), f"{r.job_id} would have fit"


@given(scenarios())
def test_pending_reason_is_consistent_with_plan(
    scenario: tuple[list[Request], Usage, Caps],
) -> None:
    """A lone candidate is chosen exactly when its reason says only 'next dispatch pass'."""
    candidates, usage, caps = scenario
    for r in candidates:
        chosen = plan_dispatch([r], usage, caps, NOW)
        reason = pending_reason(r, usage, caps, NOW)
        assert reason
        assert (chosen == [r.job_id]) == reason.startswith("waiting for the next dispatch pass")
        assert reason.startswith("over configured capacity") == _over_cap(r, caps)


@pytest.mark.parametrize("priority", [-2, 0, 2])
def test_priority_beats_fifo_under_contention(priority: int) -> None:
    caps = Caps(max_jobs=1)
    early = req("early", priority=priority, submitted=0)
    late_high = req("late", priority=priority + 1, submitted=100)
    assert plan_dispatch([early, late_high], Usage(), caps, NOW) == ["late"]


# --- base caps against a throttle (§4.3, §5.1) ------------------------------------------
def test_a_throttled_cap_is_an_ordinary_blocker_not_an_overage() -> None:
    base = Caps(max_jobs=4, max_cpus=2, max_mem_mb=1000)
    throttled = Caps(max_jobs=4, max_cpus=1, max_mem_mb=1000)
    job = req("a", cpus=2)
    text = pending_reason(job, Usage(), throttled, NOW, base)
    assert text.startswith("throttled: max_cpus is 1 (throttled from 2)")
    assert "over configured capacity" not in text
    assert plan_dispatch([job], Usage(), throttled, NOW, base) == []
    assert plan_dispatch([job], Usage(), base, NOW, base) == ["a"]
    over = pending_reason(req("b", cpus=3), Usage(), throttled, NOW, base)
    assert over.startswith("over configured capacity (cpus 3 > cap 2)")
    slots = pending_reason(req("c"), Usage(jobs=1), Caps(max_jobs=1), NOW, Caps(max_jobs=4))
    assert slots == "all 1 job slots are in use (throttled from 4)"
