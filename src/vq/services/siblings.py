"""Sibling specs: a fresh PENDING job that continues another one (§3.3).

Reboot auto-resume (and, later, rerun-until-file) never reopens a terminal record; it
creates a sibling with a new id and ``parent_jobid`` lineage. The sibling runs in the
parent's working directory so application restart files are found, while its own
``jobs/<id>/`` holds its logs and ``_vq`` metadata (with a copy of the parent's captured
environment).
"""

from __future__ import annotations

from vq.domain.events import make_event
from vq.domain.ids import new_job_id
from vq.domain.spec import JobSpec
from vq.services.context import ServiceContext
from vq.store.environment import copy_environment
from vq.store.events import append_event

__all__ = ["create_sibling"]


def create_sibling(
    ctx: ServiceContext, parent: JobSpec, reason: str, *, rerun_count: int | None = None
) -> JobSpec:
    """Write and return the PENDING sibling of ``parent``."""
    paths = ctx.paths
    job_id = new_job_id(
        ctx.random_bytes,
        lambda candidate: ctx.store.exists(candidate) or paths.workspace(candidate).exists(),
    )
    paths.meta_dir(job_id).mkdir(parents=True)
    copy_environment(paths, parent.id, job_id)
    sibling = JobSpec(
        id=job_id,
        submitted_at=ctx.now(),
        job_name=parent.job_name,
        tags=list(parent.tags),
        submitter=parent.submitter,
        workspace_source=parent.workspace_source,
        command=list(parent.command),
        cwd=parent.cwd or str(paths.workspace(parent.id)),
        cpus=parent.cpus,
        mem_mb=parent.mem_mb,
        wall_time_seconds=parent.wall_time_seconds,
        priority=parent.priority,
        retry_max=parent.retry_max,
        parent_jobid=parent.id,
        recover_on_reboot=parent.recover_on_reboot,
        rerun_until_file_exists=parent.rerun_until_file_exists,
        rerun_max=parent.rerun_max,
        rerun_count=parent.rerun_count if rerun_count is None else rerun_count,
        retry_backoff_seconds=parent.retry_backoff_seconds,
        clean_workdir_on_terminal=parent.clean_workdir_on_terminal,
        program=parent.program,
        program_runtime_pin=parent.program_runtime_pin,
    )
    ctx.store.create(sibling)
    append_event(
        paths,
        make_event(
            "submitted",
            job_id,
            sibling.submitted_at,
            state=sibling.state.value,
            command=sibling.command,
            parent_jobid=parent.id,
            reason=reason,
        ),
    )
    return sibling
