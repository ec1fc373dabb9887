"""Staging a node's payload: its sources, then its inputs from verified artifacts.

Contracts:

* The expected payload is derived, never remembered: the sources directory's entries
  (whose digest must still equal the pin) plus every input's manifest entries placed at
  the input's path (and the directories leading to it). A manifest on disk whose digest
  is not the one the journal bound is refused.
* :func:`stage_payload` builds ``payloads/<node>/<attempt>.staging``, compares it with
  the expected tree, and only then renames it to ``payloads/<node>/<attempt>``; a copy
  that differs is removed and refused.
* :func:`check_payload` compares an existing payload with the expected tree before a
  resend; a changed payload is never sent.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from vq.campaign.files import LoadedCampaign, read_manifest
from vq.campaign.journal import InputBinding
from vq.campaign.model import Node
from vq.campaign.rundir import RunDir
from vq.domain.artifact import (
    ArtifactEntry,
    VerifyProblem,
    compare_entries,
    entries_sha256,
    manifest_sha256,
)
from vq.errors import Conflict, NotFound, UnsafeArchive
from vq.store.campaign_tree import descend, hash_strict, observe

__all__ = ["check_payload", "expected_payload", "stage_payload"]


def _sources_dir(loaded: LoadedCampaign, node: Node) -> tuple[Path, list[ArtifactEntry]] | None:
    if node.sources is None:
        return None
    opened = descend(loaded.base_dir, node.sources.path, "campaign directory")
    if opened is None:
        raise NotFound(f"{node.id}: the sources directory {node.sources.path!r} is missing")
    fd, info = opened
    try:
        entries = hash_strict(fd, info, f"sources of {node.id}")
    finally:
        os.close(fd)
    if entries_sha256(entries) != node.sources.sha256:
        raise Conflict(
            f"{node.id}: the sources directory {node.sources.path!r} no longer matches its pin",
            hint="`vq campaign validate` prints its digest; an edited script is a new campaign",
        )
    return loaded.base_dir / node.sources.path, entries


def expected_payload(
    loaded: LoadedCampaign, run_dir: RunDir, node: Node, bindings: list[InputBinding]
) -> list[ArtifactEntry]:
    """Every entry the payload of ``node`` staged from ``bindings`` must hold."""
    entries: dict[str, ArtifactEntry] = {}
    sources = _sources_dir(loaded, node)
    if sources is not None:
        entries.update((entry.path, entry) for entry in sources[1])
    by_name = {binding.name: binding for binding in bindings}
    for item in node.inputs:
        binding = by_name[item.name]
        manifest = read_manifest(
            run_dir.manifest(binding.producer, binding.attempt, binding.output)
        )
        if manifest_sha256(manifest) != binding.manifest_sha256:
            raise Conflict(
                f"{node.id}: input {item.name}: the manifest of {binding.producer} attempt "
                f"{binding.attempt} is not the one the journal bound",
            )
        parts = item.path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            entries.setdefault(parent, ArtifactEntry(path=parent, type="directory", size=0))
        for entry in manifest.entries:
            path = item.path if entry.path == "." else f"{item.path}/{entry.path}"
            entries[path] = entry.model_copy(update={"path": path})
        if manifest.kind == "directory":
            entries[item.path] = ArtifactEntry(path=item.path, type="directory", size=0)
    return sorted(entries.values(), key=lambda entry: entry.path)


def check_payload(
    loaded: LoadedCampaign, run_dir: RunDir, node: Node, attempt: int, bindings: list[InputBinding]
) -> list[VerifyProblem]:
    """The differences between the staged payload and what it must hold (worst first)."""
    expected = expected_payload(loaded, run_dir, node, bindings)
    return compare_entries("directory", expected, observe(run_dir.payload(node.id, attempt)))


def stage_payload(
    loaded: LoadedCampaign, run_dir: RunDir, node: Node, attempt: int, bindings: list[InputBinding]
) -> Path:
    """Build and verify the payload of ``node``'s attempt ``attempt`` (module contract)."""
    expected = expected_payload(loaded, run_dir, node, bindings)
    final = run_dir.payload(node.id, attempt)
    staging = final.with_name(final.name + ".staging")
    for leftover in (staging, final):
        if leftover.exists() or leftover.is_symlink():
            shutil.rmtree(leftover)
    staging.parent.mkdir(parents=True, exist_ok=True)
    try:
        sources = _sources_dir(loaded, node)
        if sources is not None:
            shutil.copytree(sources[0], staging, symlinks=True)
        else:
            staging.mkdir()
        by_name = {binding.name: binding for binding in bindings}
        for item in node.inputs:
            binding = by_name[item.name]
            artifact = run_dir.artifact(binding.producer, binding.attempt, binding.output)
            target = staging / item.path
            target.parent.mkdir(parents=True, exist_ok=True)
            if artifact.is_dir() and not artifact.is_symlink():
                shutil.copytree(artifact, target, symlinks=True)
            else:
                shutil.copyfile(artifact, target, follow_symlinks=False)
        problems = compare_entries("directory", expected, observe(staging))
        if problems:
            first = problems[0]
            raise UnsafeArchive(
                f"{node.id}: the staged payload differs from its sources and manifests: "
                f"{first.status} {first.path} ({first.message})",
                hint="the artifacts or sources changed on disk; the payload is not sent",
            )
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final
