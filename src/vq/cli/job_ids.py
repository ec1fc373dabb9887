"""Job-id arguments: a full id or any unique prefix of at least 4 characters (like git).

:data:`JOB_ID` is the Click type of every CLI argument that names a job; it resolves a
prefix with :func:`vq.cli.short_ids.resolve_job_id`, so an ambiguous prefix is an
:class:`~vq.errors.AmbiguousId` (exit 8) naming the matches.
"""

from __future__ import annotations

import click

from vq.cli.short_ids import resolve_job_id

__all__ = ["JOB_ID", "JobIdParam"]


class JobIdParam(click.ParamType[str, str]):
    """A job id or unique prefix; VqErrors propagate to the CLI's error contract."""

    name = "ID"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        return resolve_job_id(str(value))


JOB_ID = JobIdParam()
