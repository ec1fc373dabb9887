"""``vq programs [--json]``: probe every ``[programs.NAME]`` entry and report it (§3.4).

The probes run here, in the CLI process, against the configuration this process reads
(the same files the daemon reads). Each entry is available or unavailable with the
reason; ``--json`` prints a list of status objects (``name``, ``kind``, ``available``,
``reason``, ``executable``, ``python``, ``git_dir``, ``branch``, ``git_sha``,
``import_version``). The exit code is 0 either way; ``vq doctor`` warns per unavailable
program.
"""

from __future__ import annotations

import click

from vq.cli.common import echo_json

__all__ = ["programs"]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print a list of status objects.")
def programs(as_json: bool) -> None:
    """Probe the registered programs (use one with `vq submit --program NAME`)."""
    from vq.config.settings import load_settings
    from vq.services.programs import probe_all

    statuses = probe_all(load_settings().programs)
    if as_json:
        echo_json([status.as_dict() for status in statuses])
        return
    if not statuses:
        click.echo("no programs registered (add [programs.NAME] sections to config.toml)")
        return
    from rich.table import Table
    from rich.text import Text

    from vq.cli.rich_console import human_console

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("PROGRAM", "KIND", "STATUS", "VERSION/SHA", "PATH / WHY"):
        table.add_column(column, overflow="fold")
    for status in statuses:
        state = (
            Text("available", style="green")
            if status.available
            else Text("unavailable", style="bold red")
        )
        identity = " ".join(
            part
            for part in (status.import_version, status.git_sha[:12] if status.git_sha else None)
            if part
        )
        where = status.executable or status.python or "-"
        table.add_row(
            status.name,
            status.kind,
            state,
            identity or "-",
            where if status.available else f"{status.reason}",
        )
    human_console().print(table)
