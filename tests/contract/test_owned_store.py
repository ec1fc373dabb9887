"""The multi-user spec store (``vq.store.owned``): every owner's queue as one store, each
spec untrusted (§2.4, §7.1). Runs on a temporary root; owners are only directory names
here (the real users and the root daemon are in tests/integration/test_multi_user_daemon.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.errors import CorruptSpec, InvalidInput, NotFound
from vq.paths import MultiUserLayout, StateLayout
from vq.store.owned import MultiOwnerSpecStore
from vq.store.specs import encode_spec

VQA, VQB = 1003, 1004


def plant(root: Path, uid: int, job_id: str, **fields: object) -> Path:
    """A spec written into ``users/<uid>/queue`` the way that user could write it."""
    queue = StateLayout(root).for_owner(uid).queue_dir
    queue.mkdir(parents=True, exist_ok=True)
    spec = JobSpec(
        id=job_id,
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        command=["true"],
        cwd="/tmp",
        cpus=1,
        submitter=str(uid),
    )
    data = json.loads(encode_spec(spec))
    data.update(fields)
    path = queue / f"{job_id}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def store(tmp_path: Path) -> MultiOwnerSpecStore:
    return MultiOwnerSpecStore(MultiUserLayout(tmp_path), min_uid=1000)


def test_every_owner_is_discovered_and_each_job_routed_to_its_tree(
    store: MultiOwnerSpecStore, tmp_path: Path
) -> None:
    plant(tmp_path, VQA, "a" * 12)
    plant(tmp_path, VQB, "b" * 12)
    (tmp_path / "users" / "alice").mkdir()  # never a canonical owner: never read
    scan = store.scan()
    assert set(scan.specs) == {"a" * 12, "b" * 12} and not scan.quarantined
    assert store.owner("a" * 12) == VQA and store.owner("b" * 12) == VQB
    layout = store.layout
    assert layout.workspace("b" * 12) == tmp_path / "users" / str(VQB) / "jobs" / ("b" * 12)
    assert layout.daemon_lock == tmp_path / ".vq-daemon.lock"


def test_a_forged_submitter_or_foreign_dependency_is_quarantined(
    store: MultiOwnerSpecStore, tmp_path: Path
) -> None:
    plant(tmp_path, VQA, "a" * 12, submitter=str(VQB))
    plant(tmp_path, VQB, "b" * 12)
    plant(tmp_path, VQA, "c" * 12, depends_on=["b" * 12])
    scan = store.scan()
    assert set(scan.specs) == {"b" * 12}
    assert "submitter '1004' is not its owner directory's uid 1003" in (
        scan.quarantined["a" * 12].reason
    )
    assert "depends on another owner's job" in scan.quarantined["c" * 12].reason


def test_a_copy_in_another_tree_is_quarantined_alone_and_the_recorded_owner_keeps_the_job(
    store: MultiOwnerSpecStore, tmp_path: Path
) -> None:
    pending, running = "d" * 12, "e" * 12
    plant(tmp_path, VQA, pending)
    original = plant(tmp_path, VQA, running, state="RUNNING")
    assert set(store.scan().specs) == {pending, running}  # discovered: VQA is recorded
    copies = [plant(tmp_path, VQB, pending), plant(tmp_path, VQB, running, state="RUNNING")]
    scan = store.scan()
    assert set(scan.specs) == {pending, running} and not scan.quarantined
    assert store.owner(pending) == store.owner(running) == VQA
    assert store.suspect_ids() == set()  # nothing of the owner's jobs changed
    impostors = {item.path: item for item in store.impostor_copies()}
    assert set(impostors) == {str(path) for path in copies}
    assert all(f"belongs to uid {VQA}" in item.reason for item in impostors.values())
    assert all(item.name in (pending, running) for item in impostors.values())
    # Every write goes on to the recorded owner's tree, never the copy's.
    updated = store.update(running, lambda s: s.model_copy(update={"exit_code": 0}))
    assert updated.changed and json.loads(original.read_text())["exit_code"] == 0
    assert json.loads(copies[1].read_text())["exit_code"] is None
    assert store.update(pending, lambda s: s).spec.submitter == str(VQA)
    # --uid: each owner's copy is still readable on its own, under the per-spec rules.
    assert store.read_copy(pending, VQA).submitter == str(VQA)
    assert store.read_copy(pending, VQB).submitter == str(VQB)
    with pytest.raises(NotFound, match="no owner tree for uid 4242"):
        store.read_copy(pending, 4242)
    # The owner's copy goes (archived): the id is found anew, in the one tree left.
    original.unlink()
    assert running in store.scan().specs and store.owner(running) == VQB
    assert store.suspect_ids() == {running}
    assert [item.name for item in store.impostor_copies()] == [pending]


def test_an_id_in_two_trees_with_no_recorded_owner_holds_every_copy_until_one_is_left(
    store: MultiOwnerSpecStore, tmp_path: Path
) -> None:
    both = "c" * 12
    plant(tmp_path, VQA, both)
    theirs = plant(tmp_path, VQB, both)
    scan = store.scan()  # a daemon start: neither copy was recorded first
    assert not scan.specs and "several owners" in scan.quarantined[both].reason
    assert store.suspect_ids() == {both} and store.owner(both) is None
    with pytest.raises(CorruptSpec, match="several owners"):
        store.update(both, lambda s: s)
    assert store.read_copy(both, VQB).submitter == str(VQB)
    theirs.unlink()  # one copy left: released, and read again at once
    assert set(store.scan().specs) == {both} and store.owner(both) == VQA
    assert store.suspect_ids() == {both}
    # The daemon writing an id itself records its owner over an ambiguity too.
    plant(tmp_path, VQB, "b" * 12)
    plant(tmp_path, VQA, "b" * 12)
    store.scan()
    store.layout.owners.claim("b" * 12, VQB)
    scan = store.scan()
    assert "b" * 12 in scan.specs and store.owner("b" * 12) == VQB
    assert [item.path for item in store.impostor_copies()] == [
        str(tmp_path / "users" / str(VQA) / "queue" / ("b" * 12 + ".json"))
    ]


def test_a_lock_file_planted_as_a_symlink_is_refused(
    store: MultiOwnerSpecStore, tmp_path: Path
) -> None:
    path = plant(tmp_path, VQA, "f" * 12)
    canary = tmp_path / "canary"
    canary.write_text("untouched")
    path.with_name(path.name + ".lock").symlink_to(canary)
    store.scan()
    with pytest.raises(CorruptSpec, match="lock file"):
        store.update("f" * 12, lambda s: s.model_copy(update={"state": JobState.FAILED}))
    assert canary.read_text() == "untouched"
    assert json.loads(path.read_text())["state"] == "PENDING"


def test_a_queue_directory_swapped_for_a_symlink_after_discovery_is_refused(
    store: MultiOwnerSpecStore, tmp_path: Path
) -> None:
    path = plant(tmp_path, VQA, "a" * 12)
    store.scan()
    elsewhere = tmp_path / "elsewhere"
    path.parent.rename(elsewhere)
    path.parent.symlink_to(elsewhere)
    with pytest.raises(CorruptSpec, match="lock file"):
        store.update("a" * 12, lambda s: s.model_copy(update={"state": JobState.FAILED}))
    assert sorted(p.name for p in elsewhere.iterdir()) == [path.name]  # no lock made there
    assert json.loads((elsewhere / path.name).read_text())["state"] == "PENDING"


def test_a_new_spec_goes_to_the_tree_its_submitter_names(
    store: MultiOwnerSpecStore, tmp_path: Path
) -> None:
    plant(tmp_path, VQA, "1" * 12)
    sibling = JobSpec(
        id="2" * 12,
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        command=["true"],
        cwd="/tmp",
        cpus=1,
        submitter=str(VQA),
    )
    store.create(sibling)
    assert (tmp_path / "users" / str(VQA) / "queue" / f"{'2' * 12}.json").is_file()
    stranger = sibling.model_copy(update={"id": "3" * 12, "submitter": "4242"})
    with pytest.raises(InvalidInput, match="no owner tree"):
        store.create(stranger)
