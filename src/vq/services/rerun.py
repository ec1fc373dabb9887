"""Convergence reruns (``--rerun-until-file-exists PATH --rerun-max N``).

After a job COMPLETED without ``PATH`` existing (relative to its working directory), a
sibling spec is created with ``parent_jobid`` and ``rerun_count + 1`` in the same working
directory, until the file appears or ``rerun_max`` reruns have been made. The original
record is never reopened (§3.3). Other endings never rerun (retries are for failures).
"""

from __future__ import annotations

import logging
from pathlib import Path

from vq.domain.spec import JobSpec
from vq.domain.states import JobState
from vq.services.context import ServiceContext
from vq.services.siblings import create_sibling

__all__ = ["DEFAULT_RERUN_MAX", "maybe_rerun"]

log = logging.getLogger(__name__)

DEFAULT_RERUN_MAX = 10


def maybe_rerun(ctx: ServiceContext, spec: JobSpec) -> JobSpec | None:
    """The rerun sibling this ended job earns, written; or None."""
    if spec.state is not JobState.COMPLETED or not spec.rerun_until_file_exists:
        return None
    directory = Path(spec.cwd) if spec.cwd else ctx.paths.workspace(spec.id)
    if (directory / spec.rerun_until_file_exists).exists():
        return None
    limit = spec.rerun_max or DEFAULT_RERUN_MAX
    if spec.rerun_count >= limit:
        log.info(
            "job %s: %s still missing after %d reruns", spec.id, spec.rerun_until_file_exists, limit
        )
        return None
    sibling = create_sibling(
        ctx,
        spec,
        f"rerun {spec.rerun_count + 1} of {limit}: "
        f"{spec.rerun_until_file_exists} does not exist yet",
        rerun_count=spec.rerun_count + 1,
    )
    log.info("job %s: rerun as %s", spec.id, sibling.id)
    return sibling
