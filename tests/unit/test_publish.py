"""vq.publish in one process: commits, refusals, failed builders, retirement, workspaces."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from vq.errors import Conflict, InvalidInput, NotFound
from vq.publish import Draft, Workspace, _commit, publish, publish_file


def _residue(parent: Path) -> list[str]:
    return sorted(name for name in os.listdir(parent) if ".vqstage-" in name)


def test_publish_commits_a_complete_directory(tmp_path: Path) -> None:
    def build(draft: Draft) -> None:
        (draft.path / "a.txt").write_text("alpha\n")
        (draft.path / "sub").mkdir()
        (draft.path / "sub" / "b.txt").write_text("beta\n")

    done = publish(tmp_path / "out", build)
    assert done.path == tmp_path / "out"
    assert not done.cleanup_pending
    assert (tmp_path / "out" / "sub" / "b.txt").read_text() == "beta\n"
    assert _residue(tmp_path) == []


def test_existing_destination_is_refused_before_the_builder(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    called = []
    with pytest.raises(Conflict) as caught:
        publish(tmp_path / "out", lambda draft: called.append(draft))
    assert caught.value.reference == "publish-exists"
    assert called == []
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    with pytest.raises(Conflict):
        publish_file(tmp_path / "link", lambda stage: stage.write_text("x"))
    assert not (tmp_path / "nowhere").exists()


def test_a_failed_builder_exposes_nothing(tmp_path: Path) -> None:
    def build(draft: Draft) -> None:
        (draft.path / "half.txt").write_text("half")
        raise RuntimeError("the application refused its own output")

    with pytest.raises(RuntimeError):
        publish(tmp_path / "out", build)
    assert not (tmp_path / "out").exists()
    assert _residue(tmp_path) == []

    def write(stage: Path) -> None:
        stage.write_text("half")
        raise ValueError("invalid")

    with pytest.raises(ValueError, match="invalid"):
        publish_file(tmp_path / "f.json", write)
    assert os.listdir(tmp_path) == []


def test_a_destination_created_during_the_build_is_not_replaced(tmp_path: Path) -> None:
    def build(draft: Draft) -> None:
        (draft.path / "mine").write_text("mine")
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "theirs").write_text("theirs")

    with pytest.raises(Conflict):
        publish(tmp_path / "out", build)
    assert os.listdir(tmp_path / "out") == ["theirs"]
    assert _residue(tmp_path) == []


@pytest.mark.parametrize("native", [True, False])
def test_commit_never_replaces_on_either_path(tmp_path: Path, native: bool) -> None:
    for kind in ("dir", "file"):
        stage = tmp_path / f".stage-{kind}"
        dest = tmp_path / f"dest-{kind}"
        dest.write_text("first")
        if kind == "dir":
            stage.mkdir()
        else:
            stage.write_text("second")
        with pytest.raises(_commit.AlreadyExists):
            _commit.commit_no_replace(stage, dest, native=native)
        assert dest.read_text() == "first"
        assert stage.exists()
        dest.unlink()
        _commit.commit_no_replace(stage, dest, native=native)
        assert dest.exists() and not stage.exists()


def test_publish_file_keeps_the_writers_mode_and_content(tmp_path: Path) -> None:
    def write(stage: Path) -> None:
        assert stage.read_bytes() == b""
        stage.write_bytes(b'{"status":"complete"}\n')
        stage.chmod(0o600)

    done = publish_file(tmp_path / "protocol.json", write)
    assert done.path.read_bytes() == b'{"status":"complete"}\n'
    assert done.path.stat().st_mode & 0o777 == 0o600


def test_a_writer_that_replaces_its_file_fails(tmp_path: Path) -> None:
    def write(stage: Path) -> None:
        stage.unlink()
        stage.write_text("a new inode")

    with pytest.raises(InvalidInput):
        publish_file(tmp_path / "f", write)
    assert os.listdir(tmp_path) == []


def test_missing_parent_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        publish(tmp_path / "no" / "out", lambda draft: None)


def test_special_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        publish(tmp_path / "out", lambda draft: os.mkfifo(draft.path / "pipe"))
    assert not (tmp_path / "out").exists()


def test_retire_removes_the_pinned_tree_after_commit(tmp_path: Path) -> None:
    bundle = tmp_path / ".out.active"
    bundle.mkdir(mode=0o700)
    (bundle / "ckpt").write_text("c")
    done = publish(tmp_path / "out", lambda d: (d.path / "r").write_text("r"), retire=bundle)
    assert not done.cleanup_pending
    assert not bundle.exists()
    assert (tmp_path / "out" / "r").read_text() == "r"


def test_retire_is_preserved_when_the_build_fails(tmp_path: Path) -> None:
    bundle = tmp_path / ".out.active"
    bundle.mkdir(mode=0o700)

    def build(draft: Draft) -> None:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        publish(tmp_path / "out", build, retire=bundle)
    assert bundle.is_dir()


def test_a_shared_retire_tree_is_refused(tmp_path: Path) -> None:
    bundle = tmp_path / ".out.active"
    bundle.mkdir(mode=0o755)
    with pytest.raises(InvalidInput):
        publish(tmp_path / "out", lambda draft: None, retire=bundle)
    assert not (tmp_path / "out").exists()


def test_a_retire_tree_substituted_by_a_symlink_is_kept_and_reported(tmp_path: Path) -> None:
    bundle = tmp_path / ".out.active"
    bundle.mkdir(mode=0o700)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("keep")

    def build(draft: Draft) -> None:
        (draft.path / "r").write_text("r")
        os.rename(bundle, tmp_path / ".moved")
        bundle.symlink_to(precious)

    with pytest.warns(RuntimeWarning, match="could not be removed"):
        done = publish(tmp_path / "out", build, retire=bundle)
    assert done.cleanup_pending
    assert (tmp_path / "out" / "r").exists()
    assert (precious / "keep").read_text() == "keep"
    assert bundle.is_symlink()


def test_draft_link_accepts_regular_files_only(tmp_path: Path) -> None:
    source = tmp_path / "ckpt"
    source.write_text("weights")
    (tmp_path / "alias").symlink_to(source)

    def build(draft: Draft) -> None:
        draft.link(source, "nested/last.ckpt")
        with pytest.raises(InvalidInput):
            draft.link(tmp_path / "alias", "alias")
        with pytest.raises(InvalidInput):
            draft.link(source, "../escape")
        assert not (draft.path / "alias").exists()

    publish(tmp_path / "out", build)
    assert (tmp_path / "out" / "nested" / "last.ckpt").read_text() == "weights"
    assert (tmp_path / "out" / "nested" / "last.ckpt").stat().st_ino == source.stat().st_ino


def test_workspace_resumes_publishes_and_removes_its_private_tree(tmp_path: Path) -> None:
    dest = tmp_path / "model-1"
    with Workspace(dest, identity=b"request") as ws:
        (ws.path / "last.ckpt").write_text("epoch 1")
    with Workspace(dest, identity=b"request") as ws:  # a restart finds its checkpoint
        checkpoint = ws.path / "last.ckpt"
        assert checkpoint.read_text() == "epoch 1"
        done = ws.publish(lambda draft: draft.link(checkpoint, "last.ckpt"))
    assert not done.cleanup_pending
    assert (dest / "last.ckpt").read_text() == "epoch 1"
    assert os.listdir(tmp_path) == ["model-1"]


def test_workspace_lease_is_exclusive_and_children_share_it(tmp_path: Path) -> None:
    parent = Workspace(tmp_path / "study", identity=b"study")
    with Workspace(tmp_path / "study", identity=b"study"), pytest.raises(Conflict):
        parent.__enter__()
    first = parent.child("method-0", identity=b"m0")
    second = parent.child("method-1", identity=b"m1")
    with first, second:
        with pytest.raises(Conflict) as busy:
            parent.__enter__()
        assert busy.value.reference == "workspace-busy"
        with pytest.raises(Conflict):
            parent.child("method-0", identity=b"m0").__enter__()
        (first.path / "ckpt").write_text("m0")
        first.publish(lambda draft: draft.link(first.path / "ckpt", "result.bin"))
    with parent as ws:
        source = parent.path / "method-0" / "result.bin"
        ws.publish(lambda draft: draft.link(source, "method-0/result.bin"))
    assert (tmp_path / "study" / "method-0" / "result.bin").read_text() == "m0"
    with pytest.raises(InvalidInput):
        parent.child("../x", identity=b"x")


def test_workspace_symlink_substitution_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data").write_text("not yours to publish")
    ws = Workspace(tmp_path / "out", identity=b"id")
    with ws:
        os.rename(ws.path, tmp_path / "moved-work")
        ws.path.symlink_to(elsewhere)
        with pytest.raises(InvalidInput) as caught:
            ws.publish(lambda draft: draft.link(ws.path / "data", "data"))
    assert caught.value.reference == "workspace-unsafe"
    assert not (tmp_path / "out").exists()
    assert (elsewhere / "data").exists()
    # A private tree pre-planted as a link is refused when the workspace is opened.
    container = tmp_path / ".other.vqwork"
    container.mkdir(mode=0o700)
    ws2_home = Workspace(tmp_path / "probe", identity=b"z").home.name
    (container / ws2_home).symlink_to(elsewhere)
    with pytest.raises(InvalidInput):
        Workspace(tmp_path / "other", identity=b"z")


def test_workspace_home_substituted_during_build_is_cleanup_pending(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("keep")
    with Workspace(tmp_path / "out", identity=b"id") as ws:
        home = ws.home

        def build(draft: Draft) -> None:
            (draft.path / "r").write_text("r")
            os.rename(home, tmp_path / "moved-home")
            home.symlink_to(elsewhere)

        done = ws.publish(build)
    assert done.cleanup_pending
    assert (tmp_path / "out" / "r").exists()
    assert (elsewhere / "keep").read_text() == "keep"


def test_racing_threads_on_the_fallback_commit_have_one_winner(tmp_path: Path) -> None:
    stages = []
    for number in range(8):
        stage = tmp_path / f".s{number}"
        stage.mkdir()
        (stage / "who").write_text(str(number))
        stages.append(stage)
    winners: list[int] = []
    barrier = threading.Barrier(8)

    def race(number: int) -> None:
        barrier.wait()
        try:
            _commit.commit_no_replace(stages[number], tmp_path / "dest", native=False)
        except _commit.AlreadyExists:
            return
        winners.append(number)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(winners) == 1
    assert (tmp_path / "dest" / "who").read_text() == str(winners[0])


def test_sync_tree_handles_large_and_small_trees(tmp_path: Path) -> None:
    for count in (3, _commit.SYNCFS_THRESHOLD + 10):
        root = tmp_path / f"t{count}"
        root.mkdir()
        for number in range(count):
            (root / f"f{number}").write_text("x")
        (root / "link").symlink_to("f0")
        _commit.sync_tree(root)  # no error on links; every file opened without following
        assert len(os.listdir(root)) == count + 1


def test_copy_tree_keeps_modes_and_links_and_refuses_special_files(tmp_path: Path) -> None:
    from vq.publish import copy_tree

    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (source / "sub" / "run.sh").chmod(0o750)
    (source / "big").write_bytes(b"\x01" * (3 << 20))
    (source / "link").symlink_to("sub/run.sh")
    done = publish(tmp_path / "out", lambda draft: copy_tree(source, draft.path))
    assert (done.path / "sub" / "run.sh").stat().st_mode & 0o777 == 0o750
    assert (done.path / "big").read_bytes() == b"\x01" * (3 << 20)
    assert os.readlink(done.path / "link") == "sub/run.sh"
    os.mkfifo(source / "pipe")
    with pytest.raises(InvalidInput):
        publish(tmp_path / "out2", lambda draft: copy_tree(source, draft.path))
    assert not (tmp_path / "out2").exists()
    assert [e for e in os.listdir(tmp_path) if ".vqstage-" in e] == []
