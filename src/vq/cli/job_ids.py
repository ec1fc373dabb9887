"""Job-id arguments: a full id or any unique prefix of at least 4 characters (like git).

:data:`JOB_ID` is the Click type of every CLI argument that names a job; it resolves a
prefix with :func:`vq.cli.short_ids.resolve_job_id`, so an ambiguous prefix is an
:class:`~vq.errors.AmbiguousId` (exit 8) naming the matches, and a prefix no job here
starts with is a NotFound (exit 3) whose hint names the configured host that holds it
(:mod:`vq.cli.found_elsewhere`). :data:`GROUP_ID` does the
same for ``--group`` (an array or chain group) with :func:`resolve_group_id`.
"""

from __future__ import annotations

import click

from vq.cli.short_ids import resolve_job_id

__all__ = [
    "GROUP_ID",
    "JOB_ID",
    "REMOTE_PARSE",
    "GroupIdParam",
    "JobIdParam",
    "resolve_group_id",
]

#: The ``obj`` of a context parsed for another host (``vq VERB HOST …``): ids and
#: prefixes are checked for their form here, then passed on unresolved, for the remote
#: queue to resolve against its own.
REMOTE_PARSE = "vq-remote-parse"


def _for_another_host(ctx: click.Context | None) -> bool:
    return ctx is not None and ctx.find_root().obj == REMOTE_PARSE


def _checked_form(text: str, what: str) -> str:
    """``text`` as an id or prefix for another host to resolve (InvalidInput otherwise)."""
    from vq.domain.ids import is_id_or_prefix

    if not is_id_or_prefix(text):
        from vq.domain.ids import resolve_prefix

        resolve_prefix(text, (), what=what)  # raises the usual "is not a …" error
    return text.strip().lower()


class JobIdParam(click.ParamType[str, str]):
    """A job id or unique prefix; VqErrors propagate to the CLI's error contract."""

    name = "ID"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        if _for_another_host(ctx):
            return _checked_form(str(value), "job id")
        from vq.errors import NotFound

        try:
            return resolve_job_id(str(value))
        except NotFound as exc:
            from vq.cli.found_elsewhere import PER_JOB_VERBS, with_elsewhere

            if ctx is None or ctx.command.name not in PER_JOB_VERBS:
                raise
            raise with_elsewhere(exc, ctx.command.name, str(value), "localhost") from None


JOB_ID = JobIdParam()


def resolve_group_id(text: str) -> str:
    """The array or chain group ``text`` names: a full id as is (no listing), else the
    one group id it is a unique prefix of, among the groups of this queue's jobs."""
    from vq.domain.ids import is_job_id, resolve_prefix

    if is_job_id(text.strip().lower()):
        return text.strip().lower()
    from vq.cli.common import gateway

    rows = gateway().list_rows({"states": [], "tags": []})["jobs"]
    groups = {g for row in rows for g in (row.get("array_group_id"), row.get("chain_group_id"))}
    return resolve_prefix(text, (g for g in groups if g), what="group id")


class GroupIdParam(click.ParamType[str, str]):
    """An array or chain group id or unique prefix (``--group``)."""

    name = "GROUP"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        if _for_another_host(ctx):
            return _checked_form(str(value), "group id")
        return resolve_group_id(str(value))


GROUP_ID = GroupIdParam()
