"""``vq daemon install-service [--force] [--json]``: the systemd user unit (§5.2).

Writes ``~/.config/systemd/user/vq.service`` (``$XDG_CONFIG_HOME`` honoured) running
``vq daemon run`` with ``KillMode=process`` (jobs outlive a daemon restart), passing on
``VQ_STATE_DIR``/``VQ_CONFIG_DIR``/``VQ_ARCHIVE_DIR``/``XDG_DATA_HOME`` when set, and
prints the ``systemctl --user`` commands to enable it. An existing unit is kept (exit 6)
unless ``--force``. See docs/cgroup-setup.md.
"""

from __future__ import annotations

import os

import click

from vq.cli.common import echo_json

__all__ = ["install_service"]


@click.command("install-service")
@click.option("--force", is_flag=True, help="Overwrite an existing vq.service.")
@click.option("--json", "as_json", is_flag=True, help='{"path", "replaced", "commands"}.')
def install_service(force: bool, as_json: bool) -> None:
    """Install a systemd user unit that runs the daemon; print how to enable it."""
    from vq.services.service_unit import (
        enable_commands,
        install_unit,
        render_unit,
        unit_path,
        vq_command,
    )

    path = unit_path(os.environ)
    replaced = install_unit(path, render_unit(vq_command(), os.environ), force)
    commands = enable_commands()
    if as_json:
        echo_json({"path": str(path), "replaced": replaced, "commands": commands})
        return
    click.echo(f"{'replaced' if replaced else 'wrote'} {path}")
    click.echo("enable and start it with:")
    for command in commands:
        click.echo(f"  {command}")
