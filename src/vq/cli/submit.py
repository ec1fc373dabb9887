"""``vq submit [SOURCE] [options] -- COMMAND...``.

Prints the bare job id (``--json``: the whole spec plus ``capacity_warnings``). With a
daemon up, the daemon validates and writes the spec (and dispatches at once); without
one the CLI writes the PENDING spec itself and the job runs when a daemon starts.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from vq.cli.common import call_daemon, echo_json, local_context, warn
from vq.domain.durations import parse_duration
from vq.errors import InvalidInput, NotFound, UsageError

__all__ = ["submit"]


class _SplitAtDoubleDash(click.Command):
    """Keeps everything after the first ``--`` as the job's argv, untouched by Click."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            ctx.meta["vq_command"] = args[cut + 1 :]
            args = args[:cut]
        else:
            ctx.meta["vq_command"] = []
        return super().parse_args(ctx, args)


def _not_before(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = datetime.now(UTC) + timedelta(seconds=parse_duration(text))
    if moment.tzinfo is None:
        moment = moment.astimezone()  # a naive time is the user's local time
    return moment.astimezone(UTC).isoformat()


def _source(positional: tuple[str, ...]) -> str | None:
    if not positional:
        return None
    if len(positional) > 1:
        raise UsageError(
            f"expected at most one SOURCE before `--`, got {len(positional)}: "
            + " ".join(positional),
            hint="remote HOST targets are not configured; put the command after `--`",
        )
    path = os.path.abspath(positional[0])
    if not os.path.lexists(path):
        raise NotFound(
            f"source {positional[0]!r} does not exist",
            hint="SOURCE is a file, a directory or a .tar/.tar.gz/.tar.bz2/.zip archive",
        )
    return path


@click.command(cls=_SplitAtDoubleDash, context_settings={"ignore_unknown_options": False})
@click.argument("positional", nargs=-1, metavar="[SOURCE]")
@click.option("--cpus", type=click.IntRange(1, 4096), default=1, show_default=True)
@click.option("--mem-mb", type=click.IntRange(1), help="Memory limit in MB.")
@click.option("--wall-time", "wall_time", help="Wall-time limit, e.g. 90s, 10m, 2h30m.")
@click.option("--priority", type=click.IntRange(-1000, 1000), default=0, show_default=True)
@click.option("--not-before", help="Start no earlier than an ISO time or a delay (30m).")
@click.option("--job-name", help="A name for the job.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option(
    "--retry",
    "retry_max",
    type=click.IntRange(0, 100),
    default=0,
    help="Rerun a failing command up to N more times.",
)
@click.option("--cwd", type=click.Path(file_okay=False), help="Run here instead of the workspace.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole spec as JSON.")
@click.pass_context
def submit(
    ctx: click.Context,
    positional: tuple[str, ...],
    cpus: int,
    mem_mb: int | None,
    wall_time: str | None,
    priority: int,
    not_before: str | None,
    job_name: str | None,
    tags: tuple[str, ...],
    retry_max: int,
    cwd: str | None,
    as_json: bool,
) -> None:
    """Submit COMMAND (after `--`) as a job, optionally with a SOURCE workspace.

    SOURCE is copied (file, directory) or extracted (.tar, .tar.gz, .tar.bz2, .zip) into
    the job's workspace, where the command runs. Example:

        vq submit --cpus 2 --mem-mb 500 --wall-time 10m -- python3 -c 'print(42)'
    """
    command: list[str] = ctx.meta["vq_command"]
    if not command:
        raise UsageError(
            "no command given", hint="put the command after `--`: vq submit -- echo hello"
        )
    params: dict[str, Any] = {
        "command": command,
        "source": _source(positional),
        "cwd": os.path.abspath(cwd) if cwd else None,
        "cpus": cpus,
        "mem_mb": mem_mb,
        "wall_time_seconds": parse_duration(wall_time) if wall_time else None,
        "priority": priority,
        "not_before": _not_before(not_before),
        "job_name": job_name,
        "tags": list(tags),
        "retry_max": retry_max,
    }
    if params["cwd"] and not os.path.isdir(params["cwd"]):
        raise InvalidInput(f"--cwd {cwd!r} is not a directory")
    payload = call_daemon("submit", params)
    if payload is None:
        payload = _submit_locally(params)
    for message in payload.get("capacity_warnings", []):
        warn(message)
    if as_json:
        echo_json(payload)
    else:
        click.echo(payload["id"])


def _submit_locally(params: dict[str, Any]) -> dict[str, Any]:
    from vq.protocol.messages import SubmitParams, parse_params
    from vq.services.submit import submit as submit_service
    from vq.services.submit import submit_payload

    result = submit_service(local_context(), parse_params(SubmitParams, params))
    return submit_payload(result)
