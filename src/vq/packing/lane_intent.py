"""The durable intent of a packed lane allocation, and what a look-up by its identity
decides after a restart (pure: no I/O, no clock).

Contracts:

* **Intent** (:class:`PackIntent`): written and synced *before* ``sbatch``, one record per
  allocation naming the lane, the array group, the profile, the allocation identity, each
  slot's (job id, retry count) in slot order, the script's SHA-256 and the UTC second it
  was written. :func:`decode_intent` refuses anything malformed, and an identity that
  does not rederive from the lane, group and members
  (:func:`~vq.packing.lane_batch.members_allocation_id`): a record that does not name
  exactly the allocation it claims is never used to adopt or resubmit.
* **Window** (:meth:`PackIntent.window_start`): accounting is searched from ten minutes
  before the intent (clock skew between this machine and the cluster), the window
  ``vq pack reconcile`` uses.
* **Decision** (:func:`decide`): for an element whose receipt was lost, the jobs
  :meth:`~vq.packing.cases.remote.PackRemote.allocation_jobs` finds by the identity. One
  job is adopted; several are ``reattach_failed`` (an operator decides); none is looked
  up again, and only a second empty look with accounting enabled proves it was never
  submitted, so it is submitted under the same identity. Without accounting nothing can
  prove absence: ``reattach_failed``. Never the single-job tag look-up, which would not
  see the ``vqp-<alloc>`` job and would resubmit blindly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypedDict

from vq.packing.lane_batch import Batch, members_allocation_id

__all__ = [
    "INTENT_VERSION",
    "WINDOW_SLACK",
    "Decision",
    "IntentUnreadable",
    "PackIntent",
    "decide",
    "decode_intent",
    "encode_intent",
    "intent_of",
]

INTENT_VERSION = 1
#: How far before the intent accounting is searched (clock skew).
WINDOW_SLACK = timedelta(minutes=10)
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
_ALLOC = re.compile(r"[0-9a-f]{16}")
_JOB = re.compile(r"[0-9a-f]{12}")
_SHA = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_FIELDS = {
    "version",
    "lane",
    "group",
    "profile",
    "allocation_id",
    "members",
    "script_sha256",
    "written_at",
}
#: The most slots an intent may name (far above any profile's ceiling).
_MAX_MEMBERS = 4096


class IntentUnreadable(ValueError):
    """A stored intent that cannot be trusted (the message says which part)."""


@dataclass(frozen=True)
class PackIntent:
    """One packed allocation about to be (or maybe) submitted."""

    lane: str
    group: str
    profile: str
    allocation_id: str
    members: tuple[tuple[str, int], ...]
    script_sha256: str
    written_at: str

    def slot_of(self, job_id: str) -> int | None:
        """The slot of ``job_id`` (None: not in this allocation)."""
        for slot, (member, _) in enumerate(self.members):
            if member == job_id:
                return slot
        return None

    def window_start(self) -> str:
        """The earliest submit time accounting may show for this allocation."""
        written = datetime.strptime(self.written_at, _TIME_FORMAT)
        return (written - WINDOW_SLACK).strftime(_TIME_FORMAT)


def intent_of(
    batch: Batch, *, lane: str, group: str, profile: str, script_sha256: str, now: datetime
) -> PackIntent:
    """The intent of ``batch`` written at ``now`` (an aware time, stored as UTC seconds)."""
    written_at = now.astimezone(UTC).strftime(_TIME_FORMAT)
    members = tuple((e.job_id, e.retry_count) for e in batch.elements)
    return PackIntent(lane, group, profile, batch.allocation_id, members, script_sha256, written_at)


class IntentRecord(TypedDict):
    """A stored intent: the fields :func:`decode_intent` requires, exactly."""

    version: int
    lane: str
    group: str
    profile: str
    allocation_id: str
    members: list[tuple[str, int]]
    script_sha256: str
    written_at: str


def encode_intent(intent: PackIntent) -> bytes:
    """Canonical JSON bytes of ``intent`` (what is written and synced)."""
    record: IntentRecord = {
        "version": INTENT_VERSION,
        "lane": intent.lane,
        "group": intent.group,
        "profile": intent.profile,
        "allocation_id": intent.allocation_id,
        "members": [(job, retry) for job, retry in intent.members],
        "script_sha256": intent.script_sha256,
        "written_at": intent.written_at,
    }
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def decode_intent(data: bytes) -> PackIntent:
    """The intent stored as ``data``; :class:`IntentUnreadable` for anything else."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise IntentUnreadable(f"not JSON ({exc})") from exc
    if not isinstance(raw, dict) or set(raw) != _FIELDS:
        raise IntentUnreadable(f"expected exactly the fields {', '.join(sorted(_FIELDS))}")
    if raw["version"] != INTENT_VERSION or isinstance(raw["version"], bool):
        raise IntentUnreadable(f"unsupported version {raw['version']!r}")
    lane = _text(raw, "lane", _NAME)
    group = _text(raw, "group", _JOB)
    profile = _text(raw, "profile", _NAME)
    alloc = _text(raw, "allocation_id", _ALLOC)
    sha = _text(raw, "script_sha256", _SHA)
    written_at = _text(raw, "written_at", None)
    try:
        datetime.strptime(written_at, _TIME_FORMAT)
    except ValueError as exc:
        raise IntentUnreadable(f"written_at {written_at!r} is not {_TIME_FORMAT}") from exc
    members = _members(raw["members"])
    if members_allocation_id(lane, group, members) != alloc:
        raise IntentUnreadable(
            f"allocation {alloc} does not rederive from its lane, group and members"
        )
    return PackIntent(lane, group, profile, alloc, members, sha, written_at)


def _text(raw: dict[str, Any], key: str, pattern: re.Pattern[str] | None) -> str:
    value = raw[key]
    if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
        raise IntentUnreadable(f"{key} {value!r} is malformed")
    return value


def _members(value: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= _MAX_MEMBERS:
        raise IntentUnreadable("members must be a list of 1 to 4096 [job id, retry count]")
    members: list[tuple[str, int]] = []
    for item in value:
        ok = (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and _JOB.fullmatch(item[0]) is not None
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
            and item[1] >= 0
        )
        if not ok:
            raise IntentUnreadable(f"member {item!r} is not [job id, retry count]")
        members.append((item[0], item[1]))
    if len({job for job, _ in members}) != len(members):
        raise IntentUnreadable("a job appears in two slots")
    return tuple(members)


@dataclass(frozen=True)
class Decision:
    """What to do with an allocation whose receipt was lost.

    ``adopt``: ``job_id`` is the allocation; ``look_again``: after the recheck delay;
    ``not_submitted``: submit it now under the same identity; ``reattach_failed``: keep
    its capacity and wait for an operator."""

    action: Literal["adopt", "look_again", "not_submitted", "reattach_failed"]
    job_id: str | None = None
    absent_looks: int = 0
    reason: str = ""


def decide(found: Sequence[str], *, absent_looks: int, accounting: bool) -> Decision:
    """The decision for the jobs ``found`` by the allocation's identity, after
    ``absent_looks`` earlier empty look-ups (see module doc)."""
    jobs = sorted(set(found))
    if not accounting:
        return Decision(
            "reattach_failed", reason="the lane has no accounting to find the allocation by"
        )
    if len(jobs) == 1:
        return Decision("adopt", jobs[0])
    if jobs:
        return Decision(
            "reattach_failed", reason=f"several jobs carry the identity: {', '.join(jobs)}"
        )
    if absent_looks + 1 < 2:
        return Decision("look_again", absent_looks=absent_looks + 1)
    return Decision(
        "not_submitted", absent_looks=absent_looks + 1, reason="absent from accounting twice"
    )
