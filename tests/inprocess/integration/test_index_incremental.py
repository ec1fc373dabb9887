"""The daemon's index answers state-filtered listings and counts from its by-state sets,
and its re-check for other writers is one directory stat while nothing was renamed into
the queue — yet a spec another process rewrote is always seen. An ended job is held as
its summary; the terminal index file that carries summaries across a restart is never
trusted over a spec file that changed since."""

from __future__ import annotations

import os
import time
from pathlib import Path

from vq.daemon.index import JobIndex, QueueListing
from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.domain.summary import JobSummary
from vq.paths import StatePaths
from vq.store.specs import Signature, SpecStore
from vq.store.summaries import load_summaries


def _spec(job_id: str, state: str) -> JobSpec:
    return JobSpec.model_validate(
        {
            "id": job_id,
            "submitted_at": "2026-01-01T00:00:00+00:00",
            "command": ["true"],
            "cpus": 1,
            "state": state,
        }
    )


def _store(tmp_path: Path) -> SpecStore:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    return SpecStore(paths)


def test_states_and_counts_follow_every_change(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for i, state in enumerate(["PENDING", "RUNNING", "COMPLETED", "COMPLETED"]):
        store.create(_spec(f"00000000000{i}", state))
    index = JobIndex(store)
    index.load()
    assert index.counts() == {"PENDING": 1, "RUNNING": 1, "COMPLETED": 2}
    assert [s.id for s in index.in_states([JobState.RUNNING])] == ["000000000001"]
    moved = _spec("000000000001", "COMPLETED")
    store.update("000000000001", lambda _: moved)
    index.upsert(moved)
    assert index.in_states([JobState.RUNNING]) == []
    assert index.counts() == {"PENDING": 1, "COMPLETED": 3}
    os.unlink(store.path("000000000000"))
    index.refresh_names()
    assert index.counts() == {"COMPLETED": 3}
    assert index.in_states([JobState.PENDING]) == []


def test_another_writers_rename_is_seen_after_a_settled_check(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_spec("0000000000a1", "PENDING"))
    index = JobIndex(store)
    index.load()
    queue = store.paths.queue_dir
    old = os.stat(queue).st_mtime_ns - 5_000_000_000  # the directory last changed 5 s ago
    os.utime(queue, ns=(old, old))
    assert index.revalidate() == 0  # a full check, taken well after the last change
    assert index.revalidate() == 0  # nothing renamed since: one directory stat
    other = SpecStore(store.paths)  # another process's writer
    other.update("0000000000a1", lambda spec: _spec(spec.id, "KILLED"))
    assert index.revalidate() == 1
    indexed = index.get("0000000000a1")
    assert indexed is not None and indexed.state is JobState.KILLED
    assert index.counts() == {"KILLED": 1}


def test_a_scan_reuses_a_spec_read_moments_ago_only_while_its_file_is_unchanged(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    store.create(_spec("0000000000b1", "COMPLETED"))
    store.create(_spec("0000000000b2", "PENDING"))
    known = {}
    for job_id in ("0000000000b1", "0000000000b2"):
        signature = store.signature(job_id)
        assert signature is not None
        known[job_id] = (signature, store.read(job_id))
    store.update("0000000000b2", lambda spec: _spec(spec.id, "KILLED"))  # written since
    scan = store.scan(known=known)
    assert scan.specs["0000000000b1"] is known["0000000000b1"][1]  # not parsed again
    assert scan.specs["0000000000b2"].state is JobState.KILLED  # read again: it changed


def test_an_ended_job_is_held_as_its_summary_and_read_in_full_on_demand(tmp_path: Path) -> None:
    store = _store(tmp_path)
    done = _spec("0000000000c1", "COMPLETED").model_copy(update={"cwd": "/somewhere"})
    store.create(done)
    store.create(_spec("0000000000c2", "PENDING"))
    index = JobIndex(store)
    index.load()
    assert isinstance(index.entry("0000000000c1"), JobSummary)
    assert isinstance(index.entry("0000000000c2"), JobSpec)
    full = index.get("0000000000c1")
    assert full is not None and full.cwd == "/somewhere"  # a field no summary holds
    assert index.finished_count() == 1
    os.unlink(store.path("0000000000c1"))
    assert index.get("0000000000c1") is None  # gone from disk: nothing to parse


def test_the_terminal_index_round_trips_and_is_never_trusted_over_a_changed_spec(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    for i in range(3):
        store.create(_spec(f"0000000000d{i}", "COMPLETED"))
    index = JobIndex(store)
    index.load()
    assert index.save_summaries() == 3
    saved = load_summaries(store.paths.terminal_index)
    assert {job_id: entry[1] for job_id, entry in saved.items()} == {
        job_id: JobSummary.of(store.read(job_id)) for job_id in saved
    }
    # Another writer rewrites one spec after the file was written: its summary is stale.
    store.update("0000000000d1", lambda spec: _spec(spec.id, "FAILED"))
    fresh = JobIndex(store)
    fresh.load(dict(saved))
    assert fresh.counts() == {"COMPLETED": 2, "FAILED": 1}
    assert fresh.entry("0000000000d0") is saved["0000000000d0"][1]  # taken, not parsed


def _listed(store: SpecStore) -> tuple[QueueListing, dict[str, tuple[Signature, JobSpec]]]:
    """The queue listed as the recovery pass lists it (stamp 5 s old: settled), with
    each spec read after its signature."""
    queue = store.paths.queue_dir
    old = os.stat(queue).st_mtime_ns - 5_000_000_000
    os.utime(queue, ns=(old, old))
    listing = QueueListing(sorted(store.list_ids()), store.queue_stamp(), time.time_ns())
    signatures = store.signatures(listing.ids)
    known = {}
    for job_id in listing.ids:
        signature = signatures[job_id]
        assert signature is not None
        known[job_id] = (signature, store.read(job_id))
    return listing, known


def test_a_load_after_recovery_takes_its_listing_while_the_queue_is_unchanged(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    store.create(_spec("0000000000e1", "COMPLETED"))
    store.create(_spec("0000000000e2", "PENDING"))
    listing, known = _listed(store)
    assert listing.still_exact(store.queue_stamp())  # no rename since the listing
    index = JobIndex(store)
    index.load(known, listing)
    assert index.entry("0000000000e2") is known["0000000000e2"][1]  # taken, not parsed
    assert index.counts() == {"COMPLETED": 1, "PENDING": 1}
    assert index.revalidate() == 0  # the load's signatures stand: nothing re-read
    other = SpecStore(store.paths)  # another writer after the load is still seen
    other.update("0000000000e2", lambda spec: _spec(spec.id, "KILLED"))
    assert index.revalidate() == 1
    assert index.counts() == {"COMPLETED": 1, "KILLED": 1}


def test_a_load_after_recovery_lists_again_once_the_queue_changed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_spec("0000000000f1", "PENDING"))
    listing, known = _listed(store)
    # Between the pass and the load: one spec rewritten, one created (renames).
    store.update("0000000000f1", lambda spec: _spec(spec.id, "KILLED"))
    store.create(_spec("0000000000f2", "PENDING"))
    assert not listing.still_exact(store.queue_stamp())
    index = JobIndex(store)
    index.load(known, listing)
    assert index.counts() == {"KILLED": 1, "PENDING": 1}
    assert index.revalidate() == 0


def test_an_unreadable_terminal_index_is_ignored(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.create(_spec("0000000000e1", "COMPLETED"))
    index = JobIndex(store)
    index.load()
    index.save_summaries()
    good = store.paths.terminal_index.read_text()
    assert len(load_summaries(store.paths.terminal_index)) == 1
    store.paths.terminal_index.write_text(good[: len(good) - 20])  # a torn last line
    assert load_summaries(store.paths.terminal_index) == {}
    store.paths.terminal_index.write_text(good.replace("vq.terminal-index/2", "other/9"))
    assert load_summaries(store.paths.terminal_index) == {}
    store.paths.terminal_index.write_text(good.replace('"COMPLETED"', '"NO_SUCH_STATE"'))
    assert load_summaries(store.paths.terminal_index) == {}
    assert load_summaries(tmp_path / "missing.json") == {}
