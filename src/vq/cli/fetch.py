"""``vq fetch ID [DEST] [--workdir] [--name FILE] [--json]``: copy a job's files out (§4.6).

Disk only (no daemon needed); the work is :mod:`vq.fetch.local`. Prints one line for
humans, or the :class:`~vq.fetch.local.FetchResult` document with ``--json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from vq.cli.common import echo_json, gateway, owner_option
from vq.cli.job_ids import JOB_ID

__all__ = ["fetch"]


@click.command()
@click.argument("job_id", metavar="ID", type=JOB_ID)
@click.argument("dest", required=False, type=click.Path(path_type=Path))
@click.option("--workdir", is_flag=True, help="Copy the job's workdir ($VQ_WORKDIR) instead.")
@click.option("--name", "name", metavar="FILE", help="Copy just this file (a relative path).")
@click.option("--json", "as_json", is_flag=True, help="Print what was fetched as JSON.")
# Hidden: the owning side of `vq fetch HOST ID` (vq.fetch.stream).
@click.option("--tar-stream", is_flag=True, hidden=True)
@click.option("--ack-fetched", "receipt", hidden=True)
@owner_option
def fetch(
    job_id: str,
    dest: Path | None,
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
    """
    kind: Literal["workspace", "workdir"] = "workdir" if workdir else "workspace"
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
    what = f"{result.artifact} from the {kind}" if result.artifact else f"the {kind}"
    verb = "refreshed" if result.replaced else "fetched"
    size = f"{result.files} file{'s' if result.files != 1 else ''}, {result.bytes} bytes"
    click.echo(f"{verb} {what} of job {job_id} → {result.dest} ({size})")
    for item in result.skipped:
        click.echo(f"  skipped {item['path']}: {item['reason']}", err=True)
