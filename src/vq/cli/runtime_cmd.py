"""``vq runtime deploy DIR --root ROOT [--lane LANE --program PROG [--version V]] [--json]``:
deploy a verified runtime generation, here or to a scheduler lane's cluster."""

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
@click.option(
    "--lane",
    default=None,
    help="Deploy to this scheduler lane's cluster (ROOT is a path there) and record it.",
)
@click.option(
    "--program",
    default=None,
    help="With --lane: the managed program this runtime is (its lane submits use it).",
)
@click.option("--version", "version", default=None, help="With --lane: the version to record.")
@click.option("--json", "as_json", is_flag=True, help="Print the generation as JSON.")
def deploy(
    directory: Path,
    root: Path,
    lane: str | None,
    program: str | None,
    version: str | None,
    as_json: bool,
) -> None:
    """Copy DIRECTORY into ROOT/generations/<digest>/payload, verified, with no links and
    nothing group or world writable, and select it as ROOT/current. The digest is what a
    job names with `vq submit --runtime-root ROOT --runtime-artifact DIGEST`.

    With --lane LANE --program PROG the generation is shipped over the lane's SSH to ROOT
    on its cluster, verified there with the compute node's own check, and recorded as
    the lane's last verified deployment of PROG: `vq submit LANE --program PROG` then
    pins and binds jobs to it (docs/scheduler.md, "Runtime identity")."""
    from vq.services.runtime_generations import deploy as deploy_generation

    if lane is not None or program is not None or version is not None:
        _deploy_to_lane(directory, str(root), lane, program, version, as_json)
        return
    done = deploy_generation(directory, root, datetime.now(UTC).isoformat(timespec="seconds"))
    if as_json:
        echo_json(done)
        return
    verb = "deployed" if done["created"] else "already deployed:"
    click.echo(f"{verb} generation {done['digest']} ({done['entries']} entries)")
    click.echo(f"payload {done['payload']}")


def _deploy_to_lane(
    directory: Path,
    root: str,
    lane_name: str | None,
    program: str | None,
    version: str | None,
    as_json: bool,
) -> None:
    from vq.cli.common import paths
    from vq.config.hosts import lanes_of
    from vq.config.settings import load_settings
    from vq.errors import NotFound, UsageError
    from vq.services.lane_runtime_probe import ssh_runner_for
    from vq.services.runtime_deployments import deploy_to_lane
    from vq.transport.local import LocalRunner

    if lane_name is None or program is None:
        raise UsageError(
            "--lane and --program go together (--version needs both)",
            hint="vq runtime deploy DIR --root ROOT --lane LANE --program PROG",
        )
    lanes = lanes_of(load_settings().hosts)
    lane = lanes.get(lane_name)
    if lane is None:
        known = ", ".join(sorted(lanes)) or "none are configured"
        raise NotFound(
            f"{lane_name!r} is not a scheduler lane of this queue",
            hint=f"name one of its [hosts.NAME] lanes ({known})",
        )
    if lane.driver != "localhost":
        raise UsageError(
            f"lane {lane_name} is driven by host {lane.driver}'s daemon: its deployments "
            "are recorded there",
            hint=f"run this on {lane.driver}",
        )
    done = deploy_to_lane(
        directory,
        root,
        lane,
        program,
        runner=ssh_runner_for(lane),
        local=LocalRunner(),
        paths=paths(),
        now=datetime.now(UTC).isoformat(timespec="seconds"),
        version=version,
    )
    if as_json:
        echo_json(done)
        return
    click.echo(
        f"deployed generation {done['digest']} ({done['entries']} entries) to lane "
        f"{lane_name}, verified there"
    )
    click.echo(f"payload {done['payload']}")
    click.echo(f"recorded as the last verified deployment of {program} on {lane_name}")
