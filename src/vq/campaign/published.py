"""Whether each published artifact is still the copy that was verified, checked cheaply
enough for every ``vq campaign status``, ``run`` and console refresh.

A published output is verified once, when the controller publishes it
(:mod:`vq.campaign.publish`); nothing stops a person or a program from editing
``artifacts/`` afterwards, and the journal would go on saying ``verified``.
:func:`check_published` looks again at every output the journal records as verified:

* its manifest must still be the one the journal recorded (its ``manifest_sha256``);
* its copy must still match that manifest, entry by entry, as
  ``vq campaign artifact-verify`` checks it: the same paths, types and sizes, nothing
  added, and the same bytes. The bytes are read and hashed only for a file whose
  :func:`~vq.store.campaign_tree.stat_key` (inode, size, mtime, ctime) differs from the
  seal :func:`seal_published` wrote once the output was published (or when there is no
  seal): an untouched artifact costs one ``lstat`` per entry, an edited one, even of the
  same size with its old mtime put back, has a new ctime and is hashed.

The verdict of each (:class:`PublishedCopy`): ``verified``; ``tampered`` (the copy or its
manifest differs; the first difference is named); ``missing`` (the copy is gone); or
``cleaned_up`` (gone because ``vq campaign cleanup --intermediate`` may remove it: a
consumed output every consumer is done with). Nothing here writes but
:func:`seal_published`, and nothing here raises for what it finds.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from vq._fs import atomic_write_json, read_json_regular
from vq.campaign.cleanup_rules import intermediate_outputs
from vq.campaign.files import LoadedCampaign, read_manifest
from vq.campaign.journal import Attempt, Journal, OutputRecord
from vq.campaign.planner import CampaignPlan, CampaignPlanJSON
from vq.campaign.rundir import RunDir
from vq.domain.artifact import compare, manifest_sha256
from vq.errors import VqError
from vq.store.campaign_tree import file_keys, observe, stat_key

__all__ = ["CopyStatus", "PublishedCopy", "check_published", "seal_published"]

CopyStatus = Literal["verified", "tampered", "missing", "cleaned_up"]
#: The statuses that mean the published copy is not what was verified.
NOT_AS_VERIFIED = frozenset({"tampered", "missing"})
_SEAL_SCHEMA = "vq.campaign-seal/1"
_SEAL_LIMIT = 64 << 20


class PublishedCopyJSON(TypedDict):
    """A :class:`PublishedCopy` in ``vq campaign status --json``'s ``artifacts``."""

    node: str
    attempt: int
    output: str
    status: CopyStatus
    path: str
    problem: str | None


class CampaignStatusJSON(CampaignPlanJSON):
    """``vq campaign status --json``: the plan, the campaign, its journal's attempts (each
    as its record dumps it) and, once checked, the published copies' verdicts."""

    campaign_id: str
    campaign_sha256: str
    attempts: list[dict[str, Any]]
    artifacts: NotRequired[list[PublishedCopyJSON]]
    #: ``vq campaign run --json`` only
    needs_attention: NotRequired[list[str]]
    passes: NotRequired[int]


@dataclass(frozen=True)
class PublishedCopy:
    """The verdict on one published output of one attempt."""

    node: str
    attempt: int
    output: str
    status: CopyStatus
    path: Path
    problem: str | None = None

    @property
    def as_verified(self) -> bool:
        """False when the copy is not what was verified (tampered or missing)."""
        return self.status not in NOT_AS_VERIFIED

    def as_dict(self) -> PublishedCopyJSON:
        return {
            "node": self.node,
            "attempt": self.attempt,
            "output": self.output,
            "status": self.status,
            "path": str(self.path),
            "problem": self.problem,
        }

    def attention(self) -> str:
        """The line for "Needs attention" (only for a copy that is not as verified)."""
        what = f"{self.node} attempt {self.attempt}: published output {self.output}"
        if self.status == "missing":
            return f"{what} is missing ({self.path}); the journal says it was verified"
        return (
            f"{what} is tampered: {self.problem}; it no longer matches what was verified "
            f"(`vq campaign artifact-verify` names every difference)"
        )


def seal_published(run_dir: RunDir, node: str, attempt: int, output: str, digest: str) -> None:
    """Record the stat keys of a just-published output's files (its manifest ``digest``
    named), so later checks skip reading the files nobody touched. Best effort: without a
    seal every check reads the files, which is slower and as exact."""
    with contextlib.suppress(OSError):
        keys = file_keys(run_dir.artifact(node, attempt, output))
        seal = {"schema_name": _SEAL_SCHEMA, "manifest_sha256": digest, "files": keys}
        atomic_write_json(run_dir.seal(node, attempt, output), seal)


def check_published(
    loaded: LoadedCampaign, run_dir: RunDir, journal: Journal, current: CampaignPlan
) -> list[PublishedCopy]:
    """A verdict for every output the journal records as verified, in journal order."""
    removable = {
        (item.node, item.attempt, item.output)
        for item in intermediate_outputs(loaded.campaign, journal, current)
    }
    found = []
    for attempt in journal.attempts:
        if attempt.state != "succeeded":
            continue
        for record in attempt.outputs:
            if record.status == "verified" and record.manifest_sha256:
                found.append(_check(run_dir, attempt, record, removable))
    return found


def _check(
    run_dir: RunDir,
    attempt: Attempt,
    record: OutputRecord,
    removable: set[tuple[str, int, str]],
) -> PublishedCopy:
    node, number, name = attempt.node, attempt.attempt, record.name
    copy = run_dir.artifact(node, number, name)

    def verdict(status: CopyStatus, problem: str | None = None) -> PublishedCopy:
        return PublishedCopy(node, number, name, status, copy, problem)

    if not os.path.lexists(copy):
        gone: CopyStatus = "cleaned_up" if (node, number, name) in removable else "missing"
        return verdict(gone)
    try:
        manifest = read_manifest(run_dir.manifest(node, number, name))
    except VqError as exc:
        return verdict("tampered", f"its manifest cannot be read ({exc.message})")
    if manifest_sha256(manifest) != record.manifest_sha256:
        return verdict("tampered", "its manifest is not the one the journal recorded")
    sealed = _seal(run_dir, node, number, name, record.manifest_sha256)
    digests = {entry.path: entry.sha256 for entry in manifest.entries if entry.type == "file"}

    def known(rel: str, info: os.stat_result) -> str | None:
        return digests.get(rel) if sealed.get(rel) == stat_key(info) else None

    try:
        problems = compare(manifest, observe(copy, known))
    except OSError as exc:
        return verdict("tampered", f"it cannot be read ({exc.strerror})")
    if problems:
        first = problems[0]
        more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
        return verdict("tampered", f"{first.path}: {first.message} ({first.status}){more}")
    return verdict("verified")


def _seal(run_dir: RunDir, node: str, attempt: int, output: str, digest: str) -> dict[str, Any]:
    """The seal's stat keys by path, or nothing (no seal, another manifest, unreadable)."""
    try:
        seal = read_json_regular(run_dir.seal(node, attempt, output), _SEAL_LIMIT)
    except (OSError, ValueError):
        return {}
    if (
        not isinstance(seal, dict)
        or seal.get("schema_name") != _SEAL_SCHEMA
        or seal.get("manifest_sha256") != digest
        or not isinstance(seal.get("files"), dict)
    ):
        return {}
    files: dict[str, Any] = seal["files"]
    return files
