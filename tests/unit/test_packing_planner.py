"""The packing planner (pure): capacity, balanced groups, exact totals, selection, bytes."""

from __future__ import annotations

import json

import pytest

from tests.unit.packing_support import gpu_profile, inputs, profile, tasks
from vq.packing.planner import (
    PlanRefused,
    TaskView,
    capacity,
    group_sizes,
    plan_bytes,
    plan_document,
)
from vq.packing.roster import Attempt


def test_capacity_is_the_tightest_ceiling() -> None:
    assert capacity(profile()) == 8  # max_tasks
    assert capacity(profile(cpus_per_task=3)) == 5  # 16 // 3
    assert capacity(profile(memory_mib_per_task=5000)) == 3  # 16384 // 5000
    assert capacity(gpu_profile()) == 4  # 4 GPUs, 64 CPUs / 8 = 8, 256 GiB / 32 GiB = 8


def test_group_sizes_are_the_fewest_and_balanced() -> None:
    assert group_sizes(16, 8) == [8, 8]
    assert group_sizes(17, 8) == [6, 6, 5]
    assert group_sizes(10, 4) == [4, 3, 3]
    assert group_sizes(3, 8) == [3]
    assert group_sizes(0, 8) == []
    for count in range(1, 60):
        for cap in range(1, 12):
            sizes = group_sizes(count, cap)
            assert sum(sizes) == count
            assert max(sizes) <= cap and max(sizes) - min(sizes) <= 1
            assert len(sizes) == -(-count // cap)


def test_sixteen_one_cpu_tasks_make_two_exact_allocations() -> None:
    document, scripts = plan_document(inputs(tasks(16), profile()))
    allocations = document["allocations"]
    assert [a["tasks"] for a in allocations] == [8, 8]
    assert [a["task_keys"] for a in allocations] == [
        [f"t{n:03d}" for n in range(8)],
        [f"t{n:03d}" for n in range(8, 16)],
    ]
    first = allocations[0]
    assert (first["cpus"], first["memory_mib"], first["gpus"]) == (8, 4096, 0)
    assert first["time"] == "00:11:00"  # 10:30 rounded up once
    alloc = first["allocation_id"]
    assert first["sbatch_args"] == [
        "--nodes=1",
        "--ntasks=8",
        "--cpus-per-task=1",
        "--mem=4096M",
        "--time=00:11:00",
        "--partition=normal",
        f"--job-name=vqp-{alloc}",
        f"--comment=vq-pack:{alloc}",
        f"--output=/cluster/logs/sweep/{alloc}-%j.out",
    ]
    assert document["totals"] == {
        "allocations": 2,
        "tasks": 16,
        "cpus": 16,
        "memory_mib": 8192,
        "gpus": 0,
    }
    assert allocations[0]["shape_sha256"] == allocations[1]["shape_sha256"]
    assert allocations[0]["script_sha256"] != allocations[1]["script_sha256"]
    assert set(scripts) == {a["allocation_id"] for a in allocations}
    data = plan_bytes(document)
    assert b"--case" not in data and b"in 3" not in data  # no args, no stdin


def test_gpu_totals_and_gres() -> None:
    document, _ = plan_document(inputs(tasks(6), gpu_profile()))
    assert [a["tasks"] for a in document["allocations"]] == [3, 3]
    first = document["allocations"][0]
    assert (first["cpus"], first["memory_mib"], first["gpus"]) == (24, 98304, 3)
    assert "--gres=gpu:3" in first["sbatch_args"]
    assert "--partition=gpu,gpu-long" in first["sbatch_args"]
    assert "--account=chem" in first["sbatch_args"]
    assert "--constraint=a100&ib" in first["sbatch_args"]


def test_tasks_per_allocation_lowers_packing_and_is_never_clamped() -> None:
    document, _ = plan_document(inputs(tasks(16), profile(), tasks_per_allocation=3))
    assert [a["tasks"] for a in document["allocations"]] == [3, 3, 3, 3, 2, 2]
    with pytest.raises(PlanRefused, match="above what one allocation"):
        plan_document(inputs(tasks(16), profile(), tasks_per_allocation=9))


def test_ceilings_on_allocations_and_script_size_refuse() -> None:
    with pytest.raises(PlanRefused, match="allows 1 per submit"):
        plan_document(inputs(tasks(9), profile(target={"max_allocations_per_submit": 1})))
    with pytest.raises(PlanRefused, match="max_script_bytes"):
        plan_document(inputs(tasks(8), profile(target={"max_script_bytes": 1024})))


def _attempt(alloc: str, keys: list[str], outcome: str, job_id: str | None = None) -> Attempt:
    return Attempt(
        allocation_id=alloc,
        task_keys=keys,
        outcome=outcome,
        revision=1,
        job_id=job_id,  # type: ignore[arg-type]
    )


def test_selection_rules() -> None:
    roster = tasks(9)
    keys = [task.key for task in roster]
    a = [f"{n:016x}" for n in range(1, 9)]
    attempts = [
        _attempt(a[0], [keys[1]], "intent"),
        _attempt(a[1], [keys[2]], "accepted", "101"),
        _attempt(a[2], [keys[3]], "accepted", "102"),
        _attempt(a[3], [keys[4]], "accepted", "103"),
        _attempt(a[4], [keys[5]], "not_submitted"),
        _attempt(a[5], [keys[6]], "accepted", "105"),
        _attempt(a[6], [keys[6]], "accepted", "106"),
        _attempt(a[7], [keys[7]], "accepted", "107"),
    ]
    views = {
        keys[0]: TaskView(keys[0], "valid"),
        keys[2]: TaskView(keys[2], scheduler={a[1]: "RUNNING"}),
        keys[3]: TaskView(keys[3], scheduler={a[2]: "FAILED"}),
        keys[4]: TaskView(keys[4], scheduler={a[3]: None}),
        keys[6]: TaskView(keys[6], scheduler={a[5]: "QUEUED", a[6]: "FAILED"}),
        keys[7]: TaskView(keys[7], scheduler={a[7]: "SUCCEEDED"}),
    }
    plain = plan_document(inputs(roster, profile(), attempts=attempts, views=views))[0]
    selection = plain["selection"]
    assert selection["skipped"] == [keys[0]]
    assert selection["selected"] == [keys[5], keys[8]]  # not submitted, never tried
    reasons = {item["key"]: item["reason"] for item in selection["withheld"]}
    assert reasons[keys[1]].startswith("ambiguous")
    assert reasons[keys[2]].startswith("active")
    assert reasons[keys[3]].endswith("needs --retry")
    assert reasons[keys[4]].endswith("needs --retry")
    assert reasons[keys[6]].startswith("active")  # an older active attempt still governs
    assert reasons[keys[7]].endswith("needs --retry")

    retried = plan_document(
        inputs(
            roster,
            profile(),
            attempts=attempts,
            views=views,
            retry=frozenset({keys[3], keys[4], keys[6], keys[7]}),
        )
    )[0]["selection"]
    assert retried["selected"] == [keys[3], keys[5], keys[7], keys[8]]
    reasons = {item["key"]: item["reason"] for item in retried["withheld"]}
    assert "allow-duplicate-risk" in reasons[keys[4]]
    risky = plan_document(
        inputs(
            roster,
            profile(),
            attempts=attempts,
            views=views,
            retry=frozenset({keys[4]}),
            allow_duplicate_risk=frozenset({keys[4]}),
        )
    )[0]["selection"]
    assert keys[4] in risky["selected"]


def test_choice_refusals() -> None:
    with pytest.raises(PlanRefused, match="does not have"):
        plan_document(inputs(tasks(2), profile(), retry=frozenset({"nope"})))
    with pytest.raises(PlanRefused, match="needs --retry"):
        plan_document(inputs(tasks(2), profile(), allow_duplicate_risk=frozenset({"t000"})))


def test_plans_are_deterministic_and_bound_to_their_inputs() -> None:
    first = plan_bytes(plan_document(inputs(tasks(20), profile()))[0])
    assert first == plan_bytes(plan_document(inputs(tasks(20), profile()))[0])
    document = json.loads(first)
    body = {k: v for k, v in document.items() if k != "plan_sha256"}
    import hashlib

    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert document["plan_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    later = plan_document(inputs(tasks(20), profile(), revision=2))[0]
    assert {a["allocation_id"] for a in later["allocations"]}.isdisjoint(
        {a["allocation_id"] for a in document["allocations"]}
    )


def test_planning_ten_thousand_tasks_is_fast_enough_to_be_interactive() -> None:
    # correctness at scale (the timing itself is a benchmark, not asserted here)
    document, scripts = plan_document(
        inputs(tasks(10_000), profile(target={"max_allocations_per_submit": 2000}))
    )
    assert document["totals"]["tasks"] == 10_000
    assert document["totals"]["allocations"] == 1250
    assert len(scripts) == 1250
