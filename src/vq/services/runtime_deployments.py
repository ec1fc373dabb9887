"""Managed-runtime deployments to a scheduler lane, and their verified records (§3.4).

``vq runtime deploy DIR --root ROOT --lane LANE --program PROG`` makes the generation of
DIR (:mod:`.runtime_generations`: digest-named, verified, nothing writable by others)
in a private staging root on the driver, ships it over the lane's SSH runner into
``ROOT/generations/<digest>/`` on the cluster (extracted into a temporary directory
there, then renamed: a half-shipped generation is never under its name), verifies it
on the lane's login host with the very check a compute node runs before a bound job
starts (:func:`vq.dialects.runtime_check.generation_verify_script`), and only then
points ``ROOT/current`` at it and writes the deployment record on the driver:

    <state root>/runtime-deployments/<lane>/<program>.json   vq.runtime-deployment/1

``{lane, program, root, digest, version, git_sha, deployed_at, verified_at}``: the
target's last verified deployment, what a lane submit naming PROG falls back to
(:mod:`.lane_runtime`). ``version`` is what ``--version`` said; ``git_sha`` is the commit
of DIR when DIR is the top of a git checkout (a bounded ``git rev-parse``), else None.
A failed shipment or verification writes no record and leaves an earlier one in force.
"""

from __future__ import annotations

import io
import re
import shlex
import shutil
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypedDict

from vq._fs import atomic_write_json, read_json_regular
from vq.config.hosts import LaneSettings
from vq.dialects.runtime_check import VERIFIED_LINE, generation_verify_script
from vq.errors import InvalidInput, TransportError, VqError
from vq.paths import StateLayout
from vq.transport.runner import Runner

from .runtime_generations import Generation, deploy, root_problem

__all__ = [
    "DEPLOYMENT_SCHEMA",
    "DeploymentRecord",
    "UnreadableRecord",
    "deploy_to_lane",
    "read_record",
    "source_git_sha",
]

DEPLOYMENT_SCHEMA = "vq.runtime-deployment/1"
#: A record is a few hundred bytes; anything larger is not one.
RECORD_MAX_BYTES = 16 * 1024
#: The largest generation shipped in one call (as a workspace stage).
MAX_SHIP_BYTES = 512 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
_HEX = re.compile(r"[0-9a-f]{64}")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_VERSION = re.compile(r"[\x21-\x7e]{1,128}")
#: The shipping half of the remote script (root and digest already checked): extract
#: into a temporary directory beside the generations, rename into place unless that
#: generation is already there; status 97 means nothing was put in place.
_SHIP = """set -u
vq_root={root}
vq_gens="$vq_root/generations"
umask 022
mkdir -p -- "$vq_gens" || exit 97
if [ -d "$vq_gens/{digest}" ]; then
\tcat >/dev/null
else
\tvq_tmp=$(mktemp -d "$vq_gens/.incoming.XXXXXX") || exit 97
\tif ! tar -xf - -C "$vq_tmp" --no-same-owner; then rm -rf -- "$vq_tmp"; exit 97; fi
\tmv -- "$vq_tmp/{digest}" "$vq_gens/{digest}" 2>/dev/null || [ -d "$vq_gens/{digest}" ] \\
\t\t|| {{ rm -rf -- "$vq_tmp"; exit 97; }}
\trm -rf -- "$vq_tmp"
fi
"""
#: After the check passed: ``ROOT/current`` → the generation, replaced atomically.
_SELECT = """ln -sfn "generations/{digest}" "$vq_root/.current.$$" \\
\t&& mv -Tf -- "$vq_root/.current.$$" "$vq_root/current"
"""


class LaneDeployment(TypedDict):
    """``vq runtime deploy --lane --json``: the record's fields, the payload's path on
    the cluster and how many entries the generation holds."""

    lane: str
    program: str
    root: str
    digest: str
    version: str | None
    git_sha: str | None
    deployed_at: str
    verified_at: str
    payload: str
    entries: int


class UnreadableRecord(Exception):
    """A deployment record exists but cannot be used (the reason is the message)."""


@dataclass(frozen=True)
class DeploymentRecord:
    """The last verified deployment of ``program`` to ``lane`` (module docstring)."""

    lane: str
    program: str
    root: str
    digest: str
    version: str | None
    git_sha: str | None
    deployed_at: str
    verified_at: str


def read_record(paths: StateLayout, lane: str, program: str) -> DeploymentRecord | None:
    """The record of ``program`` on ``lane``; None when there is none. A record that is
    not a regular file, is oversized, malformed, or names another lane, program or a
    bad root or digest raises :class:`UnreadableRecord`."""
    if not _NAME.fullmatch(program):
        return None
    path = paths.runtime_deployment(lane, program)
    try:
        data = read_json_regular(path, RECORD_MAX_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UnreadableRecord(f"{path} cannot be read: {exc}") from None
    fields = ("lane", "program", "root", "digest", "deployed_at", "verified_at")
    if (
        not isinstance(data, dict)
        or data.get("schema_name") != DEPLOYMENT_SCHEMA
        or not all(isinstance(data.get(name), str) for name in fields)
    ):
        raise UnreadableRecord(f"{path} is not a {DEPLOYMENT_SCHEMA} record")
    record = DeploymentRecord(
        **{name: data[name] for name in fields},
        version=data.get("version") if isinstance(data.get("version"), str) else None,
        git_sha=data.get("git_sha") if isinstance(data.get("git_sha"), str) else None,
    )
    if (record.lane, record.program) != (lane, program):
        raise UnreadableRecord(f"{path} records {record.program!r} on {record.lane!r}")
    if root_problem(record.root) is not None or not _HEX.fullmatch(record.digest):
        raise UnreadableRecord(f"{path} names an unusable root or digest")
    return record


def source_git_sha(source: Path, runner: Runner) -> str | None:
    """The commit DIR is at when DIR is the top of a git checkout (not merely inside a
    repository enclosing it), read with one bounded ``git rev-parse``; else None."""
    try:
        done = runner.run(
            [
                *("git", "-c", f"safe.directory={source}", "-C", str(source)),
                *("rev-parse", "--show-toplevel", "HEAD"),
            ],
            deadline_s=10.0,
            max_output_bytes=8192,
        )
    except VqError:
        return None
    lines = done.stdout.decode(errors="replace").splitlines()
    if not done.ok or len(lines) != 2 or not _SHA.fullmatch(lines[1].strip()):
        return None
    try:
        if Path(lines[0]).resolve() != source.resolve():
            return None
    except OSError:
        return None
    return lines[1].strip()


def _generation_archive(generation: Generation) -> bytes:
    """The generation directory as an uncompressed tar named ``<digest>/…``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(generation.directory, arcname=generation.digest)
    if buffer.tell() > MAX_SHIP_BYTES:
        raise InvalidInput(
            f"the runtime is larger than {MAX_SHIP_BYTES >> 20} MiB",
            hint="deploy a smaller runtime directory",
        )
    return buffer.getvalue()


def _remote_script(root: str, digest: str) -> str:
    quoted = shlex.quote(root)
    return (
        _SHIP.format(root=quoted, digest=digest)
        + generation_verify_script(root, digest)
        + _SELECT.format(digest=digest)
    )


def _verify_failure(lane: str, stdout: bytes, stderr: bytes, rc: int) -> str:
    text = stderr.decode(errors="replace").strip()
    if rc == 97:
        return f"the generation could not be put in place on lane {lane}: {text or 'no detail'}"
    marker = "unavailable on this node: "
    for line in text.splitlines():
        if marker in line:
            reason = line.split(marker, 1)[1].removesuffix("; command not started")
            return f"the generation shipped to lane {lane} does not verify there: {reason}"
    seen = (text or stdout.decode(errors="replace").strip() or f"exit code {rc}").splitlines()
    return f"verifying the generation on lane {lane} failed: {seen[-1][:300]}"


def deploy_to_lane(
    source: Path,
    root: str,
    lane: LaneSettings,
    program: str,
    *,
    runner: Runner,
    local: Runner,
    paths: StateLayout,
    now: str,
    version: str | None = None,
) -> LaneDeployment:
    """Deploy ``source`` to ``lane`` under ``root`` for ``program`` and record it (module
    docstring). ``runner`` reaches the lane's login host, ``local`` runs ``git`` here.
    Returns the record's fields plus ``payload`` (its path on the cluster) and
    ``entries``; InvalidInput (nothing recorded) when it cannot be shipped or verified."""
    problem = root_problem(root)
    if problem is not None:
        raise InvalidInput(problem, hint="give the deployment root on the cluster: /path/to/root")
    if not _NAME.fullmatch(program):
        raise InvalidInput(
            f"program name {program!r} must be 1-64 of letters, digits, ._+-",
            hint="name the program as configured in [hosts.LANE.scheduler_programs]",
        )
    if version is not None and not _VERSION.fullmatch(version):
        raise InvalidInput(
            "--version must be 1-128 printable characters without spaces",
            hint="e.g. --version 2.4.1",
        )
    git_sha = source_git_sha(source, local)
    staging_parent = paths.runtime_deployments_dir
    staging_parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=staging_parent))
    try:
        built = deploy(source, staging, now)
        generation = Generation(staging, built["digest"])
        archive = _generation_archive(generation)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    digest = built["digest"]
    try:
        done = runner.run(
            ["sh", "-c", _remote_script(root, digest)],
            stdin=archive,
            deadline_s=max(lane.ssh_timeout, 10.0) * 12,
            max_output_bytes=64 * 1024,
        )
    except TransportError as exc:
        raise InvalidInput(
            f"lane {lane.name} could not be reached to deploy the runtime: {exc.message}",
            hint="check the lane's ssh settings (`vq hosts` shows its health); nothing "
            "was recorded",
        ) from None
    lines = done.stdout.decode(errors="replace").split()
    if done.rc != 0 or VERIFIED_LINE not in lines:
        raise InvalidInput(
            _verify_failure(lane.name, done.stdout, done.stderr, done.rc),
            hint="nothing was recorded and an earlier deployment stays in force; fix the "
            "root on the cluster and deploy again",
        )
    record = DeploymentRecord(
        lane=lane.name,
        program=program,
        root=root,
        digest=digest,
        version=version,
        git_sha=git_sha,
        deployed_at=now,
        verified_at=now,
    )
    path = paths.runtime_deployment(lane.name, program)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    atomic_write_json(path, {"schema_name": DEPLOYMENT_SCHEMA, **asdict(record)})
    payload = f"{root.rstrip('/')}/generations/{digest}/payload"
    return {
        "lane": record.lane,
        "program": record.program,
        "root": record.root,
        "digest": record.digest,
        "version": record.version,
        "git_sha": record.git_sha,
        "deployed_at": record.deployed_at,
        "verified_at": record.verified_at,
        "payload": payload,
        "entries": built["entries"],
    }
