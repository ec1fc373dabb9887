"""A packed lane allocation's kill and restart decisions (pure)."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from vq.packing.lane_batch import Element, next_batch
from vq.packing.lane_control import Member, kill_action, recovery_step
from vq.packing.lane_intent import PackIntent, intent_of

from .packing_support import profile

GROUP = "00000000abcd"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def the_intent(count: int = 3) -> PackIntent:
    pending = [Element(f"{i:012x}", i, 0, ("true",)) for i in range(count)]
    batch = next_batch("slurm", GROUP, pending, profile(), free=8)
    assert batch is not None
    return intent_of(
        batch, lane="slurm", group=GROUP, profile="cpu", script_sha256="0" * 64, now=T0
    )


def members(intent: PackIntent, **fields: Any) -> list[Member]:
    base = [
        Member(job, retry, slot, "submitting", None)
        for slot, (job, retry) in enumerate(intent.members)
    ]
    return [replace(m, **fields) for m in base]


# --- kill -----------------------------------------------------------------------------
KILL = {
    "receipt": True,
    "allocation": "RUNNING",
    "others_settled": False,
    "step_running": True,
    "marker_written": False,
}


@pytest.mark.parametrize(
    ("changes", "action"),
    [
        ({}, "cancel_step"),
        ({"receipt": False}, "wait_for_receipt"),
        ({"receipt": False, "others_settled": True}, "wait_for_receipt"),
        ({"others_settled": True}, "cancel_allocation"),
        (
            {"allocation": "QUEUED", "step_running": False, "others_settled": True},
            "cancel_allocation",
        ),
        ({"allocation": None, "step_running": False}, "retry_step"),
        ({"allocation": "QUEUED", "step_running": False}, "retry_step"),
        ({"step_running": False}, "retry_step"),
        ({"step_running": False, "marker_written": True}, "nothing"),
        ({"allocation": "SUCCEEDED", "others_settled": True}, "nothing"),
        ({"allocation": "CANCELLED"}, "nothing"),
    ],
)
def test_kill_of_a_packed_element(changes: dict[str, Any], action: str) -> None:
    assert kill_action(**{**KILL, **changes}) == action


# --- restart --------------------------------------------------------------------------
def test_one_receipt_on_every_element_is_observed() -> None:
    intent = the_intent()
    step = recovery_step(
        intent.allocation_id, members(intent, scheduler_job_id="77"), intent, intent_exists=True
    )
    assert (step.action, step.job_id) == ("observe", "77")


def test_no_receipt_with_a_matching_intent_is_looked_up_by_identity() -> None:
    intent = the_intent()
    step = recovery_step(intent.allocation_id, members(intent), intent, intent_exists=True)
    assert step.action == "look_up"
    # a killed element drops out of the members: the rest are still looked up
    step = recovery_step(intent.allocation_id, members(intent)[1:], intent, intent_exists=True)
    assert step.action == "look_up"


def test_claimed_elements_without_an_intent_were_never_submitted() -> None:
    intent = the_intent()
    claimed = members(intent, scheduler_state="claimed")
    step = recovery_step(intent.allocation_id, claimed[:2], None, intent_exists=False)
    assert step.action == "redispatch"


def test_a_receipt_on_some_elements_is_completed_when_the_intent_vouches_for_all() -> None:
    """A stop while the receipt was being written element by element."""
    intent = the_intent()
    group = members(intent)
    group[0] = replace(group[0], scheduler_job_id="77", scheduler_state="queued")
    step = recovery_step(intent.allocation_id, group, intent, intent_exists=True)
    assert (step.action, step.job_id) == ("complete_receipt", "77")
    # not when an element without it is on another attempt than the intent's
    group[2] = replace(group[2], retry_count=1)
    step = recovery_step(intent.allocation_id, group, intent, intent_exists=True)
    assert (step.action, step.job_id) == ("reattach_failed", None)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("two receipts", "different jobs \\(77, 78\\)"),
        ("some receipts without intent", "only some of its elements carry the receipt"),
        ("unreadable intent", "cannot be read"),
        ("submitting without intent", "past the claim"),
        ("other allocation", "names allocation"),
        ("moved slot", "000000000000 is not in slot 1"),
        ("stranger", "not in slot"),
        ("other attempt", "another attempt"),
    ],
)
def test_anything_inconsistent_is_reattach_failed(case: str, reason: str) -> None:
    intent = the_intent()
    group = members(intent)
    found: PackIntent | None = intent
    exists = True
    alloc = intent.allocation_id
    if case == "two receipts":
        group = [replace(group[0], scheduler_job_id="77"), replace(group[1], scheduler_job_id="78")]
    elif case == "some receipts without intent":
        group[0] = replace(group[0], scheduler_job_id="77")
        found, exists = None, False
    elif case == "unreadable intent":
        found = None
    elif case == "submitting without intent":
        found, exists = None, False
    elif case == "other allocation":
        alloc = "f" * 16
    elif case == "moved slot":
        group[0] = replace(group[0], slot=1)
    elif case == "stranger":
        group.append(Member("ffffffffffff", 0, 3, "submitting", None))
    elif case == "other attempt":
        group[0] = replace(group[0], retry_count=1)
    step = recovery_step(alloc, group, found, intent_exists=exists)
    assert step.action == "reattach_failed"
    assert step.job_id is None
    assert re.search(reason, step.reason), step.reason
