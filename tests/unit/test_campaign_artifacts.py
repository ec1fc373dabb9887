"""Publishing and verifying artifacts on real files: each status from a real corruption."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.campaign_support import raw
from vq.campaign.files import LoadedCampaign, publish, read_campaign, verify
from vq.domain.artifact import ArtifactManifest, parse_manifest
from vq.errors import InvalidInput, NotFound, UnsafeArchive


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedCampaign:
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(raw()))
    return read_campaign(path)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "out" / "sub").mkdir(parents=True)
    (ws / "out" / "energy.txt").write_bytes(b"-76.0266327341\n" * 100)
    (ws / "out" / "sub" / "orbitals.bin").write_bytes(os.urandom(70_000))
    (ws / "verdict.json").write_text('{"ok": true}\n')
    return ws


def published(
    loaded: LoadedCampaign, workspace: Path, tmp_path: Path
) -> tuple[ArtifactManifest, Path]:
    manifest = publish(loaded, workspace, "calculate", 1, "result")
    copy = tmp_path / "copy"
    shutil.copytree(workspace / "out", copy)
    return manifest, copy


def statuses(manifest: ArtifactManifest, copy: Path) -> list[tuple[str, str]]:
    _status, problems = verify(manifest, copy)
    return [(p.status, p.path) for p in problems]


def test_a_faithful_copy_is_verified(
    loaded: LoadedCampaign, workspace: Path, tmp_path: Path
) -> None:
    manifest, copy = published(loaded, workspace, tmp_path)
    assert [e.path for e in manifest.entries] == ["energy.txt", "sub", "sub/orbitals.bin"]
    assert manifest.campaign_sha256 == loaded.digest
    assert (manifest.node, manifest.attempt, manifest.output, manifest.kind) == (
        "calculate",
        1,
        "result",
        "directory",
    )
    assert verify(manifest, copy) == ("verified", [])
    assert parse_manifest(manifest.model_dump(mode="json")) == manifest


def test_a_changed_byte_is_a_digest_mismatch(
    loaded: LoadedCampaign, workspace: Path, tmp_path: Path
) -> None:
    manifest, copy = published(loaded, workspace, tmp_path)
    target = copy / "sub" / "orbitals.bin"
    data = bytearray(target.read_bytes())
    data[12345] ^= 0x01
    target.write_bytes(bytes(data))
    assert statuses(manifest, copy) == [("digest_mismatch", "sub/orbitals.bin")]


def test_a_missing_file_is_missing(loaded: LoadedCampaign, workspace: Path, tmp_path: Path) -> None:
    manifest, copy = published(loaded, workspace, tmp_path)
    (copy / "energy.txt").unlink()
    assert statuses(manifest, copy) == [("missing", "energy.txt")]


def test_an_absent_copy_is_missing(loaded: LoadedCampaign, workspace: Path, tmp_path: Path) -> None:
    manifest, copy = published(loaded, workspace, tmp_path)
    shutil.rmtree(copy)
    assert statuses(manifest, copy) == [("missing", ".")]


def test_an_extra_file_is_unexpected(
    loaded: LoadedCampaign, workspace: Path, tmp_path: Path
) -> None:
    manifest, copy = published(loaded, workspace, tmp_path)
    (copy / "sub" / "stray.tmp").write_text("x")
    assert statuses(manifest, copy) == [("unexpected", "sub/stray.tmp")]


def test_a_symlink_is_unsafe(loaded: LoadedCampaign, workspace: Path, tmp_path: Path) -> None:
    manifest, copy = published(loaded, workspace, tmp_path)
    (copy / "energy.txt").unlink()
    (copy / "energy.txt").symlink_to(workspace / "out" / "energy.txt")  # same bytes behind it
    assert statuses(manifest, copy) == [("unsafe", "energy.txt")]


def test_a_linked_copy_root_is_unsafe(
    loaded: LoadedCampaign, workspace: Path, tmp_path: Path
) -> None:
    manifest, _copy = published(loaded, workspace, tmp_path)
    link = tmp_path / "linked"
    link.symlink_to(workspace / "out")
    assert statuses(manifest, link) == [("unsafe", ".")]


def test_a_truncated_file_is_partial(
    loaded: LoadedCampaign, workspace: Path, tmp_path: Path
) -> None:
    manifest, copy = published(loaded, workspace, tmp_path)
    os.truncate(copy / "sub" / "orbitals.bin", 50_000)
    assert statuses(manifest, copy) == [("partial", "sub/orbitals.bin")]


def test_a_file_where_a_directory_belongs_is_unsafe(
    loaded: LoadedCampaign, workspace: Path, tmp_path: Path
) -> None:
    manifest, copy = published(loaded, workspace, tmp_path)
    shutil.rmtree(copy / "sub")
    (copy / "sub").write_text("not a directory")
    assert statuses(manifest, copy) == [("unsafe", "sub")]  # its children are not repeated


def test_problems_come_worst_first(loaded: LoadedCampaign, workspace: Path, tmp_path: Path) -> None:
    manifest, copy = published(loaded, workspace, tmp_path)
    (copy / "zz-extra").write_text("x")
    os.truncate(copy / "energy.txt", 3)
    (copy / "sub" / "orbitals.bin").unlink()
    os.mkfifo(copy / "sub" / "pipe")
    status, problems = verify(manifest, copy)
    assert [p.status for p in problems] == ["unsafe", "missing", "partial", "unexpected"]
    assert status == "unsafe"


def test_a_file_output_is_published_and_verified(
    loaded: LoadedCampaign, workspace: Path, tmp_path: Path
) -> None:
    manifest = publish(loaded, workspace, "validate", 2, "verdict")
    assert [(e.path, e.type, e.size) for e in manifest.entries] == [(".", "file", 13)]
    copy = tmp_path / "verdict-copy.json"
    shutil.copyfile(workspace / "verdict.json", copy)
    assert verify(manifest, copy) == ("verified", [])
    copy.write_text('{"ok": false}\n')
    assert statuses(manifest, copy) == [("digest_mismatch", ".")]


def test_publish_refuses_a_link_inside_the_output(loaded: LoadedCampaign, workspace: Path) -> None:
    (workspace / "out" / "sub" / "escape").symlink_to("/etc/passwd")
    with pytest.raises(UnsafeArchive, match=r"sub/escape.*symbolic link"):
        publish(loaded, workspace, "calculate", 1, "result")


def test_publish_refuses_a_linked_path_component(loaded: LoadedCampaign, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    (real / "sub").mkdir(parents=True)
    (real / "sub" / "x").write_text("x")
    ws = tmp_path / "ws2"
    ws.mkdir()
    (ws / "out").symlink_to(real)
    with pytest.raises(UnsafeArchive, match=r"'out'.*symbolic link"):
        publish(loaded, ws, "calculate", 1, "result")


def test_publish_refuses_a_special_file(loaded: LoadedCampaign, workspace: Path) -> None:
    os.mkfifo(workspace / "out" / "fifo")
    with pytest.raises(UnsafeArchive, match="special file"):
        publish(loaded, workspace, "calculate", 1, "result")


def test_publish_refuses_a_missing_output_and_a_wrong_kind(
    loaded: LoadedCampaign, workspace: Path
) -> None:
    shutil.rmtree(workspace / "out")
    with pytest.raises(NotFound, match="not in the workspace"):
        publish(loaded, workspace, "calculate", 1, "result")
    (workspace / "out").write_text("a file, not a directory")
    with pytest.raises(InvalidInput, match="is a file; the campaign declares a directory"):
        publish(loaded, workspace, "calculate", 1, "result")


def test_an_edited_manifest_is_refused(loaded: LoadedCampaign, workspace: Path) -> None:
    data = publish(loaded, workspace, "calculate", 1, "result").model_dump(mode="json")
    data["entries"][0]["size"] += 1
    with pytest.raises(InvalidInput, match="entries_sha256 does not match"):
        parse_manifest(data)
    data = publish(loaded, workspace, "calculate", 1, "result").model_dump(mode="json")
    data["origin"] = "somewhere"
    with pytest.raises(InvalidInput, match="origin"):
        parse_manifest(data)


def test_the_named_workspace_may_be_reached_through_a_link(
    loaded: LoadedCampaign, workspace: Path, tmp_path: Path
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(workspace)
    assert publish(loaded, alias, "calculate", 1, "result") == publish(
        loaded, workspace, "calculate", 1, "result"
    )
