"""Campaign files on disk: reading a campaign, pinning sources, publishing and verifying
artifacts. The rules are the pure :mod:`vq.campaign`; the hashing is
:mod:`vq.store.campaign_tree`.

Contracts:

* :func:`read_campaign` returns a campaign that passed every structural rule, with its
  digest, or raises: NotFound (exit 3), InvalidInput for bad JSON (exit 4), CampaignRefused
  listing every problem (exit 4). It never reads the sources.
* :func:`check_sources` hashes each node's sources directory (links and special files
  refused, even as a component of ``sources.path``) and compares the digest with its pin.
* :func:`publish` hashes one output of a finished workspace into a manifest; it refuses
  links and special files anywhere in the output and in the path leading to it.
* :func:`verify` compares a staged copy with a manifest; it never raises for what it
  finds in the copy.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from vq._fs import FileTooLarge, NotRegularFile, read_regular
from vq.campaign.checks import check_campaign, check_source_placement
from vq.campaign.model import (
    Campaign,
    CampaignRefused,
    Node,
    Output,
    campaign_sha256,
    parse_campaign,
)
from vq.campaign.problems import Problem, ProblemJSON
from vq.domain.artifact import (
    ArtifactEntry,
    ArtifactManifest,
    VerifyProblem,
    compare,
    entries_sha256,
    parse_manifest,
    verdict,
)
from vq.errors import InvalidInput, NotFound, UnsafeArchive
from vq.store.campaign_tree import descend, hash_strict, observe

__all__ = [
    "LoadedCampaign",
    "SourcesCheck",
    "build_manifest",
    "check_sources",
    "hash_output",
    "publish",
    "read_campaign",
    "read_json_file",
    "read_manifest",
    "verify",
]

MAX_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class LoadedCampaign:
    campaign: Campaign
    digest: str
    path: Path

    @property
    def base_dir(self) -> Path:
        return self.path.parent


def read_json_file(path: Path, what: str) -> Any:
    """The decoded JSON of ``path``: NotFound when absent, InvalidInput when unreadable."""
    try:
        data = read_regular(path, MAX_FILE_BYTES, follow=True)  # a FIFO never blocks
    except (FileNotFoundError, NotADirectoryError):
        raise NotFound(f"the {what} {path} does not exist") from None
    except NotRegularFile as exc:
        raise InvalidInput(f"the {what} {path} {exc.strerror}") from None
    except FileTooLarge:
        raise InvalidInput(f"the {what} {path} is larger than {MAX_FILE_BYTES} bytes") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read the {what} {path}: {exc.strerror}") from None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidInput(
            f"the {what} {path} is not valid JSON ({exc})",
            hint="the file format is described in docs/campaigns.md",
        ) from None


def read_campaign(path: Path) -> LoadedCampaign:
    """The campaign in ``path`` after every structural check (module contract)."""
    campaign = parse_campaign(read_json_file(path, "campaign file"), source=str(path))
    problems = check_campaign(campaign)
    if problems:
        raise CampaignRefused(str(path), problems)
    return LoadedCampaign(campaign, campaign_sha256(campaign), path)


class SourcesCheckJSON(TypedDict):
    """A :class:`SourcesCheck` in ``vq campaign check --json``'s ``sources``."""

    node: str
    path: str
    sha256: str
    actual_sha256: str | None
    entries: int
    ok: bool
    problems: list[ProblemJSON]


@dataclass
class SourcesCheck:
    """One node's sources: the pin, the digest found (None when unreadable), the problems."""

    node: str
    path: str
    pinned: str
    actual: str | None = None
    entries: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> SourcesCheckJSON:
        return {
            "node": self.node,
            "path": self.path,
            "sha256": self.pinned,
            "actual_sha256": self.actual,
            "entries": self.entries,
            "ok": self.ok,
            "problems": [problem.as_dict() for problem in self.problems],
        }


def check_sources(loaded: LoadedCampaign) -> list[SourcesCheck]:
    """Hash every node's sources and compare each with its pin, in file order."""
    return [_check_node(loaded.base_dir, node) for node in loaded.campaign.nodes if node.sources]


def _check_node(base_dir: Path, node: Node) -> SourcesCheck:
    assert node.sources is not None
    result = SourcesCheck(node.id, node.sources.path, node.sources.sha256)
    try:
        opened = descend(base_dir, node.sources.path, "campaign directory")
    except (UnsafeArchive, NotFound) as exc:
        result.problems.append(Problem(node.id, "sources.path", exc.message))
        return result
    if opened is None:
        result.problems.append(
            Problem(node.id, "sources.path", f"{node.sources.path!r} is missing")
        )
        return result
    fd, info = opened
    try:
        if not stat.S_ISDIR(info.st_mode):
            result.problems.append(
                Problem(node.id, "sources.path", f"{node.sources.path!r} is not a directory")
            )
            return result
        entries = hash_strict(fd, info, f"sources of {node.id}")
    except UnsafeArchive as exc:
        result.problems.append(Problem(node.id, "sources.path", exc.message))
        return result
    finally:
        os.close(fd)
    result.actual = entries_sha256(entries)
    result.entries = len(entries)
    if result.actual != node.sources.sha256:
        result.problems.append(
            Problem(
                node.id,
                "sources.sha256",
                f"does not match {node.sources.path!r}, whose digest is {result.actual}",
            )
        )
    result.problems.extend(
        check_source_placement(node, [(entry.path, entry.type) for entry in entries])
    )
    return result


def publish(
    loaded: LoadedCampaign,
    workspace: Path,
    node_id: str,
    attempt: int,
    output_name: str,
    executed_runtime: dict[str, Any] | None = None,
) -> ArtifactManifest:
    """The ``vq.campaign-artifact/1`` manifest of ``output_name`` in ``workspace``."""
    node = loaded.campaign.node(node_id)
    if node is None:
        raise NotFound(
            f"the campaign has no node {node_id!r}",
            hint="nodes: " + ", ".join(loaded.campaign.node_ids()),
        )
    output = node.output(output_name)
    if output is None:
        names = ", ".join(out.name for out in node.outputs) or "none"
        raise NotFound(
            f"node {node_id!r} declares no output {output_name!r}", hint=f"outputs: {names}"
        )
    if attempt < 1:
        raise InvalidInput(f"--attempt must be 1 or more, not {attempt}")
    entries = hash_output(workspace, output)
    return build_manifest(loaded, node, attempt, output, entries, executed_runtime)


def hash_output(workspace: Path, output: Output) -> list[ArtifactEntry]:
    """The entries of ``output`` in ``workspace``: NotFound when the job did not leave it,
    UnsafeArchive for a link or special file, InvalidInput for the wrong kind."""
    opened = descend(workspace, output.path, f"workspace {workspace}")
    if opened is None:
        raise NotFound(
            f"output {output.name!r} ({output.path}) is not in the workspace {workspace}",
            hint="an output the job did not leave cannot be published",
        )
    fd, info = opened
    try:
        entries = hash_strict(fd, info, f"output {output.name!r}")
    finally:
        os.close(fd)
    found = "file" if entries and entries[0].path == "." else "directory"
    if found != output.kind:
        raise InvalidInput(
            f"output {output.name!r} ({output.path}) is a {found}; the campaign declares a "
            f"{output.kind}"
        )
    return entries


def build_manifest(
    loaded: LoadedCampaign,
    node: Node,
    attempt: int,
    output: Output,
    entries: list[ArtifactEntry],
    executed_runtime: dict[str, Any] | None,
) -> ArtifactManifest:
    """The manifest of ``output`` of ``node``'s attempt ``attempt`` with these entries."""
    return ArtifactManifest(
        schema_name="vq.campaign-artifact/1",
        campaign_sha256=loaded.digest,
        node=node.id,
        attempt=attempt,
        output=output.name,
        kind=output.kind,
        runtime_digest=node.runtime_digest,
        entries=entries,
        entries_sha256=entries_sha256(entries),
        executed_runtime=executed_runtime,
    )


def read_manifest(path: Path) -> ArtifactManifest:
    return parse_manifest(read_json_file(path, "manifest"), source=str(path))


def verify(manifest: ArtifactManifest, copy: Path) -> tuple[str, list[VerifyProblem]]:
    """(``verified`` or the worst status, every problem worst first) of ``copy``."""
    problems = compare(manifest, observe(copy))
    return verdict(problems), problems
