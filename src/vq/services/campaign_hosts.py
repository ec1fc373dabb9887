"""Where a campaign node's job runs: one function per host operation.

The controller reaches a host only through :class:`CampaignHost`: ``submit`` a payload
under an idempotency key, ``observe`` a job, ``fetch`` a finished job's workspace. This
increment implements :class:`LocalHost`, the queue of this state root, through the same
paths the CLI uses (:class:`vq.gateway.Gateway`: the daemon when one answers, else the
same services on the disk). A remote daemon host or scheduler lane is another
implementation of the same three methods, returned by :func:`host_for`.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vq.domain.states import TERMINAL_NAMES
from vq.errors import InvalidInput
from vq.gateway import Gateway

__all__ = [
    "LOCAL_NAMES",
    "CampaignHost",
    "LocalHost",
    "Observation",
    "SubmitRequest",
    "host_for",
    "host_problem",
]

#: Host names that mean this machine's queue.
LOCAL_NAMES = frozenset({"localhost"})


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


@dataclass(frozen=True)
class Observation:
    """A job as its queue reports it: the state name, and once known, how it ended and
    the runtime it was dispatched with."""

    state: str
    exit_code: int | None
    failure_reason: str | None
    runtime: dict[str, Any] | None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_NAMES


class CampaignHost(Protocol):
    name: str

    def submit(self, request: SubmitRequest) -> str:
        """The id of the job accepted under ``request.key`` (the same id on a resend)."""
        ...

    def observe(self, job_id: str) -> Observation: ...

    def fetch(self, job_id: str, dest: Path) -> list[dict[str, str]]:
        """Copy the job's workspace to ``dest`` (which must not exist); the entries the
        copy skipped (links, special files) as ``{"path", "reason"}``."""
        ...


class LocalHost:
    """The queue of this state root, daemon or disk (:mod:`vq.gateway`)."""

    name = "localhost"

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    def submit(self, request: SubmitRequest) -> str:
        params: dict[str, Any] = {
            "command": request.command,
            "source": str(request.payload.resolve()),
            "cpus": request.cpus,
            "job_name": request.job_name,
            "idempotency_key": request.key,
        }
        for name in ("mem_mb", "wall_time_seconds", "program"):
            if getattr(request, name) is not None:
                params[name] = getattr(request, name)
        return str(self.gateway.submit(params)["id"])

    def observe(self, job_id: str) -> Observation:
        view = self.gateway.status(job_id)
        return Observation(
            state=str(view["state"]),
            exit_code=view.get("exit_code"),
            failure_reason=view.get("failure_reason"),
            runtime=runtime_of(view),
        )

    def fetch(self, job_id: str, dest: Path) -> list[dict[str, str]]:
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        result = self.gateway.fetch_tree(job_id, dest, "workspace")
        return list(result.skipped)


def runtime_of(view: dict[str, Any]) -> dict[str, Any] | None:
    """The runtime a job's queue resolved (its program pin), once it was dispatched;
    None rather than a guess for a job without a program or not dispatched yet."""
    pin = view.get("program_runtime_pin")
    if not isinstance(pin, dict) or not view.get("started_at"):
        return None
    record = {
        "program": pin.get("program"),
        "version": pin.get("version") or pin.get("import_version"),
        "git_sha": pin.get("resolved_git_sha") or pin.get("git_sha"),
    }
    kept = {key: value for key, value in record.items() if value is not None}
    return kept or None


def host_problem(host: str | None) -> str | None:
    """Why this controller cannot run a node on ``host`` (None when it can)."""
    if host is None or host in LOCAL_NAMES:
        return None
    return (
        f"host {host!r} is not this machine; this controller runs nodes on localhost only "
        "(remote hosts are not supported yet)"
    )


def host_for(name: str | None, gateway: Gateway) -> CampaignHost:
    """The host a node names (None = this machine)."""
    problem = host_problem(name)
    if problem is not None:
        raise InvalidInput(problem, hint="set the node's host to localhost, or omit it")
    return LocalHost(gateway)
