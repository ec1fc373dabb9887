"""Group commit of claims: several PENDING jobs claimed at once, each durable and each
reported on its own (the dispatcher launches only what this returns as claimed)."""

from __future__ import annotations

import json
from pathlib import Path

from vq.domain.admission import Caps
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import NotFound
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle, Transition


def _context(tmp_path: Path) -> ServiceContext:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    return ServiceContext(paths, Caps())


def _create(ctx: ServiceContext, job_id: str, state: str = "PENDING") -> None:
    spec = JobSpec.model_validate(
        {
            "id": job_id,
            "submitted_at": "2026-01-01T00:00:00+00:00",
            "command": ["true"],
            "cpus": 1,
            "state": state,
        }
    )
    ctx.store.create(spec)
    ctx.paths.meta_dir(job_id).mkdir(parents=True)


def test_a_group_claims_every_pending_job_and_reports_each_on_its_own(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    pending = [f"00000000{i:04x}" for i in range(6)]
    for job_id in pending:
        _create(ctx, job_id)
    _create(ctx, "0000000000ff", state="KILLED")
    seen: list[str] = []
    lifecycle = Lifecycle(ctx, on_change=lambda spec: seen.append(spec.id))
    asked = [*pending, "0000000000ff", "00000000dead"]
    results = lifecycle.claim_group([(j, str(ctx.paths.workdir(j)), None, None) for j in asked])

    assert len(results) == len(asked)
    for job_id, moved in zip(pending, results, strict=False):
        assert isinstance(moved, Transition) and moved.changed, moved
        assert moved.spec.id == job_id and moved.previous is JobState.PENDING
        on_disk = json.loads(ctx.paths.spec(job_id).read_bytes())
        assert on_disk["state"] == "RUNNING"
        assert on_disk["workdir"] == str(ctx.paths.workdir(job_id))
        events = ctx.paths.events(job_id).read_text().splitlines()
        assert len(events) == 1
    refused = results[len(pending)]
    assert isinstance(refused, Transition) and not refused.changed
    assert refused.spec.state is JobState.KILLED
    assert isinstance(results[-1], NotFound)  # one bad item spoils nothing else
    assert sorted(seen) == sorted([*pending, "0000000000ff"])
    # Nothing was left behind by the concurrent writers: no temp files in the queue.
    assert not [p for p in ctx.paths.queue_dir.iterdir() if p.name.endswith(".tmp")]


def test_a_single_claim_is_the_same_transition(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    _create(ctx, "0000000000a1")
    lifecycle = Lifecycle(ctx)
    moved = lifecycle.claim("0000000000a1", workdir="/w")
    assert moved.changed and moved.spec.state is JobState.RUNNING
    again = lifecycle.claim("0000000000a1", workdir="/w")
    assert not again.changed and again.spec.state is JobState.RUNNING
