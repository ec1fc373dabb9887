"""Read verbs: ``vq list``, ``vq status``, ``vq events``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click

from vq.cli.common import call_daemon, echo_json, local_context, paths
from vq.domain.durations import parse_duration

__all__ = ["events", "list_jobs", "status"]


def _since(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = datetime.now(UTC) - timedelta(seconds=parse_duration(text))
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.astimezone(UTC).isoformat()


@click.command("list")
@click.option("--state", "states", multiple=True, help="Only jobs in this state (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Only jobs with this tag (repeatable).")
@click.option("--name", help="Only jobs whose name contains this text.")
@click.option("--since", help="Only jobs submitted since an ISO time or a duration ago (2h).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON: {jobs: [...], quarantined: [...]}."
)
def list_jobs(
    states: tuple[str, ...],
    tags: tuple[str, ...],
    name: str | None,
    since: str | None,
    as_json: bool,
) -> None:
    """List jobs, oldest first. Unreadable spec files are reported, never hidden."""
    params: dict[str, Any] = {
        "states": [s.upper() for s in states],
        "tags": list(tags),
        "name": name,
        "since": _since(since),
    }
    result = call_daemon("list", params)
    if result is None:
        result = _list_locally(params)
    if as_json:
        echo_json(result)
        return
    from vq.cli.render import print_jobs

    print_jobs(result["jobs"], result["quarantined"])


def _list_locally(params: dict[str, Any]) -> dict[str, Any]:
    from vq.services.query import ListFilter, list_row, select

    ctx = local_context()
    flt = ListFilter.from_params(params)
    scan = ctx.store.scan()
    now = ctx.now()
    return {
        "jobs": [list_row(spec, ctx.caps, now) for spec in select(scan.specs.values(), flt)],
        "quarantined": [item.as_dict() for item in scan.quarantined.values()],
    }


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the spec and derived fields as JSON.")
def status(job_id: str, as_json: bool) -> None:
    """Everything known about one job."""
    view = call_daemon("status", {"id": job_id})
    if view is None:
        from vq.services.query import status_view

        ctx = local_context()
        view = status_view(ctx.store.read(job_id), ctx.paths, ctx.caps, ctx.now())
    if as_json:
        echo_json(view)
        return
    from vq.cli.render import print_status

    print_status(view)


@click.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the events as a JSON list.")
def events(job_id: str, as_json: bool) -> None:
    """The job's timeline from _vq/events.jsonl (best-effort history; the spec is the truth)."""
    from vq.store.events import read_events
    from vq.store.specs import SpecStore

    state = paths()
    SpecStore(state).read(job_id)  # unknown or corrupt ids fail clearly
    timeline = read_events(state, job_id)
    if as_json:
        echo_json(timeline)
        return
    from vq.cli.render import print_events

    print_events(timeline)
