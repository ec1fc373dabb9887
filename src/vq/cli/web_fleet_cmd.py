"""Hidden ``vq web`` verbs a fleet console runs on each host over SSH.

``vq web fleet-snapshot --json``, ``vq web fleet-job ID --json`` and ``vq web fleet-list
--json --limit N [filters]`` print the payloads of :mod:`vq.web.fleet.snapshots` (one SSH
call per host per refresh). They are hidden from
``--help``: an interface between two vq installations, documented in docs/web.md.
"""

from __future__ import annotations

import click

from vq.cli.output import echo_json
from vq.protocol.answers import ListQuery

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


@click.command("fleet-list", hidden=True)
@click.option("--json", "as_json", is_flag=True, required=True, help="Print JSON (required).")
@click.option("--limit", type=click.IntRange(0), required=True, help="Rows to print at most.")
@click.option("--state", "states", multiple=True, help="Only jobs in this state (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Only jobs with this tag (repeatable).")
@click.option("--name", help="Only jobs whose name contains this text.")
@click.option("--since", help="Only jobs submitted since this ISO time.")
@click.option("--group", help="Only the elements of this array or chain group.")
def fleet_list(
    as_json: bool,
    limit: int,
    states: tuple[str, ...],
    tags: tuple[str, ...],
    name: str | None,
    since: str | None,
    group: str | None,
) -> None:
    """This queue's newest matching jobs and their number, for a fleet console."""
    from vq.gateway import since_moment
    from vq.web.fleet.snapshots import Snapshots

    moment = since_moment(since) if since else None
    filters: ListQuery = {
        "states": list(states),
        "tags": list(tags),
        "name": name,
        "since": moment.isoformat() if moment else None,
        "group": group,
    }
    echo_json(Snapshots().listing(filters, limit))


def register(group: click.Group) -> None:
    group.add_command(fleet_snapshot)
    group.add_command(fleet_job)
    group.add_command(fleet_list)
