"""The dispatcher's admission order (``AdmissionOrder``) is kept incrementally: a job that
entered the pending set since the last pass is placed on its own, from the index's log of
such entries (``JobIndex.pending_since``), instead of rebuilding the order from every
pending spec. Across random sequences of enqueues (plain, deferred, gated, grouped, aimed
at a lane that is not configured or parked), claims, requeues, kills, completions,
replaced pending specs, clock steps and reloads that park a lane or not, what the
incrementally kept order holds of the pending jobs (``AdmissionOrder.held``) is exactly
what the order of a dispatcher built from scratch over the same index holds — with a log
long enough for every pass, and with one so short that most passes fall back to a
rebuild."""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from vq.daemon import index as index_module
from vq.daemon.dispatch import Dispatcher
from vq.daemon.index import JobIndex
from vq.daemon.supervisor import Supervisor
from vq.domain.admission import Caps
from vq.domain.lifecycle import apply_transition
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.executors.local import LocalExecutor
from vq.executors.registry import ExecutorRegistry
from vq.paths import StatePaths
from vq.services.context import ServiceContext
from vq.services.lifecycle import Lifecycle

START = datetime(2026, 1, 1, tzinfo=UTC)


class World:
    """One state root, its index and lifecycle writer, and a clock the test steps."""

    def __init__(self, root: Path) -> None:
        self.now = START + timedelta(days=1)
        paths = StatePaths(root)
        paths.ensure()
        self.ctx = ServiceContext(paths, Caps(), now=lambda: self.now)
        self.index = JobIndex(self.ctx.store)
        self.lifecycle = Lifecycle(self.ctx, on_change=self.index.upsert)
        self.executor = LocalExecutor(paths)
        self.supervisor = Supervisor(self.ctx, self.lifecycle, self.executor)
        self.ids: list[str] = []
        self.parked = True  # the lane "away" was removed by a reload: its jobs wait
        self.index.load()

    def dispatcher(self) -> Dispatcher:
        return Dispatcher(
            self.ctx,
            self.supervisor,
            ExecutorRegistry(self.executor, parked=lambda name: self.parked and name == "away"),
            self.index,
            self.lifecycle,
            {},
        )

    def in_state(self, state: JobState) -> list[str]:
        return sorted(e.id for e in self.index.in_states([state]))

    def enqueue(self, rng: random.Random, group: str | None = None, size: int = 1) -> None:
        for position in range(size):
            job_id = f"{len(self.ids) + 1:012x}"
            fields: dict[str, Any] = {
                "id": job_id,
                "submitted_at": START + timedelta(seconds=rng.randrange(5)),
                "command": ["true"],
                "priority": rng.choice([0, 0, 1, -1]),
                "cpus": rng.choice([1, 2]),
            }
            roll = rng.random()
            if roll < 0.2:
                fields["not_before"] = self.now + timedelta(minutes=rng.randrange(1, 30))
            elif roll < 0.3:
                fields["not_before"] = self.now - timedelta(minutes=1)
            if self.ids and rng.random() < 0.3:
                key = "depends_on" if rng.random() < 0.7 else "depends_on_any"
                fields[key] = rng.sample(self.ids, min(len(self.ids), rng.choice([1, 2])))
            if group is not None:
                fields |= {
                    "array_group_id": group,
                    "array_index": position,
                    "array_total": size,
                    "array_max_parallel": 2,
                }
            if rng.random() < 0.1:  # no such lane: failed at dispatch, or parked
                fields["scheduler_target"] = rng.choice(["nowhere", "away"])
            spec = JobSpec.model_validate(fields)
            self.ctx.store.create(spec)
            self.index.upsert(spec)
            self.ids.append(job_id)

    def step(self, rng: random.Random) -> None:
        """One random change to the queue."""
        pending, running = self.in_state(JobState.PENDING), self.in_state(JobState.RUNNING)
        roll = rng.random()
        if roll < 0.3 or not self.ids:
            self.enqueue(rng)
        elif roll < 0.35:
            self.enqueue(rng, group=f"g{len(self.ids)}", size=rng.randrange(2, 9))
        elif roll < 0.5 and pending:
            job_id = rng.choice(pending)
            self.lifecycle.claim(job_id, workdir=str(self.ctx.paths.workdir(job_id)))
        elif roll < 0.6 and running:
            self.lifecycle.requeue_unlaunched(rng.choice(running), "never sent")
        elif roll < 0.65 and pending:
            self.lifecycle.kill(rng.choice(pending), "cancelled")
        elif roll < 0.75 and running:
            job_id = rng.choice(running)
            target = rng.choice([JobState.COMPLETED, JobState.FAILED])
            moved = self.ctx.store.update(
                job_id, lambda spec: apply_transition(spec, target, self.now)
            )
            self.index.upsert(moved.spec)
        elif roll < 0.8 and pending:
            job_id = rng.choice(pending)

            def bump(spec: JobSpec) -> JobSpec:
                spec.priority = rng.choice([-2, 0, 3])
                return spec

            self.index.upsert(self.ctx.store.update(job_id, bump).spec)
        elif roll < 0.85:
            self.parked = not self.parked  # a reload; "away" jobs fail once it is not
        else:
            self.now += timedelta(minutes=rng.randrange(1, 10))


def run_sequence(seed: int, steps: int) -> tuple[int, int]:
    """Random steps, a dispatch view after each burst, compared with a fresh build;
    (incremental updates, rebuilds) of the kept order."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as scratch:
        world = World(Path(scratch))
        kept = world.dispatcher().admission_order
        for _ in range(steps):
            for _ in range(rng.randrange(1, 4)):
                world.step(rng)
            kept.candidates(world.now)
            kept.apply_gates()  # may fail jobs (a dependency cascade)
            assert world.index.take_state_changes() == set()
            fresh = world.dispatcher().admission_order
            fresh.candidates(world.now)
            fresh.apply_gates()
            # The fresh build found nothing left to fail: the kept one did it all.
            assert world.index.take_state_changes() == set()
            assert kept.held() == fresh.held()
            # Every pending local job that is due is in the order, exactly once.
            due = [
                s.id
                for s in world.index.pending()
                if s.scheduler_target is None
                and (s.not_before is None or s.not_before <= world.now)
            ]
            order = [r.job_id for r in kept.held().order]
            assert sorted(order) == sorted(due)
    return kept.incremental_updates, kept.rebuilds


@pytest.mark.parametrize("seed", range(12))
def test_the_incremental_order_is_the_rebuilt_one(seed: int) -> None:
    entered, rebuilt = run_sequence(seed, steps=60)
    assert rebuilt == 1  # the first pass; every later one from the log
    assert entered > 30


@pytest.mark.parametrize("seed", range(6))
def test_a_log_that_no_longer_reaches_back_falls_back_to_a_rebuild(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_module, "PENDING_LOG_LIMIT", 4)
    entered, rebuilt = run_sequence(100 + seed, steps=60)
    assert rebuilt > 1 and entered > 1


def test_the_log_replays_entries_and_then_no_longer_reaches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_module, "PENDING_LOG_LIMIT", 4)
    world = World(tmp_path)
    start = world.index.pending_generation
    assert world.index.pending_since(start) == []
    world.enqueue(random.Random(1), size=1)
    world.enqueue(random.Random(2), size=1)
    assert world.index.pending_since(start) == world.ids
    assert world.index.pending_generation == start + 2
    world.enqueue(random.Random(3), group="g", size=3)  # five since start: beyond the log
    assert world.index.pending_since(start) is None
    assert world.index.pending_since(world.index.pending_generation) == []
    world.index.load()  # everything replaced: no reader can replay across it
    assert world.index.pending_since(world.index.pending_generation - 1) is None
