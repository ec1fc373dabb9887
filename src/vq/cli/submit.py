"""``vq submit [SOURCE] [options] -- COMMAND...`` as a Click command.

Prints the bare job id (``--json``: the whole spec plus ``capacity_warnings``). With a
daemon up, the daemon validates and writes the spec (and dispatches at once); without
one the CLI writes the PENDING spec itself and the job runs when a daemon starts.
The options come from :data:`vq.cli.submit_options.SUBMIT_OPTIONS`, shared with the
Click-free fast path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from vq.cli.submit_fast import emit, submit_params
from vq.cli.submit_options import GIVEN, SUBMIT_OPTIONS, build_params
from vq.cli.types import AsciiIntRange

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


def _with_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(SUBMIT_OPTIONS):
        if option.kind == "flag":
            decorator = click.option(option.flag, option.dest, is_flag=True, help=option.help)
        elif option.kind == "multi":
            decorator = click.option(option.flag, option.dest, multiple=True, help=option.help)
        elif option.kind == "int":
            decorator = click.option(
                option.flag,
                option.dest,
                type=AsciiIntRange(option.minimum, option.maximum),
                default=option.default,
                show_default=option.default is not None,
                help=option.help,
            )
        else:
            decorator = click.option(option.flag, option.dest, help=option.help)
        fn = decorator(fn)
    return fn


@click.command(cls=_SplitAtDoubleDash)
@click.argument("positional", nargs=-1, metavar="[SOURCE]")
@_with_options
@click.pass_context
def submit(ctx: click.Context, /, positional: tuple[str, ...], **values: Any) -> None:
    """Submit COMMAND (after `--`) as a job, optionally with a SOURCE workspace.

    SOURCE is copied (file, directory) or extracted (.tar, .tar.gz, .tar.bz2, .zip) into
    the job's workspace, where the command runs. The job gets the submitting shell's
    environment (--export ALL) unless --export or [submit] export says otherwise; on
    another HOST or a scheduler LANE only what --export NAME and --env name.
    Any unique prefix (4+ characters) of a job id works for --after/--after-any.

    Example:

    \b
        vq submit --cpus 2 --mem-mb 500 --wall-time 10m -- python3 -c 'print(42)'
    """
    for option in SUBMIT_OPTIONS:
        if option.kind == "multi":
            values[option.dest] = list(values[option.dest])
    values[GIVEN] = {
        name
        for name in values
        if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
    }
    params = build_params(list(positional), values, ctx.meta["vq_command"])
    emit(submit_params(params), values["as_json"])
