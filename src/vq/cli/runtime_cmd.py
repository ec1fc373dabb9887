"""``vq runtime deploy DIR --root ROOT [--json]``: deploy a verified runtime generation."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from vq.cli.output import echo_json

__all__ = ["runtime"]


@click.group()
def runtime() -> None:
    """Runtime generations: immutable runtime payloads a job can be bound to."""


@runtime.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--root",
    required=True,
    type=click.Path(path_type=Path),
    help="The deployment root (absolute) that holds the generations.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the generation as JSON.")
def deploy(directory: Path, root: Path, as_json: bool) -> None:
    """Copy DIRECTORY into ROOT/generations/<digest>/payload, verified, with no links and
    nothing group or world writable, and select it as ROOT/current. The digest is what a
    job names with `vq submit --runtime-root ROOT --runtime-artifact DIGEST`."""
    from vq.services.runtime_generations import deploy as deploy_generation

    done = deploy_generation(directory, root, datetime.now(UTC).isoformat(timespec="seconds"))
    if as_json:
        echo_json(done)
        return
    verb = "deployed" if done["created"] else "already deployed:"
    click.echo(f"{verb} generation {done['digest']} ({done['entries']} entries)")
    click.echo(f"payload {done['payload']}")
