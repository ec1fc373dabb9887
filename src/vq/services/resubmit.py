"""``vq resubmit ID``: a fresh job cloned from a terminal one (§3.5, §4.4 last paragraph).

The clone gets a new id, a fresh PENDING lifecycle and a copy of the original workspace
*without* its ``_vq`` metadata (receipt, exit marker, samples, events) or its captured
logs, so nothing from the old run can be mistaken for the new one; only the submit's
captured environment ``_vq/environment`` is copied. Resources may be overridden.
Dependencies are not carried over (they have already run); ``parent_jobid`` records the
lineage.
"""

from __future__ import annotations

import shutil
from typing import Any

from vq.domain.durations import MAX_DURATION_SECONDS
from vq.domain.events import make_event
from vq.domain.ids import new_job_id
from vq.domain.names import check_job_name
from vq.domain.sizes import MAX_MEM_MB
from vq.domain.spec import JobSpec
from vq.errors import Conflict, InvalidInput
from vq.services.context import ServiceContext
from vq.store.environment import copy_environment
from vq.store.events import append_event

__all__ = ["OVERRIDABLE", "check_overrides", "resubmit"]

OVERRIDABLE = ("cpus", "mem_mb", "wall_time_seconds", "priority", "job_name")


#: The ranges of the numeric overrides: the same as a submit's (SubmitParams).
_BOUNDS = {
    "cpus": (1, 4096),
    "mem_mb": (1, MAX_MEM_MB),
    "wall_time_seconds": (1, MAX_DURATION_SECONDS),
    "priority": (-1000, 1000),
}


def check_overrides(overrides: dict[str, Any]) -> None:
    """InvalidInput unless every override is what a submit would accept (one name rule,
    the submit's ranges), whichever path (CLI, RPC, API) asks for the resubmit."""
    for key, (low, high) in _BOUNDS.items():
        value = overrides.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidInput(f"{key} must be a whole number from {low} to {high}")
    name = overrides.get("job_name")
    if name is not None and not isinstance(name, str):
        raise InvalidInput("job_name must be text")
    check_job_name(name)


def resubmit(ctx: ServiceContext, job_id: str, overrides: dict[str, Any]) -> JobSpec:
    original = ctx.read_owned(job_id)
    if not original.is_terminal:
        raise Conflict(
            f"job {job_id} is {original.state.value}; only an ended job can be resubmitted",
            hint="wait for it, or `vq kill` it first",
        )
    unknown = set(overrides) - set(OVERRIDABLE)
    if unknown:
        raise InvalidInput(f"cannot override {', '.join(sorted(unknown))}")
    check_overrides(overrides)
    paths = ctx.paths
    old_workspace = paths.workspace(job_id)
    if not old_workspace.is_dir():
        raise InvalidInput(
            f"the workspace of job {job_id} is gone (archived or deleted)",
            hint="submit it again from its source instead",
        )
    new_id = new_job_id(
        ctx.random_bytes, lambda c: ctx.store.exists(c) or paths.workspace(c).exists()
    )
    workspace = paths.workspace(new_id)
    skip = {"_vq", original.stdout_path, original.stderr_path}
    shutil.copytree(
        old_workspace,
        workspace,
        symlinks=True,
        ignore=lambda d, names: [n for n in names if d == str(old_workspace) and n in skip],
    )
    paths.meta_dir(new_id).mkdir(exist_ok=True)
    copy_environment(paths, job_id, new_id)  # the submit's captured environment
    own_cwd = original.cwd in (None, str(old_workspace))
    fields = {
        name: getattr(original, name)
        for name in (
            "job_name",
            "tags",
            "submitter",
            "workspace_source",
            "command",
            "stdout_path",
            "stderr_path",
            "cpus",
            "mem_mb",
            "wall_time_seconds",
            "priority",
            "retry_max",
            "retry_backoff_seconds",
            "rerun_until_file_exists",
            "rerun_max",
            "clean_workdir_on_terminal",
            "recover_on_reboot",
            "program",
            "program_runtime_pin",
        )
    }
    fields.update({k: v for k, v in overrides.items() if v is not None})
    clone = JobSpec(
        id=new_id,
        submitted_at=ctx.now(),
        cwd=str(workspace) if own_cwd else original.cwd,
        parent_jobid=job_id,
        **fields,
    )
    try:
        ctx.store.create(clone)
    except BaseException:
        shutil.rmtree(workspace, ignore_errors=True)
        raise
    append_event(
        paths,
        make_event("submitted", new_id, clone.submitted_at, state="PENDING", resubmit_of=job_id),
    )
    return clone
