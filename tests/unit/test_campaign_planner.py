"""The planner on fixture journals: statuses, reasons, next actions, retention."""

from __future__ import annotations

from typing import Any

from tests.campaign_support import (
    MANIFEST_A,
    MANIFEST_B,
    calculate_succeeded,
    campaign,
    journal,
    node,
    raw,
    record,
    validate_bound,
    verified,
)
from vq.campaign.journal import attempt_key, check_journal, parse_journal
from vq.campaign.model import campaign_sha256, parse_campaign
from vq.campaign.planner import CampaignPlan, attention, plan


def planned(*attempts: dict[str, Any]) -> CampaignPlan:
    parsed, digest = campaign()
    checked = parse_journal(journal(digest, *attempts))
    check_journal(parsed, digest, checked)  # every fixture is a valid journal
    return plan(parsed, digest, checked)


def states(result: CampaignPlan) -> dict[str, str]:
    return {node.node: node.status for node in result.nodes}


DIGEST = campaign()[1]


def test_a_fresh_campaign_has_one_ready_node() -> None:
    result = planned()
    assert states(result) == {
        "calculate": "ready",
        "validate": "waiting",
        "render": "waiting",
        "cleanup": "waiting",
    }
    action = result.node("calculate").action
    assert action == {
        "action": "submit",
        "attempt": 1,
        "key": attempt_key(DIGEST, "calculate", 1),
        "inputs": [],
    }
    assert result.status == "running"
    assert result.node("render").reasons == [
        "calculate has not succeeded yet",
        "validate has not succeeded yet",
    ]


def test_a_submitting_attempt_is_uncertain_and_reconciled_under_its_key() -> None:
    result = planned(record(DIGEST, "calculate", 1, "submitting"))
    node = result.node("calculate")
    assert node.status == "uncertain"
    assert node.action == {
        "action": "reconcile",
        "attempt": 1,
        "key": attempt_key(DIGEST, "calculate", 1),
    }


def test_accepted_and_running_attempts_wait() -> None:
    for state in ("accepted", "running"):
        result = planned(record(DIGEST, "calculate", 1, state))
        assert result.node("calculate").status == "running"
        assert result.node("calculate").action == {"action": "wait", "attempt": 1}
        assert result.node("cleanup").status == "waiting"


def test_an_unpublished_output_asks_for_publish_and_blocks_consumers() -> None:
    result = planned(record(DIGEST, "calculate", 1, "succeeded"))
    node = result.node("calculate")
    assert node.status == "succeeded"
    assert node.action == {"action": "publish", "attempt": 1, "outputs": ["result"]}
    assert result.node("validate").status == "blocked"
    assert "not published" in result.node("validate").reasons[0]
    assert result.node("cleanup").status == "ready"  # completion: whatever the outcome
    assert result.status == "running"


def test_an_unverified_output_blocks_consumers() -> None:
    bad = {"name": "result", "status": "partial", "message": "out/x has 3 of 9 bytes"}
    result = planned(record(DIGEST, "calculate", 1, "succeeded", outputs=[bad]))
    assert result.node("validate").status == "blocked"
    assert "not verified (partial)" in result.node("validate").reasons[0]
    assert "partial: out/x has 3 of 9 bytes" in result.node("calculate").reasons[0]


def test_a_verified_output_makes_consumers_ready_with_exact_manifests() -> None:
    result = planned(calculate_succeeded(DIGEST))
    node = result.node("validate")
    assert node.status == "ready"
    assert node.action is not None
    assert node.action["inputs"] == [
        {
            "name": "result",
            "producer": "calculate",
            "attempt": 1,
            "output": "result",
            "manifest_sha256": MANIFEST_A,
        }
    ]
    assert result.node("render").status == "waiting"  # validate has not succeeded
    assert [(r.node, r.attempt, r.consumers) for r in result.retention] == [
        ("calculate", 1, ("validate", "render"))
    ]


def test_a_failed_producer_blocks_success_edges_and_fails_the_campaign() -> None:
    result = planned(record(DIGEST, "calculate", 1, "failed"))
    assert states(result) == {
        "calculate": "failed",
        "validate": "blocked",
        "render": "blocked",
        "cleanup": "ready",
    }
    assert result.node("calculate").action is None
    assert result.status == "failed"


def test_a_cancelled_attempt_is_failed() -> None:
    result = planned(record(DIGEST, "calculate", 1, "cancelled"))
    assert result.node("calculate").status == "failed"
    assert "cancelled" in result.node("calculate").reasons[0]


def test_a_failed_validation_blocks_rendering_and_never_succeeds() -> None:
    result = planned(
        calculate_succeeded(DIGEST),
        validate_bound(DIGEST, "failed"),
        record(DIGEST, "cleanup", 1, "succeeded"),
    )
    assert result.node("render").status == "blocked"
    assert result.node("render").reasons == ["validate failed"]
    assert result.status == "failed"


def test_blocked_propagates_along_success_edges() -> None:
    result = planned(record(DIGEST, "calculate", 1, "failed"))
    assert result.node("render").status == "blocked"
    assert result.node("render").reasons == ["calculate failed", "validate is blocked"]


def test_a_blocked_completion_predecessor_will_never_run() -> None:
    data = raw()
    node(data, "cleanup")["after"] = [{"node": "validate", "on": "completion"}]
    parsed = parse_campaign(data)
    digest = campaign_sha256(parsed)
    checked = parse_journal(journal(digest, record(digest, "calculate", 1, "failed")))
    check_journal(parsed, digest, checked)
    result = plan(parsed, digest, checked)
    assert result.node("cleanup").status == "blocked"
    assert result.node("cleanup").reasons == ["validate is blocked and will never run"]


def test_success_needs_every_node_succeeded_and_every_output_verified() -> None:
    render_done = record(
        DIGEST,
        "render",
        1,
        "succeeded",
        inputs=[
            {
                "name": "result",
                "producer": "calculate",
                "attempt": 1,
                "output": "result",
                "manifest_sha256": MANIFEST_A,
            }
        ],
    )
    base = [calculate_succeeded(DIGEST), validate_bound(DIGEST, "succeeded")]
    cleanup = record(DIGEST, "cleanup", 1, "succeeded")
    not_verified = planned(*base, render_done, cleanup)
    assert not_verified.status == "running"
    assert not_verified.node("render").action == {
        "action": "publish",
        "attempt": 1,
        "outputs": ["figure"],
    }
    render_done["outputs"] = [verified("figure", MANIFEST_B)]
    done = planned(*base, render_done, cleanup)
    assert done.status == "succeeded"
    assert done.retention == []
    assert all(node.action is None for node in done.nodes)


def test_retention_lists_producers_an_unfinished_consumer_needs() -> None:
    result = planned(calculate_succeeded(DIGEST), validate_bound(DIGEST, "succeeded"))
    assert [(r.node, r.attempt, r.consumers) for r in result.retention] == [
        ("calculate", 1, ("render",))
    ]
    assert result.node("render").status == "ready"


def test_planning_is_idempotent() -> None:
    attempts = (calculate_succeeded(DIGEST), validate_bound(DIGEST, "running"))
    assert planned(*attempts).as_dict() == planned(*attempts).as_dict()


def test_an_output_the_job_did_not_leave_needs_attention_not_a_republish() -> None:
    missing = {"name": "result", "status": "missing", "message": "the job did not leave it"}
    result = planned(
        record(DIGEST, "calculate", 1, "succeeded", outputs=[missing]),
        record(DIGEST, "cleanup", 1, "succeeded"),
    )
    calculate = result.node("calculate")
    assert calculate.status == "succeeded"
    assert calculate.action is None
    assert not calculate.verified
    assert result.status == "blocked"
    assert "calculate: output result missing: the job did not leave it" in attention(result)
    assert any(line.startswith("validate: ") for line in attention(result))
