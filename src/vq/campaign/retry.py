"""``vq campaign retry``: authorize the next attempt of a failed or cancelled node.

Contracts: under the run directory's lock, with the checked journal, only when the node's
latest attempt failed or was cancelled and every input can be bound to its producer's
succeeded attempt whose verified copy in ``artifacts/`` still matches its manifest. The
new attempt n + 1 is recorded as ``submitting`` with ``retry_of: n`` and its own key; the
journal is rewritten atomically. Nothing is submitted.
"""

from __future__ import annotations

from vq.campaign.files import LoadedCampaign, read_manifest, verify
from vq.campaign.journal import Attempt, attempt_key
from vq.campaign.planner import stage_bindings
from vq.campaign.rundir import RunDir, hold_lock, read_journal, write_journal
from vq.domain.artifact import manifest_sha256
from vq.errors import Conflict, NotFound

__all__ = ["retry"]


def retry(loaded: LoadedCampaign, run_dir: RunDir, node_id: str, *, now: str) -> Attempt:
    """Record attempt n + 1 of ``node_id`` (module contract); ``now`` is an ISO timestamp."""
    node = loaded.campaign.node(node_id)
    if node is None:
        raise NotFound(
            f"the campaign has no node {node_id!r}",
            hint="nodes: " + ", ".join(loaded.campaign.node_ids()),
        )
    with hold_lock(run_dir):
        journal = read_journal(run_dir.journal, loaded)
        latest = journal.latest(node_id)
        if latest is None:
            raise Conflict(
                f"{node_id} has no attempt yet; there is nothing to retry",
                hint="`vq campaign run` submits attempt 1 when the node is ready",
            )
        if latest.state not in ("failed", "cancelled"):
            raise Conflict(
                f"{node_id} attempt {latest.attempt} is {latest.state}; only a failed or "
                "cancelled attempt is retried",
                hint=f"`vq campaign status` shows what {node_id} needs",
            )
        bindings, missing = stage_bindings(loaded.campaign, journal, node)
        if missing:
            raise Conflict(f"{node_id} cannot be staged: " + "; ".join(missing))
        for binding in bindings:
            where = run_dir.artifact(binding.producer, binding.attempt, binding.output)
            manifest = read_manifest(
                run_dir.manifest(binding.producer, binding.attempt, binding.output)
            )
            status, _problems = verify(manifest, where)
            if manifest_sha256(manifest) != binding.manifest_sha256 or status != "verified":
                raise Conflict(
                    f"input {binding.name} of {node_id}: the copy {where} no longer matches "
                    f"the manifest {binding.producer} attempt {binding.attempt} verified "
                    f"({status})",
                    hint=f"`vq campaign artifact-verify` on {where} names each problem",
                )
        attempt = Attempt(
            node=node_id,
            attempt=latest.attempt + 1,
            state="submitting",
            key=attempt_key(loaded.digest, node_id, latest.attempt + 1),
            host=node.host or "localhost",
            retry_of=latest.attempt,
            inputs=bindings,
            recorded_at=now,
        )
        journal.attempts.append(attempt)
        write_journal(run_dir, journal)
        return attempt
