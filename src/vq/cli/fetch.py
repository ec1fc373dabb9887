"""``vq fetch ID [DEST] [--workdir] [--name FILE] [--json]``: copy a job's files out (§4.6);
``vq fetch --group GROUP DEST``: every element of an array or chain group, each into
``DEST/<index>/``.

Disk only (no daemon needed); the work is :mod:`vq.fetch.local`. Prints one line for
humans, or the :class:`~vq.fetch.local.FetchResult` document with ``--json`` (for a group,
:class:`~vq.fetch.local.GroupFetchJSON`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from vq.cli.common import echo_json, gateway, owner_option
from vq.cli.job_ids import GROUP_ID

if TYPE_CHECKING:
    from vq.fetch.local import FetchResult
    from vq.fetch.snapshot import SourceKind

__all__ = ["fetch"]


@click.command()
@click.argument("job_id", metavar="ID", required=False)
@click.argument("dest", required=False, type=click.Path(path_type=Path))
@click.option(
    "--group",
    type=GROUP_ID,
    help="Fetch every element of this array or chain group, each into DEST/<index>/.",
)
@click.option("--workdir", is_flag=True, help="Copy the job's workdir ($VQ_WORKDIR) instead.")
@click.option("--name", "name", metavar="FILE", help="Copy just this file (a relative path).")
@click.option("--json", "as_json", is_flag=True, help="Print what was fetched as JSON.")
# Hidden: the owning side of `vq fetch HOST ID` (vq.fetch.stream).
@click.option("--tar-stream", is_flag=True, hidden=True)
@click.option("--ack-fetched", "receipt", hidden=True)
@owner_option
def fetch(
    job_id: str | None,
    dest: Path | None,
    group: str | None,
    workdir: bool,
    name: str | None,
    as_json: bool,
    tar_stream: bool = False,
    receipt: str | None = None,
    uid: int | None = None,
) -> None:
    """Copy a job's workspace (or workdir, or one file) to DEST.

    DEST defaults to ./NAME-ID (./ID for an unnamed job). A tree fetch adds
    _vq/fetch-manifest.json and _vq/terminal-diagnosis.json; fetching again into the same
    DEST replaces the snapshot. --name copies one regular file to DEST (a file or a
    directory) and writes no sidecars. Symbolic links leading outside the job's tree are
    never followed.

    With --group GROUP, DEST (the one argument) receives every element's tree as
    DEST/<index>/ (the array or chain index), in index order.
    """
    kind: Literal["workspace", "workdir"] = "workdir" if workdir else "workspace"
    if group is not None:
        _fetch_group(group, job_id, dest, kind, name, as_json, uid)
        return
    if job_id is None:
        from vq.errors import UsageError

        raise UsageError("no job given", hint="vq fetch ID [DEST], or vq fetch --group G DEST")
    from vq.cli.short_ids import resolve_job_id

    job_id = resolve_job_id(job_id)
    if tar_stream or receipt is not None:
        import sys

        from vq.fetch.stream import acknowledge_fetch, stream_snapshot

        ctx = gateway(uid).local_context()
        if receipt is not None:
            echo_json(acknowledge_fetch(ctx, job_id, receipt))
        else:
            stream_snapshot(ctx, job_id, kind, sys.stdout.buffer)
        return
    if name is not None:
        result = gateway(uid).fetch_artifact(job_id, name, dest, kind)
    else:
        result = gateway(uid).fetch_tree(job_id, dest, kind)
    if as_json:
        echo_json(result.as_dict())
        return
    _echo_result(job_id, kind, result)


def _echo_result(job_id: str, kind: SourceKind, result: FetchResult) -> None:
    what = f"{result.artifact} from the {kind}" if result.artifact else f"the {kind}"
    verb = "refreshed" if result.replaced else "fetched"
    size = f"{result.files} file{'s' if result.files != 1 else ''}, {result.bytes} bytes"
    click.echo(f"{verb} {what} of job {job_id} → {result.dest} ({size})")
    for item in result.skipped:
        click.echo(f"  skipped {item['path']}: {item['reason']}", err=True)


def _fetch_group(
    group: str,
    first: str | None,
    second: Path | None,
    kind: SourceKind,
    name: str | None,
    as_json: bool,
    uid: int | None,
) -> None:
    """``vq fetch --group GROUP DEST``: each element's tree into ``DEST/<index>/``, in
    index order. An element that cannot be fetched (archived, gone, another owner's) is
    reported and the others are still fetched; the exit status is then non-zero."""
    from vq.errors import UsageError, VqError
    from vq.fetch.local import GroupFetchJSON, GroupFetchProblem

    if first is None or second is not None:
        raise UsageError(
            "--group takes one DEST and no job id",
            hint="vq fetch --group GROUP DEST (each element lands in DEST/<index>/)",
        )
    if name is not None:
        raise UsageError("--group fetches whole trees, not --name", hint="leave out --name")
    dest = Path(first)
    from vq.cli.control import group_members_in_order

    members = group_members_in_order(group)
    answer: GroupFetchJSON = {"group": group, "dest": str(dest), "elements": [], "failed": []}
    for index, member in members:
        try:
            result = gateway(uid).fetch_tree(member, dest / str(index), kind)
        except VqError as exc:
            problem: GroupFetchProblem = {"index": index, "job_id": member, "error": exc.message}
            answer["failed"].append(problem)
            if not as_json:
                click.echo(f"vq: error: [{index}] {member}: {exc.message}", err=True)
            continue
        answer["elements"].append({"index": index, **result.as_dict()})
        if not as_json:
            _echo_result(member, kind, result)
    if as_json:
        echo_json(answer)
    elif not answer["failed"]:
        click.echo(f"group {group}: {len(members)} elements → {dest}/<index>/")
    if answer["failed"]:
        raise SystemExit(1)
