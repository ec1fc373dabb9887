"""Hidden ``vq web`` verbs a fleet console runs on each host over SSH.

``vq web fleet-snapshot --json`` and ``vq web fleet-job ID --json`` print the payloads of
:mod:`vq.web.fleet.snapshots` (one SSH call per host per refresh). They are hidden from
``--help``: an interface between two vq installations, documented in docs/web.md.
"""

from __future__ import annotations

import click

from vq.cli.output import echo_json

__all__ = ["register"]


@click.command("fleet-snapshot", hidden=True)
@click.option("--json", "as_json", is_flag=True, required=True, help="Print JSON (required).")
def fleet_snapshot(as_json: bool) -> None:
    """This queue's summary and newest jobs, for a fleet console."""
    from vq.web.fleet.snapshots import Snapshots

    echo_json(Snapshots().host())


@click.command("fleet-job", hidden=True)
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, required=True, help="Print JSON (required).")
def fleet_job(job_id: str, as_json: bool) -> None:
    """One job's status, timeline, log tails, samples and receipt, for a fleet console."""
    from vq.web.fleet.snapshots import Snapshots

    echo_json(Snapshots().job(job_id))


def register(group: click.Group) -> None:
    group.add_command(fleet_snapshot)
    group.add_command(fleet_job)
