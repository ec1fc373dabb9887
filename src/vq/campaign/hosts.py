"""Where a campaign node's job runs: one object per host, four operations.

The controller reaches a host only through :class:`CampaignHost`: ``submit`` a payload
under an idempotency key, ``observe`` the campaign's jobs there (one listing per host and
pass), ``runtime`` of a started job (the record of what it ran with), ``fetch`` a finished
job's workspace. :class:`vq.campaign.host_directory.HostDirectory` maps a node's
``host`` to one:

* none, ``localhost`` or another alias of this machine: :class:`LocalHost`, the queue of
  this state root through the same paths the CLI uses (:class:`vq.gateway.Gateway`: the
  daemon when one answers, else the same services on the disk);
* a scheduler lane this queue drives: :class:`LocalHost` submitting with
  ``scheduler_target`` (its jobs are in this queue; a lane's runtime is taken as run only
  once the job COMPLETED with exit code 0, because its ``started_at`` proves nothing);
* a configured ``[hosts.NAME]`` daemon host: :class:`vq.campaign.remote.RemoteQueue`
  (``vq submit/list/status/fetch`` over SSH).

Any other name is a problem reported before anything is submitted
(:meth:`vq.campaign.host_directory.HostDirectory.problem`).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypedDict, cast

from vq.domain.states import TERMINAL_NAMES
from vq.gateway import Gateway
from vq.protocol.answers import submitted_id

__all__ = [
    "CampaignHost",
    "LocalHost",
    "Observation",
    "SubmitRequest",
    "observation_of",
    "runtime_of",
]


class SubmitFields(TypedDict, total=False):
    """A node's submit fields besides the command, source and key (the HTTP API's
    names); only the ones it sets."""

    cpus: int
    job_name: str
    mem_mb: int
    wall_time_seconds: int
    program: str
    runtime_root: str
    runtime_artifact: str


@dataclass(frozen=True)
class SubmitRequest:
    """One keyed submission of a staged payload (what ``vq submit --dir`` sends)."""

    payload: Path
    key: str
    job_name: str
    command: list[str]
    cpus: int
    mem_mb: int | None
    wall_time_seconds: int | None
    program: str | None
    runtime_root: str | None = None
    runtime_artifact: str | None = None

    def fields(self) -> SubmitFields:
        """The submit fields besides the command, source and key (the HTTP API's names)."""
        out: SubmitFields = {"cpus": self.cpus, "job_name": self.job_name}
        if self.mem_mb is not None:
            out["mem_mb"] = self.mem_mb
        if self.wall_time_seconds is not None:
            out["wall_time_seconds"] = self.wall_time_seconds
        if self.program is not None:
            out["program"] = self.program
        if self.runtime_root is not None:
            out["runtime_root"] = self.runtime_root
        if self.runtime_artifact is not None:
            out["runtime_artifact"] = self.runtime_artifact
        return out


@dataclass(frozen=True)
class Observation:
    """A job as its queue lists it: the state name, how it ended once known, whether it
    was dispatched, and (when the host already knows it) the runtime it ran with."""

    state: str
    exit_code: int | None
    failure_reason: str | None
    runtime: dict[str, Any] | None = None
    started: bool = False

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_NAMES


class CampaignHost(Protocol):
    name: str

    def submit(self, request: SubmitRequest) -> str:
        """The id of the job accepted under ``request.key`` (the same id on a resend)."""
        ...

    def observe(self, job_ids: Sequence[str], name_hint: str) -> dict[str, Observation]:
        """The jobs among ``job_ids`` this host's queue knows, from one listing of the jobs
        whose name contains ``name_hint``; an id missing from the answer is unknown there."""
        ...

    def runtime(self, job_id: str, seen: Observation) -> ExecutedRuntime | None:
        """What a started job ran with, once the host can prove it; None until then."""
        ...

    def fetch(self, job_id: str, dest: Path) -> list[dict[str, str]]:
        """Copy the job's workspace to ``dest`` (replaced if it exists); the entries the
        copy skipped (links, special files) as ``{"path", "reason"}``."""
        ...

    def close(self) -> None: ...


def observation_of(row: Mapping[str, Any]) -> Observation:
    """An :class:`Observation` from a ``vq list --json`` row."""
    code = row.get("exit_code")
    reason = row.get("failure_reason")
    return Observation(
        state=str(row["state"]),
        exit_code=code if isinstance(code, int) else None,
        failure_reason=str(reason) if reason else None,
        started=bool(row.get("started_at")),
    )


class LocalHost:
    """The queue of this state root, daemon or disk (:mod:`vq.gateway`); with ``lane``,
    submissions go to that scheduler lane this queue drives."""

    def __init__(self, gateway: Gateway, lane: str | None = None) -> None:
        self.gateway = gateway
        self.lane = lane
        self.name = lane or "localhost"

    def submit(self, request: SubmitRequest) -> str:
        params: dict[str, Any] = {
            "command": request.command,
            "source": str(request.payload.resolve()),
            "idempotency_key": request.key,
            **request.fields(),
        }
        if self.lane is not None:
            params["scheduler_target"] = self.lane
        return str(submitted_id(self.gateway.submit(params)))

    def observe(self, job_ids: Sequence[str], name_hint: str) -> dict[str, Observation]:
        wanted = set(job_ids)
        listing = self.gateway.list_rows({"states": [], "tags": [], "name": name_hint})
        return {
            str(row["id"]): observation_of(row) for row in listing["jobs"] if row["id"] in wanted
        }

    def runtime(self, job_id: str, seen: Observation) -> ExecutedRuntime | None:
        if self.lane is not None and (seen.state, seen.exit_code) != ("COMPLETED", 0):
            return None  # a lane job's start proves nothing; only its success does
        return runtime_of(self.gateway.status(job_id))

    def fetch(self, job_id: str, dest: Path) -> list[dict[str, str]]:
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        result = self.gateway.fetch_tree(job_id, dest, "workspace")
        return list(result.skipped)

    def close(self) -> None:
        return None


class ExecutedRuntime(TypedDict, total=False):
    """What a started job ran with (:func:`runtime_of`): its program pin's program,
    version, git SHA and artifact identity as the queue's view carries them, and the
    runtime generation's payload it is bound to. Only the keys with a value."""

    program: object
    version: object
    git_sha: object
    artifact_identity: object
    runtime_root: str


def runtime_of(view: Mapping[str, Any]) -> ExecutedRuntime | None:
    """The runtime a job's queue resolved once it was dispatched: its program pin
    (program, version, git SHA, artifact identity) and the runtime generation it is bound
    to (``artifact_identity`` its digest, ``runtime_root`` its payload); None rather than
    a guess for a job with neither, or not dispatched yet."""
    if not view.get("started_at"):
        return None
    pin = view.get("program_runtime_pin")
    pin = pin if isinstance(pin, dict) else {}
    record = {
        "program": pin.get("program"),
        "version": pin.get("version") or pin.get("import_version"),
        "git_sha": pin.get("resolved_git_sha") or pin.get("git_sha"),
        "artifact_identity": pin.get("artifact_identity"),
    }
    bound = view.get("runtime_generation")
    if isinstance(bound, dict) and bound.get("root") and bound.get("digest"):
        root, digest = str(bound["root"]), str(bound["digest"])
        record["artifact_identity"] = digest
        record["runtime_root"] = f"{root.rstrip('/')}/generations/{digest}/payload"
    kept = {key: value for key, value in record.items() if value is not None}
    return cast(ExecutedRuntime, kept) if kept else None
