"""Submission (§4.2): validate, materialize the workspace, write the PENDING spec.

The spec write is the acceptance boundary: once :func:`submit` returns, the job is
durable. The ``submitted`` event is appended afterwards, best-effort. On any failure
before the spec write the new workspace is removed, so a refused submit leaves nothing.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vq.domain.admission import capacity_overages
from vq.domain.events import make_event
from vq.domain.ids import new_job_id
from vq.domain.spec import JobSpec
from vq.protocol.messages import SubmitParams
from vq.services.context import ServiceContext
from vq.store.events import append_event
from vq.store.workspace import materialize

__all__ = ["SubmitResult", "submit", "submit_payload"]


@dataclass
class SubmitResult:
    spec: JobSpec
    capacity_warnings: list[str] = field(default_factory=list)


def _warnings(ctx: ServiceContext, params: SubmitParams) -> list[str]:
    return [
        f"requested {o.resource} {o.requested} exceeds the configured cap {o.capacity}; "
        "the job stays PENDING until the caps change"
        for o in capacity_overages(params.cpus, params.mem_mb, ctx.caps)
    ]


def submit(ctx: ServiceContext, params: SubmitParams) -> SubmitResult:
    """Accept one job. Raises InvalidInput/UnsafeArchive/NotFound and writes nothing."""
    paths = ctx.paths
    paths.ensure()
    job_id = new_job_id(
        ctx.random_bytes,
        lambda candidate: ctx.store.exists(candidate) or paths.workspace(candidate).exists(),
    )
    workspace = paths.workspace(job_id)
    source = None if params.source is None else Path(params.source)
    materialize(source, workspace)
    try:
        spec = JobSpec(
            id=job_id,
            submitted_at=ctx.now(),
            job_name=params.job_name,
            tags=params.tags,
            workspace_source=params.source,
            command=params.command,
            cwd=params.cwd or str(workspace),
            cpus=params.cpus,
            mem_mb=params.mem_mb,
            wall_time_seconds=params.wall_time_seconds,
            priority=params.priority,
            not_before=params.not_before,
            retry_max=params.retry_max,
        )
        ctx.store.create(spec)
    except BaseException:
        shutil.rmtree(workspace, ignore_errors=True)
        raise
    append_event(
        paths,
        make_event(
            "submitted",
            job_id,
            spec.submitted_at,
            state=spec.state.value,
            command=spec.command,
            source=params.source,
        ),
    )
    return SubmitResult(spec, _warnings(ctx, params))


def submit_payload(result: SubmitResult) -> dict[str, Any]:
    """The ``vq submit --json`` object: the whole spec plus ``capacity_warnings``."""
    payload: dict[str, Any] = result.spec.model_dump(mode="json")
    payload["capacity_warnings"] = result.capacity_warnings
    return payload
