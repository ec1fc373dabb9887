"""The journal is checked before anything is reported: one fixture per refusal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.campaign_support import (
    MANIFEST_A,
    bound,
    calculate_succeeded,
    campaign,
    journal,
    record,
    validate_bound,
)
from vq.campaign.journal import JournalRefused, attempt_key, check_journal, parse_journal


def check(data: dict[str, Any]) -> None:
    parsed, digest = campaign()
    check_journal(parsed, digest, parse_journal(data))


def _foreign(digest: str) -> dict[str, Any]:
    return journal("f" * 64)


def _bad_key(digest: str) -> dict[str, Any]:
    return journal(digest, record(digest, "calculate", 1, "running", key="my-own-key"))


def _key_of_other_node(digest: str) -> dict[str, Any]:
    return journal(
        digest, record(digest, "calculate", 1, "running", key=attempt_key(digest, "validate", 1))
    )


def _gap(digest: str) -> dict[str, Any]:
    return journal(
        digest,
        record(digest, "calculate", 1, "failed"),
        record(digest, "calculate", 3, "running", retry_of=2),
    )


def _retried_success(digest: str) -> dict[str, Any]:
    return journal(
        digest,
        calculate_succeeded(digest),
        record(digest, "calculate", 2, "submitting", retry_of=1),
    )


def _retry_without_retry_of(digest: str) -> dict[str, Any]:
    return journal(
        digest,
        record(digest, "calculate", 1, "failed"),
        record(digest, "calculate", 2, "submitting"),
    )


def _accepted_without_job(digest: str) -> dict[str, Any]:
    return journal(digest, record(digest, "calculate", 1, "accepted", job=False))


def _started_before_dependency(digest: str) -> dict[str, Any]:
    return journal(digest, validate_bound(digest, "running"), calculate_succeeded(digest))


def _after_before_completion(digest: str) -> dict[str, Any]:
    return journal(
        digest,
        record(digest, "calculate", 1, "running"),
        record(digest, "cleanup", 1, "submitting"),
    )


def _bound_to_failed(digest: str) -> dict[str, Any]:
    return journal(
        digest,
        record(digest, "calculate", 1, "failed"),
        record(
            digest,
            "validate",
            1,
            "submitting",
            inputs=[bound("result", "calculate", 1, "result", MANIFEST_A)],
        ),
    )


def _bound_to_other_manifest(digest: str) -> dict[str, Any]:
    return journal(
        digest,
        calculate_succeeded(digest),
        record(
            digest,
            "validate",
            1,
            "submitting",
            inputs=[bound("result", "calculate", 1, "result", "c" * 64)],
        ),
    )


def _unbound_input(digest: str) -> dict[str, Any]:
    return journal(digest, calculate_succeeded(digest), record(digest, "validate", 1, "submitting"))


def _unknown_node(digest: str) -> dict[str, Any]:
    return journal(digest, record(digest, "ghost", 1, "submitting"))


REFUSALS: list[tuple[str, Callable[[str], dict[str, Any]], str]] = [
    ("foreign digest", _foreign, "belongs to campaign digest ffffffffffff"),
    ("key that does not derive", _bad_key, "does not derive"),
    ("key of another node", _key_of_other_node, "does not derive"),
    ("attempt gap", _gap, "retries attempt 2, which is not recorded"),
    ("retried success", _retried_success, "which is succeeded; only a failed or cancelled"),
    ("retry without retry_of", _retry_without_retry_of, "must record retry_of: 1"),
    ("accepted without job", _accepted_without_job, "accepted without a job id"),
    ("started before its dependency", _started_before_dependency, "started before its dependency"),
    ("completion edge not met", _after_before_completion, "started before calculate had finished"),
    ("bound to a failed producer", _bound_to_failed, "which is failed"),
    ("bound to another manifest", _bound_to_other_manifest, "manifest other than"),
    ("input not bound", _unbound_input, "does not record where input 'result'"),
    ("unknown node", _unknown_node, "unknown node 'ghost'"),
]


@pytest.mark.parametrize(
    ("build", "text"), [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS]
)
def test_each_refusal(build: Callable[[str], dict[str, Any]], text: str) -> None:
    _parsed, digest = campaign()
    with pytest.raises(JournalRefused) as caught:
        check(build(digest))
    assert text in caught.value.message
    assert caught.value.exit_code == 4
    assert caught.value.hint


def test_attempt_numbers_must_start_at_one() -> None:
    _parsed, digest = campaign()
    data = journal(digest, record(digest, "calculate", 2, "running", retry_of=1))
    with pytest.raises(JournalRefused, match="not recorded before it"):
        check(data)


def test_a_sound_journal_passes() -> None:
    _parsed, digest = campaign()
    check(
        journal(
            digest,
            record(digest, "calculate", 1, "failed"),
            record(digest, "calculate", 2, "cancelled", retry_of=1),
            record(
                digest,
                "calculate",
                3,
                "succeeded",
                retry_of=2,
                outputs=[{"name": "result", "status": "verified", "manifest_sha256": MANIFEST_A}],
            ),
            record(digest, "cleanup", 1, "succeeded"),
            record(
                digest,
                "validate",
                1,
                "running",
                inputs=[bound("result", "calculate", 3, "result", MANIFEST_A)],
            ),
        )
    )


def test_unknown_fields_and_bad_states_are_refused() -> None:
    _parsed, digest = campaign()
    data = journal(digest, record(digest, "calculate", 1, "running"))
    data["attempts"][0]["password"] = "x"
    with pytest.raises(JournalRefused, match="password"):
        parse_journal(data)
    data = journal(digest, record(digest, "calculate", 1, "exploded"))
    with pytest.raises(JournalRefused, match="state"):
        parse_journal(data)
    with pytest.raises(JournalRefused, match=r"not a vq\.campaign-journal/1"):
        parse_journal({"schema_name": "something/else"})


def test_keys_derive_from_digest_node_and_attempt() -> None:
    key = attempt_key("d" * 64, "calculate", 1)
    assert key == attempt_key("d" * 64, "calculate", 1)
    assert (
        len(
            {
                key,
                attempt_key("e" * 64, "calculate", 1),
                attempt_key("d" * 64, "render", 1),
                attempt_key("d" * 64, "calculate", 2),
            }
        )
        == 4
    )
