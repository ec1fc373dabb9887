"""The level-triggered planner: from (campaign, journal) to each node's status and next step.

Pure and idempotent: the same inputs always give the same plan, so a restarted controller
recomputes exactly what it would have done. Statuses and actions:

==========  =========================================================================
ready       ``submit`` attempt 1 with its key and the exact producer attempts and
            manifests to stage
waiting     none: a predecessor has not finished yet
blocked     none: a success predecessor failed or is blocked, a completion predecessor
            will never run, or an input artifact is unpublished or not verified
uncertain   ``reconcile``: resend the submitting attempt's payload under its own key
running     ``wait``
succeeded   none, or ``publish`` while an output is not yet verified
failed      none: a retry is an explicit new attempt
==========  =========================================================================

The campaign is ``succeeded`` only when every node succeeded with every output verified;
``failed`` when a node failed; ``running`` while something can still move without anyone
acting; otherwise ``blocked``. The retention list names each succeeded producer attempt
whose artifacts a consumer that has not succeeded still needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from vq.campaign.checks import campaign_order, consumers_of, split_source
from vq.campaign.journal import Attempt, InputBinding, Journal, attempt_key
from vq.campaign.model import Campaign, Node

__all__ = [
    "REPUBLISH_STATUSES",
    "CampaignPlan",
    "NodePlan",
    "Retained",
    "attention",
    "plan",
    "stage_bindings",
]

#: Output statuses that come from a copy gone wrong: publishing again may fix them.
#: ``missing`` and ``unsafe`` describe what the job left, so they wait for someone to act.
REPUBLISH_STATUSES = frozenset({"partial", "digest_mismatch", "unexpected"})

NODE_STATUSES = ("ready", "waiting", "blocked", "uncertain", "running", "succeeded", "failed")


class NextAction(TypedDict):
    """What a node needs next: ``submit`` (attempt 1, its key and the input bindings to
    stage, each a dumped :class:`InputBinding`), ``reconcile`` (the attempt and its key),
    ``wait`` (the attempt) or ``publish`` (the attempt and the outputs to publish again)."""

    action: str
    attempt: int
    key: NotRequired[str]
    inputs: NotRequired[list[dict[str, Any]]]
    outputs: NotRequired[list[str]]


class NodePlanJSON(TypedDict):
    """A :class:`NodePlan` in ``vq campaign status --json``."""

    node: str
    status: str
    reasons: list[str]
    next_action: NextAction | None
    attempt: int | None
    state: str | None
    host: str | None
    job_id: str | None
    outputs_verified: bool


class RetainedJSON(TypedDict):
    node: str
    attempt: int
    consumers: list[str]


class CampaignPlanJSON(TypedDict):
    """A :class:`CampaignPlan` in ``vq campaign status --json``."""

    status: str
    nodes: list[NodePlanJSON]
    retention: list[RetainedJSON]


@dataclass
class NodePlan:
    node: str
    status: str
    reasons: list[str] = field(default_factory=list)
    action: NextAction | None = None
    attempt: Attempt | None = None
    #: a succeeded node whose every output is verified
    verified: bool = False

    def as_dict(self) -> NodePlanJSON:
        latest = self.attempt
        return {
            "node": self.node,
            "status": self.status,
            "reasons": self.reasons,
            "next_action": self.action,
            "attempt": None if latest is None else latest.attempt,
            "state": None if latest is None else latest.state,
            "host": None if latest is None else latest.host,
            "job_id": None if latest is None else latest.job_id,
            "outputs_verified": self.verified,
        }


@dataclass(frozen=True)
class Retained:
    """A succeeded producer attempt whose artifacts ``consumers`` still need."""

    node: str
    attempt: int
    consumers: tuple[str, ...]

    def as_dict(self) -> RetainedJSON:
        return {"node": self.node, "attempt": self.attempt, "consumers": list(self.consumers)}


@dataclass
class CampaignPlan:
    status: str
    nodes: list[NodePlan]
    retention: list[Retained]

    def node(self, node_id: str) -> NodePlan:
        return next(plan for plan in self.nodes if plan.node == node_id)

    def as_dict(self) -> CampaignPlanJSON:
        return {
            "status": self.status,
            "nodes": [plan.as_dict() for plan in self.nodes],
            "retention": [item.as_dict() for item in self.retention],
        }


def stage_bindings(
    campaign: Campaign, journal: Journal, node: Node
) -> tuple[list[InputBinding], list[str]]:
    """The producer attempt and verified manifest to stage each input of ``node`` from,
    and the reasons why any input cannot be staged (then the bindings are incomplete)."""
    bindings: list[InputBinding] = []
    reasons: list[str] = []
    for item in node.inputs:
        parsed = split_source(item.source)
        assert parsed is not None
        producer, output = parsed
        latest = journal.latest(producer)
        if latest is None or latest.state != "succeeded":
            reasons.append(f"input {item.name}: {producer} has not succeeded")
            continue
        record = latest.output(output)
        if record is None:
            reasons.append(f"input {item.name}: {item.source} is not published yet")
        elif record.status != "verified" or record.manifest_sha256 is None:
            reasons.append(f"input {item.name}: {item.source} is not verified ({record.status})")
        else:
            bindings.append(
                InputBinding(
                    name=item.name,
                    producer=producer,
                    attempt=latest.attempt,
                    output=output,
                    manifest_sha256=record.manifest_sha256,
                )
            )
    return bindings, reasons


def plan(campaign: Campaign, digest: str, journal: Journal) -> CampaignPlan:
    """Every node's status, reasons and next action, in campaign order (module contract).

    ``journal`` must have passed :func:`vq.campaign.journal.check_journal`.
    """
    plans: dict[str, NodePlan] = {}
    for node_id in campaign_order(campaign):
        node = campaign.node(node_id)
        assert node is not None
        plans[node_id] = _plan_node(campaign, digest, journal, node, plans)
    ordered = [plans[node_id] for node_id in campaign_order(campaign)]
    retention = _retention(campaign, journal, plans)
    return CampaignPlan(_campaign_status(ordered), ordered, retention)


def _plan_node(
    campaign: Campaign, digest: str, journal: Journal, node: Node, done: dict[str, NodePlan]
) -> NodePlan:
    latest = journal.latest(node.id)
    if latest is not None:
        return _from_attempt(node, latest)
    blocked: list[str] = []
    waiting: list[str] = []
    success_preds = [p for item in node.inputs if (p := split_source(item.source))]
    for producer, _output in success_preds:
        _judge(done[producer], "success", blocked, waiting)
    for dep in node.after:
        _judge(done[dep.node], dep.on, blocked, waiting)
    if blocked:
        return NodePlan(node.id, "blocked", _unique(blocked))
    if waiting:
        return NodePlan(node.id, "waiting", _unique(waiting))
    bindings, missing = stage_bindings(campaign, journal, node)
    if missing:
        return NodePlan(node.id, "blocked", missing)
    action: NextAction = {
        "action": "submit",
        "attempt": 1,
        "key": attempt_key(digest, node.id, 1),
        "inputs": [binding.model_dump(mode="json") for binding in bindings],
    }
    return NodePlan(node.id, "ready", ["every dependency is met"], action)


def _judge(pred: NodePlan, on: str, blocked: list[str], waiting: list[str]) -> None:
    name = pred.node
    if on == "success":
        if pred.status == "failed":
            blocked.append(f"{name} failed")
        elif pred.status == "blocked":
            blocked.append(f"{name} is blocked")
        elif pred.status != "succeeded":
            waiting.append(f"{name} has not succeeded yet")
        return
    if pred.status == "blocked":
        blocked.append(f"{name} is blocked and will never run")
    elif pred.status not in ("succeeded", "failed"):
        waiting.append(f"{name} has not finished yet")


def _from_attempt(node: Node, latest: Attempt) -> NodePlan:
    n = latest.attempt
    if latest.state == "submitting":
        reason = f"attempt {n} may have reached {latest.host or 'its host'}"
        action: NextAction = {"action": "reconcile", "attempt": n, "key": latest.key}
        return NodePlan(node.id, "uncertain", [reason], action, latest)
    if latest.state in ("accepted", "running"):
        where = f"job {latest.job_id} on {latest.host or 'localhost'}"
        return NodePlan(
            node.id,
            "running",
            [f"attempt {n} is {latest.state} ({where})"],
            {"action": "wait", "attempt": n},
            latest,
        )
    if latest.state in ("failed", "cancelled"):
        reason = f"attempt {n} {latest.state}; `vq campaign retry` authorizes attempt {n + 1}"
        return NodePlan(node.id, "failed", [reason], None, latest)
    unverified = [
        out.name
        for out in node.outputs
        if (record := latest.output(out.name)) is None or record.status != "verified"
    ]
    if not unverified:
        return NodePlan(node.id, "succeeded", [f"attempt {n} succeeded"], None, latest, True)
    reasons = []
    for name in unverified:
        record = latest.output(name)
        state = "not published yet" if record is None else f"{record.status}"
        if record is not None and record.message:
            state += f": {record.message}"
        reasons.append(f"output {name} {state}")
    retry = [
        name
        for name in unverified
        if (record := latest.output(name)) is None or record.status in REPUBLISH_STATUSES
    ]
    publish: NextAction | None = None
    if retry:
        publish = {"action": "publish", "attempt": n, "outputs": retry}
    return NodePlan(node.id, "succeeded", reasons, publish, latest)


def attention(result: CampaignPlan) -> list[str]:
    """What needs someone to act: failed, blocked and uncertain nodes, and succeeded
    nodes with an output that publishing again will not fix."""
    out = []
    for node in result.nodes:
        stuck = node.status == "succeeded" and not node.verified and node.action is None
        if node.status in ("failed", "blocked", "uncertain") or stuck:
            out.append(f"{node.node}: {'; '.join(node.reasons)}")
    return out


def _campaign_status(nodes: list[NodePlan]) -> str:
    if all(p.status == "succeeded" and p.verified for p in nodes):
        return "succeeded"
    if any(p.status == "failed" for p in nodes):
        return "failed"
    if any(p.status in ("ready", "uncertain", "running") or p.action for p in nodes):
        return "running"
    return "blocked"


def _retention(campaign: Campaign, journal: Journal, plans: dict[str, NodePlan]) -> list[Retained]:
    needs: dict[str, list[str]] = {}
    for (producer, _output), consumers in consumers_of(campaign).items():
        for consumer in consumers:
            if plans[consumer].status != "succeeded" and consumer not in needs.setdefault(
                producer, []
            ):
                needs[producer].append(consumer)
    out: list[Retained] = []
    for node_id in campaign_order(campaign):
        latest = journal.latest(node_id)
        if needs.get(node_id) and latest is not None and latest.state == "succeeded":
            out.append(Retained(node_id, latest.attempt, tuple(needs[node_id])))
    return out


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
