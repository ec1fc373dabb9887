"""``vq.campaign-journal/1``: every attempt of every node, and the checks run before use.

Each attempt records its node, number, state, host, job id once accepted, idempotency key,
``retry_of``, the producer attempt and manifest each input was staged from, each output's
verification, and the runtime the queue says it ran with.

:func:`check_journal` refuses (:class:`JournalRefused`, exit 4) a journal for another
campaign digest, a key that does not derive from (digest, node, attempt), gaps in attempt
numbers, a retry of anything but a failed or cancelled attempt, an accepted attempt
without its job, an attempt recorded before its dependencies were met (earlier in the
journal), and a consumer bound to anything but its producer's succeeded attempt and that
attempt's verified manifest. Nothing is reported from a journal that fails a check.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vq.campaign.checks import split_source
from vq.campaign.model import Campaign
from vq.domain.validation_words import JSON_WORDS, describe
from vq.errors import InvalidInput

__all__ = [
    "ATTEMPT_STATES",
    "JOURNAL_SCHEMA",
    "OUTPUT_STATUSES",
    "TERMINAL",
    "Attempt",
    "AttemptState",
    "InputBinding",
    "Journal",
    "JournalRefused",
    "OutputRecord",
    "attempt_key",
    "check_journal",
    "empty_journal",
    "parse_journal",
]

JOURNAL_SCHEMA = "vq.campaign-journal/1"
AttemptState = Literal["submitting", "accepted", "running", "succeeded", "failed", "cancelled"]
ATTEMPT_STATES = ("submitting", "accepted", "running", "succeeded", "failed", "cancelled")
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
#: An output's verification: ``verified``, or the worst problem of its last publish.
OUTPUT_STATUSES = ("verified", "unsafe", "missing", "partial", "digest_mismatch", "unexpected")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class InputBinding(_Record):
    """Input ``name`` was staged from ``producer`` attempt ``attempt``'s ``output``."""

    name: str
    producer: str
    attempt: int = Field(ge=1)
    output: str
    manifest_sha256: str


class OutputRecord(_Record):
    """The last publication of one output: its status and, once verified, its manifest."""

    name: str
    status: Literal["verified", "unsafe", "missing", "partial", "digest_mismatch", "unexpected"]
    manifest_sha256: str | None = None
    message: str | None = None


class Attempt(_Record):
    node: str
    attempt: int = Field(ge=1)
    state: AttemptState
    key: str
    host: str | None = None
    job_id: str | None = None
    retry_of: int | None = None
    inputs: list[InputBinding] = Field(default_factory=list)
    outputs: list[OutputRecord] = Field(default_factory=list)
    runtime: dict[str, Any] | None = None
    recorded_at: str | None = None

    def output(self, name: str) -> OutputRecord | None:
        return next((out for out in self.outputs if out.name == name), None)


class Journal(_Record):
    schema_name: Literal["vq.campaign-journal/1"]
    campaign_sha256: str
    campaign_id: str
    attempts: list[Attempt] = Field(default_factory=list)

    def of(self, node: str) -> list[Attempt]:
        """The attempts of ``node``, in attempt order."""
        return sorted((a for a in self.attempts if a.node == node), key=lambda a: a.attempt)

    def latest(self, node: str) -> Attempt | None:
        attempts = self.of(node)
        return attempts[-1] if attempts else None

    def find(self, node: str, attempt: int) -> Attempt | None:
        return next((a for a in self.attempts if a.node == node and a.attempt == attempt), None)


class JournalRefused(InvalidInput):
    default_reference = "campaign-journal-invalid"

    def __init__(self, source: str, message: str):
        super().__init__(
            f"{source} is refused: {message}",
            hint="a journal belongs to one campaign digest and is written only by vq campaign; "
            "restore it, or start a new run directory",
        )


def attempt_key(campaign_sha256: str, node: str, attempt: int) -> str:
    """The idempotency key of ``node``'s attempt ``attempt``: the same on every restart."""
    seed = f"vq.campaign/1\0{campaign_sha256}\0{node}\0{attempt}".encode()
    return "campaign-" + hashlib.sha256(seed).hexdigest()[:40]


def empty_journal(campaign: Campaign, digest: str) -> Journal:
    return Journal(
        schema_name="vq.campaign-journal/1",
        campaign_sha256=digest,
        campaign_id=campaign.campaign_id,
    )


def parse_journal(raw: Any, *, source: str = "journal") -> Journal:
    """The journal in ``raw``; JournalRefused naming the first bad field."""
    if not isinstance(raw, dict) or raw.get("schema_name") != JOURNAL_SCHEMA:
        raise JournalRefused(source, f"it is not a {JOURNAL_SCHEMA} journal")
    try:
        return Journal.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "journal"
        reason = (
            "is not a journal field"
            if first["type"] == "extra_forbidden"
            else describe(first, JSON_WORDS)
        )
        raise JournalRefused(source, f"{where} {reason}") from None


def check_journal(
    campaign: Campaign, digest: str, journal: Journal, *, source: str = "journal"
) -> None:
    """Raise JournalRefused for the first rule ``journal`` breaks (module contract)."""

    def refuse(message: str) -> JournalRefused:
        return JournalRefused(source, message)

    if journal.campaign_sha256 != digest:
        raise refuse(
            f"it belongs to campaign digest {journal.campaign_sha256[:12]}…, not to this "
            f"campaign ({digest[:12]}…); an edited campaign is a new campaign"
        )
    for index, record in enumerate(journal.attempts):
        label = f"{record.node} attempt {record.attempt}"
        node = campaign.node(record.node)
        if node is None:
            raise refuse(f"attempts[{index}] names unknown node {record.node!r}")
        if any(
            other.node == record.node and other.attempt == record.attempt
            for other in journal.attempts[:index]
        ):
            raise refuse(f"{label} is recorded twice")
        if record.key != attempt_key(digest, record.node, record.attempt):
            raise refuse(f"{label} has key {record.key!r}, which does not derive from the campaign")
        if record.state != "submitting" and not record.job_id:
            raise refuse(f"{label} is {record.state} without a job id")
        _check_retry(journal, record, index, refuse)
        _check_dependencies(campaign, journal, record, index, refuse)
    for node_id in campaign.node_ids():
        numbers = [a.attempt for a in journal.of(node_id)]
        if numbers != list(range(1, len(numbers) + 1)):
            raise refuse(f"{node_id} has attempts {numbers}; attempt numbers must run 1, 2, 3 …")


def _check_retry(journal: Journal, record: Attempt, index: int, refuse: Any) -> None:
    label = f"{record.node} attempt {record.attempt}"
    if record.attempt == 1:
        if record.retry_of is not None:
            raise refuse(f"{label} has retry_of {record.retry_of}; a first attempt retries nothing")
        return
    if record.retry_of != record.attempt - 1:
        raise refuse(f"{label} must record retry_of: {record.attempt - 1}")
    previous = next(
        (
            a
            for a in journal.attempts[:index]
            if a.node == record.node and a.attempt == record.retry_of
        ),
        None,
    )
    if previous is None:
        raise refuse(f"{label} retries attempt {record.retry_of}, which is not recorded before it")
    if previous.state not in ("failed", "cancelled"):
        raise refuse(
            f"{label} retries attempt {record.retry_of}, which is {previous.state}; only a "
            "failed or cancelled attempt is retried"
        )


def _check_dependencies(
    campaign: Campaign, journal: Journal, record: Attempt, index: int, refuse: Any
) -> None:
    """Every predecessor was satisfied by an attempt recorded earlier in the journal."""
    node = campaign.node(record.node)
    assert node is not None
    label = f"{record.node} attempt {record.attempt}"
    earlier = journal.attempts[:index]
    bound = {binding.name: binding for binding in record.inputs}
    for extra in record.inputs:
        if extra.name not in {item.name for item in node.inputs}:
            raise refuse(f"{label} binds unknown input {extra.name!r}")
    for item in node.inputs:
        parsed = split_source(item.source)
        assert parsed is not None
        producer, output = parsed
        found = bound.get(item.name)
        if found is None:
            raise refuse(f"{label} does not record where input {item.name!r} was staged from")
        binding = found
        if (binding.producer, binding.output) != (producer, output):
            raise refuse(
                f"{label} input {item.name!r} is bound to {binding.producer}.{binding.output}, "
                f"not to its source {item.source}"
            )
        source = next(
            (a for a in earlier if a.node == producer and a.attempt == binding.attempt), None
        )
        if source is None:
            raise refuse(
                f"{label} was started before its dependency {producer} attempt "
                f"{binding.attempt} was recorded"
            )
        if source.state != "succeeded":
            raise refuse(
                f"{label} input {item.name!r} is bound to {producer} attempt {binding.attempt}, "
                f"which is {source.state}; a consumer stages only a succeeded attempt"
            )
        published = source.output(output)
        if published is None or published.status != "verified":
            raise refuse(
                f"{label} input {item.name!r} is bound to an unverified output of "
                f"{producer} attempt {binding.attempt}"
            )
        if published.manifest_sha256 != binding.manifest_sha256:
            raise refuse(
                f"{label} input {item.name!r} was staged from a manifest other than the one "
                f"{producer} attempt {binding.attempt} verified"
            )
    for dep in node.after:
        done = [a for a in earlier if a.node == dep.node]
        met = (
            any(a.state == "succeeded" for a in done)
            if dep.on == "success"
            else any(a.state in TERMINAL for a in done)
        )
        if not met:
            need = "succeeded" if dep.on == "success" else "finished"
            raise refuse(f"{label} was started before {dep.node} had {need}")
