"""The intent of a packed lane allocation and the recovery decision (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from vq.packing.lane_batch import Element, next_batch
from vq.packing.lane_intent import (
    Decision,
    IntentUnreadable,
    decide,
    decode_intent,
    encode_intent,
    intent_of,
)

from .packing_support import profile

GROUP = "00000000abcd"
SHA = "ab" * 32
T0 = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)


def pending(count: int, *, retry: int = 0) -> list[Element]:
    return [Element(f"{i:012x}", i, retry, ("echo", str(i))) for i in range(count)]


def intent_record(**changes: Any) -> bytes:
    batch = next_batch("slurm", GROUP, pending(4), profile(), free=8)
    assert batch is not None
    intent = intent_of(batch, lane="slurm", group=GROUP, profile="cpu", script_sha256=SHA, now=T0)
    record = json.loads(encode_intent(intent))
    record.update(changes)
    return json.dumps(record).encode()


def test_intent_round_trips_and_names_each_slot() -> None:
    batch = next_batch("slurm", GROUP, pending(4), profile(), free=8)
    assert batch is not None
    east = timezone(timedelta(hours=2))
    intent = intent_of(
        batch, lane="slurm", group=GROUP, profile="cpu", script_sha256=SHA, now=T0.astimezone(east)
    )
    assert intent.written_at == "2026-01-02T03:04:05"  # UTC seconds, whatever the zone
    assert intent.allocation_id == batch.allocation_id
    assert decode_intent(encode_intent(intent)) == intent
    assert [intent.slot_of(e.job_id) for e in batch.elements] == [0, 1, 2, 3]
    assert intent.slot_of("ffffffffffff") is None
    assert intent.window_start() == "2026-01-02T02:54:05"


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"allocation_id": "0" * 16}, "does not rederive"),
        ({"members": [["000000000000", 0], ["000000000001", 1]]}, "does not rederive"),
        ({"lane": "other"}, "does not rederive"),
        ({"group": "00000000abce"}, "does not rederive"),
        ({"members": []}, "members must be"),
        ({"members": [["000000000000", True]]}, "not \\[job id, retry count\\]"),
        ({"members": [["000000000000", -1]]}, "not \\[job id, retry count\\]"),
        ({"members": [["000000000000", 0], ["000000000000", 0]]}, "two slots"),
        ({"version": 2}, "unsupported version"),
        ({"version": True}, "unsupported version"),
        ({"script_sha256": "zz"}, "script_sha256"),
        ({"written_at": "yesterday"}, "written_at"),
        ({"extra": 1}, "exactly the fields"),
    ],
)
def test_a_malformed_or_inconsistent_intent_is_refused(
    changes: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(IntentUnreadable, match=complaint):
        decode_intent(intent_record(**changes))


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b"\xff", b"[" * 100000])
def test_garbage_is_an_unreadable_intent(data: bytes) -> None:
    with pytest.raises(IntentUnreadable):
        decode_intent(data)


def test_one_job_found_is_adopted() -> None:
    assert decide(["41"], absent_looks=0, accounting=True) == Decision("adopt", "41")
    assert decide(["41", "41"], absent_looks=1, accounting=True).job_id == "41"


def test_several_jobs_found_is_reattach_failed_never_a_pick() -> None:
    decision = decide(["43", "41"], absent_looks=0, accounting=True)
    assert decision.action == "reattach_failed"
    assert decision.job_id is None
    assert "41, 43" in decision.reason


def test_absence_proves_nothing_until_seen_twice() -> None:
    first = decide([], absent_looks=0, accounting=True)
    assert (first.action, first.absent_looks) == ("look_again", 1)
    second = decide([], absent_looks=first.absent_looks, accounting=True)
    assert second.action == "not_submitted"


def test_without_accounting_nothing_is_adopted_or_resubmitted() -> None:
    for found in ([], ["41"], ["41", "43"]):
        assert decide(found, absent_looks=5, accounting=False).action == "reattach_failed"
