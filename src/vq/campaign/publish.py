"""Publishing the outputs of a succeeded attempt into ``artifacts/`` (controller relay).

For each output not yet verified: hash it in the fetched copy under
``incoming/<node>/<attempt>/`` (links and special files refused), then publish it at
``artifacts/<node>/<attempt>/<output>`` through :mod:`vq.publish`: the copy is built in a
hidden stage beside it (``.<output>.vqstage-…``; a directory's files are hard-linked from
the fetched copy, which is private to the run directory and removed right after, and
copied when that is impossible), verified there against the manifest,
synced, and committed no-replace, so ``artifacts/`` only ever holds a complete, verified
copy. ``<output>.manifest.json`` is written beside it afterwards. A copy already in place
(a publish interrupted before its journal record) is kept when it verifies against the
manifest, and removed and published again when it does not. The journal record says what
happened: ``verified`` with the manifest's digest, or the worst problem. The fetched copy
is removed once every output was handled, and only then is each verified output sealed
(:func:`vq.campaign.published.seal_published`: its files' stat keys, which the
removal of the hard-linked fetched copy would otherwise change).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from vq._fs import atomic_write_json
from vq.campaign.files import LoadedCampaign, build_manifest, hash_output
from vq.campaign.journal import Attempt, OutputRecord
from vq.campaign.model import Node, Output
from vq.campaign.planner import REPUBLISH_STATUSES
from vq.campaign.published import seal_published
from vq.campaign.rundir import RunDir
from vq.domain.artifact import (
    ArtifactManifest,
    VerifyProblem,
    compare,
    manifest_sha256,
    verdict,
)
from vq.errors import InvalidInput, NotFound, UnsafeArchive
from vq.publish import Draft, copy_tree, publish, publish_file
from vq.store.campaign_tree import observe

__all__ = ["pending_outputs", "publish_outputs"]


def pending_outputs(node: Node, attempt: Attempt) -> list[Output]:
    """The outputs of a succeeded attempt that a publish should (re)try."""
    out = []
    for output in node.outputs:
        record = attempt.output(output.name)
        if record is None or record.status in REPUBLISH_STATUSES:
            out.append(output)
    return out


def publish_outputs(
    loaded: LoadedCampaign,
    run_dir: RunDir,
    node: Node,
    attempt: Attempt,
    fetched: Path,
    skipped: list[dict[str, str]],
) -> list[OutputRecord]:
    """Publish every pending output of ``attempt`` from the fetched workspace ``fetched``;
    the new records (the caller stores them in the journal)."""
    records = []
    for output in pending_outputs(node, attempt):
        records.append(_publish_one(loaded, run_dir, node, attempt, output, fetched, skipped))
    shutil.rmtree(fetched, ignore_errors=True)
    for record in records:
        if record.status == "verified" and record.manifest_sha256:
            seal_published(run_dir, node.id, attempt.attempt, record.name, record.manifest_sha256)
    return records


def _publish_one(
    loaded: LoadedCampaign,
    run_dir: RunDir,
    node: Node,
    attempt: Attempt,
    output: Output,
    fetched: Path,
    skipped: list[dict[str, str]],
) -> OutputRecord:
    name = output.name
    left_out = [
        item
        for item in skipped
        if item["path"] == output.path or item["path"].startswith(output.path + "/")
    ]
    if left_out:
        return OutputRecord(
            name=name,
            status="unsafe",
            message=f"{left_out[0]['path']} is a link or special file ({left_out[0]['reason']})",
        )
    try:
        entries = hash_output(fetched, output)
    except NotFound:
        return OutputRecord(name=name, status="missing", message="the job did not leave it")
    except (UnsafeArchive, InvalidInput) as exc:
        return OutputRecord(name=name, status="unsafe", message=exc.message)
    manifest = build_manifest(loaded, node, attempt.attempt, output, entries, attempt.runtime)
    final = run_dir.artifact(node.id, attempt.attempt, name)
    final.parent.mkdir(parents=True, exist_ok=True)
    if compare(manifest, observe(final)):  # absent, or not this output's bytes
        _remove(final)
        try:
            _publish_verified(fetched / output.path, final, output, manifest)
        except _CopyDiffers as differs:
            first = differs.problems[0]
            return OutputRecord.model_validate(
                {
                    "name": name,
                    "status": verdict(differs.problems),
                    "message": f"{first.path}: {first.message}",
                }
            )
    atomic_write_json(
        run_dir.manifest(node.id, attempt.attempt, name),
        manifest.model_dump(mode="json", exclude_none=True),
    )
    return OutputRecord(name=name, status="verified", manifest_sha256=manifest_sha256(manifest))


class _CopyDiffers(Exception):
    """The staged copy is not what the manifest lists (nothing was committed)."""

    def __init__(self, problems: list[VerifyProblem]) -> None:
        super().__init__(problems[0].message)
        self.problems = problems


def _publish_verified(
    source: Path, final: Path, output: Output, manifest: ArtifactManifest
) -> None:
    """Copy ``source`` to ``final`` through a hidden stage, committing it only when the
    staged copy verifies against ``manifest`` (:class:`_CopyDiffers` otherwise)."""

    def check(staged: Path) -> None:
        problems = compare(manifest, observe(staged))
        if problems:
            raise _CopyDiffers(problems)

    if output.kind == "directory":

        def build(draft: Draft) -> None:
            try:
                _link_tree(source, draft, PurePosixPath())
            except InvalidInput:  # another filesystem, or not a plain tree: copy instead
                for child in list(draft.path.iterdir()):
                    _remove(child)
                copy_tree(source, draft.path)
            check(draft.path)

        publish(final, build)
    else:

        def write(staged: Path) -> None:
            with source.open("rb") as src, staged.open("r+b") as dst:
                shutil.copyfileobj(src, dst)
            check(staged)

        publish_file(final, write)


def _link_tree(source: Path, draft: Draft, rel: PurePosixPath) -> None:
    """Hard-link every regular file under ``source`` into ``draft`` (directories made):
    the fetched copy is private to this run directory and removed right after, so the
    artifact takes over its inodes instead of writing the bytes again. Anything but a
    directory or a regular file is :class:`InvalidInput` (the caller copies instead)."""
    with os.scandir(source / rel if rel.parts else source) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        child = rel / entry.name
        if entry.is_dir(follow_symlinks=False):
            draft.path.joinpath(*child.parts).mkdir()
            _link_tree(source, draft, child)
        elif entry.is_file(follow_symlinks=False):
            draft.link(entry.path, child)
        else:
            raise InvalidInput(f"{child} is neither a directory nor a regular file")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
