"""``vq profiles [--json]``: the ``[profile.NAME]`` presets of the configuration."""

from __future__ import annotations

import click

from vq.cli.common import echo_json

__all__ = ["profiles"]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print {name: {field: value}}.")
def profiles(as_json: bool) -> None:
    """List submit presets (use one with `vq submit --profile NAME`; flags given win)."""
    from vq.config.settings import load_settings

    presets = {
        name: profile.model_dump(exclude_none=True)
        for name, profile in sorted(load_settings().profile.items())
    }
    if as_json:
        echo_json(presets)
        return
    if not presets:
        click.echo("no profiles configured (add [profile.NAME] sections to config.toml)")
        return
    from rich.table import Table

    from vq.cli.rich_console import human_console

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("PROFILE", "SETTINGS"):
        table.add_column(column)
    for name, values in presets.items():
        table.add_row(name, "  ".join(f"{k}={v}" for k, v in values.items()) or "-")
    human_console().print(table)
