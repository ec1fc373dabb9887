"""The campaign controller: observe, publish, stage and submit until nothing more can run.

Each pass goes through the nodes in campaign order and is level-triggered (the plan is
recomputed from the journal, :mod:`vq.campaign.planner`):

1. **Observe** every accepted or running attempt on its host (one listing per host).
   COMPLETED makes it
   succeeded, KILLED cancelled, any other terminal state failed; a job is never moved
   backwards (one seen running and later pending again stays running).
2. **Publish** each output of a succeeded attempt (:mod:`vq.campaign.publish`).
3. **Stage and submit** each ready node: build and verify its payload, record the
   attempt as ``submitting`` (the journal is written before the request is sent), then
   submit under the attempt's idempotency key and record the job. **Reconcile** an attempt
   still submitting: verify its payload again (stage it when a retry authorized it) and
   resend it under the same key, which returns the job already accepted.

A queue call that fails is retried on the next pass, except when the queue no longer
knows the job or its workspace (NotFound): that is reported and left for someone to act.
A submission that was not accepted is reported and left submitting (never marked failed:
that would invite a retry under a new key), in the words of what happened
(:func:`not_accepted`): its outcome unknown (the answer was lost after the request may
have reached the queue: reconciled under the same key), the queue not reached, or the
queue's refusal. The journal is rewritten atomically after every change,
so stopping at any point and running again picks up where it left off. Hosts are reached
only through :class:`vq.campaign.hosts.CampaignHost`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from vq.campaign.files import LoadedCampaign
from vq.campaign.hosts import CampaignHost, Observation, SubmitRequest
from vq.campaign.journal import Attempt, AttemptState, InputBinding, Journal
from vq.campaign.model import Node
from vq.campaign.planner import CampaignPlan, plan
from vq.campaign.publish import pending_outputs, publish_outputs
from vq.campaign.rundir import RunDir, load_journal, write_journal
from vq.campaign.stage import check_payload, stage_payload
from vq.errors import (
    CommandTimeout,
    DaemonBusy,
    DaemonNotRunning,
    HostUnavailable,
    NotFound,
    OutcomeUnknown,
    RemoteCommandFailed,
    RemoteProtocolError,
    TransportError,
    VqError,
)

__all__ = [
    "Controller",
    "PassResult",
    "attempt_state",
    "job_name",
    "not_accepted",
    "runtime_mismatch",
]

#: How far an attempt has come; an observation never moves it back.
_RANK = {"submitting": 0, "accepted": 1, "running": 2}


def attempt_state(queue_state: str, terminal: bool, current: AttemptState) -> AttemptState:
    """The attempt state a queue's job state means, never moving ``current`` backwards."""
    if terminal:
        if queue_state == "COMPLETED":
            return "succeeded"
        return "cancelled" if queue_state == "KILLED" else "failed"
    seen: AttemptState = "accepted" if queue_state == "PENDING" else "running"
    return seen if _RANK[seen] > _RANK.get(current, 0) else current


def not_accepted(exc: VqError | OSError) -> str:
    """What a submission that raised ``exc`` left behind, for the campaign log. Only the
    queue's own answer is a refusal: an answer lost or unreadable after the request may
    have reached the queue is an unknown outcome (the job may exist; the resend under the
    same key finds it), a queue that could not be reached is just that."""
    unknown = OutcomeUnknown | RemoteProtocolError | RemoteCommandFailed | CommandTimeout
    if isinstance(exc, unknown):
        return (
            "submission outcome unknown (the job may exist), left submitting to be "
            f"reconciled under its key: {exc}"
        )
    if isinstance(exc, TransportError | DaemonNotRunning | DaemonBusy | HostUnavailable):
        return (
            f"submission did not reach the queue, left submitting to be resent under its key: {exc}"
        )
    if isinstance(exc, OSError):
        return f"submission failed here, left submitting: {exc}"
    return f"submission refused, left submitting: {exc}"


def runtime_mismatch(node: Node, attempt: Attempt) -> str | None:
    """Why a succeeded attempt of a node declaring a runtime generation must not be
    published: it recorded no generation, or another one (None: it ran the declared one,
    or the node declares none)."""
    if node.runtime_digest is None:
        return None
    ran = (attempt.runtime or {}).get("artifact_identity")
    if ran is None:
        return (
            f"its job records no runtime generation (declared {node.runtime_digest[:12]}); "
            "nothing it produced is published"
        )
    if ran != node.runtime_digest:
        return (
            f"its job ran runtime generation {str(ran)[:12]}, not the declared "
            f"{node.runtime_digest[:12]}; nothing it produced is published"
        )
    return None


def job_name(campaign_id: str, node: str, attempt: int) -> str:
    """``CAMPAIGN.NODE.aN``, with the campaign id shortened to fit 128 characters."""
    tail = f".{node}.a{attempt}"
    return campaign_id[: 128 - len(tail)] + tail


@dataclass
class PassResult:
    """What one pass did: whether the journal changed, whether a job is in flight, whether
    a queue call failed and should be retried, and every problem found."""

    changed: bool = False
    in_flight: bool = False
    retry_later: bool = False
    problems: list[str] = field(default_factory=list)


class Controller:
    """One campaign in one run directory (the caller holds ``controller.lock``)."""

    def __init__(
        self,
        loaded: LoadedCampaign,
        run_dir: RunDir,
        hosts: Callable[[str | None], CampaignHost],
        now: Callable[[], str],
        log: Callable[[str], None],
    ) -> None:
        self.loaded = loaded
        self.run_dir = run_dir
        self.hosts = hosts
        self.now = now
        self.log = log
        self.journal: Journal = load_journal(run_dir, loaded)

    def save(self) -> None:
        write_journal(self.run_dir, self.journal)

    def plan(self) -> CampaignPlan:
        return plan(self.loaded.campaign, self.loaded.digest, self.journal)

    def run_pass(self) -> PassResult:
        result = PassResult()
        self._observe(result)
        self._publish(result)
        self._advance(result)
        result.in_flight = any(a.state in ("accepted", "running") for a in self.journal.attempts)
        return result

    def _node(self, node_id: str) -> Node:
        node = self.loaded.campaign.node(node_id)
        assert node is not None  # the journal was checked against the campaign
        return node

    # --- 1. observe ------------------------------------------------------------------
    def _observe(self, result: PassResult) -> None:
        by_host: dict[str | None, list[Attempt]] = {}
        for attempt in self.journal.attempts:
            if attempt.state in ("accepted", "running") and attempt.job_id is not None:
                by_host.setdefault(self._node(attempt.node).host, []).append(attempt)
        hint = f"{self.loaded.campaign.campaign_id[:100]}."
        for host_name, attempts in by_host.items():
            host = self.hosts(host_name)
            try:  # one listing per host and pass
                seen = host.observe([str(a.job_id) for a in attempts], hint)
            except (VqError, OSError) as exc:
                result.retry_later = True
                where = host_name or "localhost"
                result.problems.append(f"cannot observe the jobs on {where}: {exc}")
                continue
            for attempt in attempts:
                self._observe_one(host, attempt, seen.get(str(attempt.job_id)), result)

    def _observe_one(
        self, host: CampaignHost, attempt: Attempt, seen: Observation | None, result: PassResult
    ) -> None:
        label = f"{attempt.node}: attempt {attempt.attempt}"
        if seen is None:  # the queue lost the job: someone has to look
            result.problems.append(f"{label}: job {attempt.job_id} is unknown on {host.name}")
            return
        state = attempt_state(seen.state, seen.terminal, attempt.state)
        runtime = attempt.runtime
        node = self._node(attempt.node)
        wants_runtime = node.program is not None or node.runtime_digest is not None
        if runtime is None and seen.started and wants_runtime:
            try:
                found = host.runtime(str(attempt.job_id), seen)
                runtime = None if found is None else dict(found)
            except (VqError, OSError) as exc:  # nothing moves until the record is read
                result.retry_later = True
                result.problems.append(f"{label}: cannot read its runtime: {exc}")
                return
        if (state, runtime) == (attempt.state, attempt.runtime):
            return
        attempt.state, attempt.runtime = state, runtime
        self.save()
        result.changed = True
        if state in ("failed", "cancelled"):
            why = seen.failure_reason or f"exit code {seen.exit_code}"
            self.log(f"{label} {state} (job {seen.state.lower()}: {why})")
        elif state != "running" or seen.terminal:
            self.log(f"{label} {state}")

    # --- 2. publish ------------------------------------------------------------------
    def _publish(self, result: PassResult) -> None:
        for node in self.loaded.campaign.nodes:
            attempt = self.journal.latest(node.id)
            if attempt is None or attempt.state != "succeeded" or attempt.job_id is None:
                continue
            if not pending_outputs(node, attempt):
                continue
            mismatch = runtime_mismatch(node, attempt)
            if mismatch is not None:  # nothing it produced is published
                result.problems.append(f"{node.id}: attempt {attempt.attempt}: {mismatch}")
                continue
            incoming = self.run_dir.incoming(node.id, attempt.attempt)
            label = f"{node.id}: attempt {attempt.attempt}"
            try:
                skipped = self.hosts(node.host).fetch(attempt.job_id, incoming)
                records = publish_outputs(
                    self.loaded, self.run_dir, node, attempt, incoming, skipped
                )
            except NotFound as exc:  # the workspace is gone: retrying will not bring it back
                result.problems.append(f"{label}: cannot publish: {exc}")
                continue
            except (VqError, OSError) as exc:
                result.retry_later = True
                result.problems.append(f"{label}: publishing failed, retried next pass: {exc}")
                continue
            by_name = {record.name: record for record in attempt.outputs}
            for record in records:
                if record.status == "verified":
                    self.log(f"{label}: output {record.name} published and verified")
                else:
                    result.problems.append(
                        f"{label}: output {record.name} {record.status}: {record.message}"
                    )
                    result.retry_later = result.retry_later or record.status not in (
                        "missing",
                        "unsafe",
                    )
                by_name[record.name] = record
            attempt.outputs = [by_name[out.name] for out in node.outputs if out.name in by_name]
            self.save()
            result.changed = True

    # --- 3. stage, submit, reconcile --------------------------------------------------
    def _advance(self, result: PassResult) -> None:
        for node_plan in self.plan().nodes:
            node = self._node(node_plan.node)
            if node_plan.status == "uncertain" and node_plan.attempt is not None:
                self._send(node, node_plan.attempt, result, reconcile=True)
            elif node_plan.status == "ready" and node_plan.action is not None:
                bindings = [InputBinding(**item) for item in node_plan.action["inputs"]]
                try:
                    stage_payload(self.loaded, self.run_dir, node, 1, bindings)
                except (VqError, OSError) as exc:
                    result.problems.append(f"{node.id}: staging attempt 1 failed: {exc}")
                    continue
                attempt = Attempt(
                    node=node.id,
                    attempt=1,
                    state="submitting",
                    key=node_plan.action["key"],
                    host=node.host or "localhost",
                    inputs=bindings,
                    recorded_at=self.now(),
                )
                self.journal.attempts.append(attempt)
                self.save()
                result.changed = True
                self._send(node, attempt, result, reconcile=False)

    def _send(self, node: Node, attempt: Attempt, result: PassResult, *, reconcile: bool) -> None:
        label = f"{node.id}: attempt {attempt.attempt}"
        payload = self.run_dir.payload(node.id, attempt.attempt)
        try:
            if not payload.exists():  # a retry authorized it; nothing was sent from it yet
                stage_payload(self.loaded, self.run_dir, node, attempt.attempt, attempt.inputs)
            elif reconcile:
                problems = check_payload(
                    self.loaded, self.run_dir, node, attempt.attempt, attempt.inputs
                )
                if problems:
                    first = problems[0]
                    result.problems.append(
                        f"{label}: its payload no longer matches its sources and manifests "
                        f"({first.status} {first.path}); not sent"
                    )
                    return
            job_id = self.hosts(node.host).submit(
                SubmitRequest(
                    payload=payload,
                    key=attempt.key,
                    job_name=job_name(self.loaded.campaign.campaign_id, node.id, attempt.attempt),
                    command=list(node.command),
                    cpus=node.cpus,
                    mem_mb=node.mem_mb,
                    wall_time_seconds=node.wall_time_seconds,
                    program=node.program,
                    runtime_root=node.runtime_root,
                    runtime_artifact=node.runtime_digest,
                )
            )
        except (VqError, OSError) as exc:
            result.problems.append(f"{label}: {not_accepted(exc)}")
            return
        attempt.state, attempt.job_id = "accepted", job_id
        self.save()
        result.changed = True
        verb = "reconciled as" if reconcile else "submitted as"
        self.log(f"{label} {verb} job {job_id} on {attempt.host}")
