"""``vq.campaign-artifact/1`` manifests and the comparison of a staged copy with one.

An entry is ``{path, type, size, sha256}``: ``type`` is ``file`` or ``directory``; a
directory has size 0 and no sha256. A directory output lists every entry below it, parents
before children, sorted by path; a file output has the single entry ``"."`` (the file).

:func:`compare` is pure: it takes what a walk of the copy observed (see
:mod:`vq.campaign.files`) and returns every problem, worst first. The statuses,
from worst to mildest, are :data:`STATUSES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vq.domain.canonical import sha256_of
from vq.domain.validation_words import JSON_WORDS, describe
from vq.errors import InvalidInput

__all__ = [
    "ARTIFACT_SCHEMA",
    "STATUSES",
    "ArtifactEntry",
    "ArtifactManifest",
    "Observed",
    "VerifyProblem",
    "compare",
    "compare_entries",
    "entries_sha256",
    "manifest_sha256",
    "parse_manifest",
    "verdict",
]

ARTIFACT_SCHEMA = "vq.campaign-artifact/1"
#: Verification problems, worst first.
STATUSES = ("unsafe", "missing", "partial", "digest_mismatch", "unexpected")
#: The status of a copy that matches its manifest exactly.
VERIFIED = "verified"


class ArtifactEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    path: str
    type: Literal["file", "directory"]
    size: int = Field(ge=0)
    sha256: str | None = None


class ArtifactManifest(BaseModel):
    """What a producer attempt published for one output (unknown fields are refused)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_name: Literal["vq.campaign-artifact/1"]
    campaign_sha256: str
    node: str
    attempt: int = Field(ge=1)
    output: str
    kind: Literal["file", "directory"]
    runtime_digest: str | None = None
    entries: list[ArtifactEntry]
    entries_sha256: str
    executed_runtime: dict[str, Any] | None = None


def entries_sha256(entries: list[ArtifactEntry]) -> str:
    """The digest of a tree: every entry's path, type, size and SHA-256, in path order."""
    ordered = sorted(entries, key=lambda entry: entry.path)
    return sha256_of([entry.model_dump(mode="json") for entry in ordered])


def manifest_sha256(manifest: ArtifactManifest) -> str:
    """The identity of a manifest, recorded by the journal for every staged input."""
    return sha256_of(manifest.model_dump(mode="json", exclude_none=True))


def parse_manifest(raw: Any, *, source: str = "manifest") -> ArtifactManifest:
    """The manifest in ``raw``; InvalidInput naming the first bad field."""
    if not isinstance(raw, dict) or raw.get("schema_name") != ARTIFACT_SCHEMA:
        raise InvalidInput(
            f"{source} is not a {ARTIFACT_SCHEMA} manifest",
            hint="give the JSON that `vq campaign artifact-publish` printed",
            reference="campaign-manifest-invalid",
        )
    try:
        manifest = ArtifactManifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "manifest"
        reason = (
            "is not a field of the manifest"
            if first["type"] == "extra_forbidden"
            else describe(first, JSON_WORDS)
        )
        raise InvalidInput(
            f"{source} is refused: {where}: {reason}",
            hint="give the JSON that `vq campaign artifact-publish` printed",
            reference="campaign-manifest-invalid",
        ) from None
    if entries_sha256(manifest.entries) != manifest.entries_sha256:
        raise InvalidInput(
            f"{source} is refused: entries_sha256 does not match its entries",
            hint="the manifest was edited after it was published; publish it again",
            reference="campaign-manifest-invalid",
        )
    return manifest


@dataclass(frozen=True)
class Observed:
    """One entry found in a copy: ``type`` is file, directory, symlink or special.

    ``sha256`` is set for regular files only; ``size`` is the lstat size.
    """

    path: str
    type: str
    size: int
    sha256: str | None = None


@dataclass(frozen=True)
class VerifyProblem:
    status: str
    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"status": self.status, "path": self.path, "message": self.message}


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def compare(manifest: ArtifactManifest, observed: list[Observed] | None) -> list[VerifyProblem]:
    """Every difference between ``manifest`` and the walk of a copy (see
    :func:`compare_entries`)."""
    return compare_entries(manifest.kind, manifest.entries, observed)


def compare_entries(
    kind: str, entries: list[ArtifactEntry], observed: list[Observed] | None
) -> list[VerifyProblem]:
    """Every difference between the listed ``entries`` of a ``kind`` tree and the walk of
    a copy, worst first.

    ``observed`` is None when the copy itself is absent; otherwise it holds the copy
    itself as ``"."`` and, for a directory, every entry below it. An unsafe or missing
    directory hides what lies below it (its children are not reported again).
    """
    if observed is None:
        return [VerifyProblem("missing", ".", "the copy is absent")]
    found = {entry.path: entry for entry in observed}
    root = found.get(".")
    if root is None:
        return [VerifyProblem("missing", ".", "the copy is absent")]
    if root.type != kind:
        what = _what(root.type) if root.type in ("symlink", "special") else root.type
        return [VerifyProblem("unsafe", ".", f"the copy is a {what}; expected a {kind}")]
    listed = {entry.path: entry for entry in entries}
    problems: list[VerifyProblem] = []
    hidden: set[str] = set()  # listed paths whose own problem covers everything below
    for entry in entries:
        if any(parent in hidden for parent in _parents(entry.path)):
            hidden.add(entry.path)
            continue
        seen = found.get(entry.path)
        if seen is None:
            problems.append(
                VerifyProblem("missing", entry.path, f"the listed {entry.type} is absent")
            )
            hidden.add(entry.path)
        elif seen.type in ("symlink", "special"):
            problems.append(VerifyProblem("unsafe", entry.path, f"is a {_what(seen.type)}"))
            hidden.add(entry.path)
        elif seen.type != entry.type:
            problems.append(
                VerifyProblem(
                    "unsafe", entry.path, f"is a {seen.type} where a {entry.type} belongs"
                )
            )
            hidden.add(entry.path)
        elif entry.type == "file" and seen.size < entry.size:
            problems.append(
                VerifyProblem("partial", entry.path, f"has {seen.size} of {entry.size} bytes")
            )
        elif entry.type == "file" and (seen.size != entry.size or seen.sha256 != entry.sha256):
            problems.append(
                VerifyProblem("digest_mismatch", entry.path, "its bytes differ from the manifest")
            )
    for seen_entry in observed:
        if (
            seen_entry.path in listed
            or seen_entry.path == "."
            or any(parent in hidden for parent in _parents(seen_entry.path))
        ):
            continue
        if seen_entry.type in ("symlink", "special"):
            problems.append(
                VerifyProblem("unsafe", seen_entry.path, f"is a {_what(seen_entry.type)}")
            )
        else:
            problems.append(VerifyProblem("unexpected", seen_entry.path, "is not in the manifest"))
    return sorted(problems, key=lambda p: (STATUSES.index(p.status), p.path))


def verdict(problems: list[VerifyProblem]) -> str:
    """``verified`` when there is no problem, else the worst problem's status."""
    return problems[0].status if problems else VERIFIED


def _what(kind: str) -> str:
    return "symbolic link" if kind == "symlink" else "special file"
