"""Read verbs: ``vq list``, ``vq status``, ``vq events``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from vq.cli.common import echo_json, gateway, owner_option, since_moment
from vq.cli.job_ids import GROUP_ID, JOB_ID

if TYPE_CHECKING:
    from vq.protocol.answers import GroupSummary, ListAnswer, ListQuery, ListRow

__all__ = ["events", "list_jobs", "status"]


def _since(text: str | None) -> str | None:
    moment = since_moment(text)
    return moment.isoformat() if moment else None


@click.command("list")
@click.option("--state", "states", multiple=True, help="Only jobs in this state (repeatable).")
@click.option("--tag", "tags", multiple=True, help="Only jobs with this tag (repeatable).")
@click.option("--name", help="Only jobs whose name contains this text.")
@click.option("--since", help="Only jobs submitted since an ISO time or a duration ago (2h).")
@click.option("--group", type=GROUP_ID, help="Only the elements of this array or chain group.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the job ids, one per line.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON: {jobs: [...], quarantined: [...]}."
)
@click.option("--raw", is_flag=True, help="Print control characters in names unescaped.")
@click.option(
    "--uid",
    type=click.IntRange(0, 2**31 - 1),
    help="Multi-user mode: only this owner's jobs (a user's CLI reads that owner's tree).",
)
def list_jobs(
    states: tuple[str, ...],
    tags: tuple[str, ...],
    name: str | None,
    since: str | None,
    group: str | None,
    quiet: bool,
    as_json: bool,
    raw: bool,
    uid: int | None = None,
) -> None:
    """List jobs, oldest first. Unreadable spec files are reported, never hidden.

    Ids are always shown in full; any unique prefix of 4 or more characters names a job
    in every other command.
    """
    params: ListQuery = {
        "states": [s.upper() for s in states],
        "tags": list(tags),
        "name": name,
        "since": _since(since),
        "group": group,
    }
    result = list_rows(params, uid)
    if group is not None:
        result["group"] = group_summary(group, result["jobs"])
    if as_json:
        echo_json(result)
        return
    if quiet:
        for row in result["jobs"]:
            click.echo(row["id"])
        return
    from vq.cli.render import print_jobs

    print_jobs(result["jobs"], result["quarantined"], raw=raw)
    if group is not None:
        click.echo(result["group"]["summary"])


def list_rows(params: ListQuery, uid: int | None = None) -> ListAnswer:
    """``{"jobs", "quarantined"}`` from the daemon, or from the disk without one.

    ``uid`` (multi-user mode): only the rows whose ``submitter`` is that owner, with
    ``counts`` counted over them. Discovery is not gated by the ownership helper: a
    user's CLI lists the owner's tree when the filesystem lets it read it."""
    result = gateway(uid).list_rows(params)
    if uid is None:
        return result
    rows = [row for row in result["jobs"] if row.get("submitter") == str(uid)]
    counts = dict.fromkeys(result.get("counts") or {}, 0)
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    mine: ListAnswer = {**result, "jobs": rows, "counts": counts}
    return mine


def group_summary(group: str, rows: list[ListRow]) -> GroupSummary:
    """Counts per state of a group's elements, and one human line."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    parts = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    return {
        "group_id": group,
        "total": len(rows),
        "counts": counts,
        "summary": f"group {group}: {len(rows)} jobs" + (f": {parts}" if parts else ""),
    }


@click.command()
@click.argument("job_id", required=False, type=JOB_ID)
@click.option(
    "--group", type=GROUP_ID, help="Summarize an array or chain group instead of one job."
)
@click.option("--json", "as_json", is_flag=True, help="Print the spec and derived fields as JSON.")
@click.option("--raw", is_flag=True, help="Print control characters in names unescaped.")
@click.option(
    "--uid",
    type=click.IntRange(0, 2**31 - 1),
    help="Multi-user mode: the copy in this owner's tree (an id several owners hold).",
)
def status(
    job_id: str | None, group: str | None, as_json: bool, raw: bool, uid: int | None
) -> None:
    """Everything known about one job (or a one-line summary of a group)."""
    if group is not None or job_id is None:
        if group is None:
            from vq.errors import UsageError

            raise UsageError("give a job id or --group", hint="vq status ID")
        rows = list_rows({"group": group})["jobs"]
        if not rows:
            from vq.errors import NotFound

            raise NotFound(f"no jobs in group {group}", hint="`vq list` shows group ids")
        summary = group_summary(group, rows)
        if as_json:
            echo_json({**summary, "jobs": rows})
        else:
            click.echo(summary["summary"])
        return
    view = gateway(uid).status(job_id)
    if as_json:
        echo_json(view)
        return
    from vq.cli.render import print_status

    print_status(view, raw=raw)


@click.command()
@click.argument("job_id", type=JOB_ID)
@click.option("--json", "as_json", is_flag=True, help="Print the events as a JSON list.")
@click.option("--raw", is_flag=True, help="Print control characters in names unescaped.")
@owner_option
def events(job_id: str, as_json: bool, raw: bool, uid: int | None = None) -> None:
    """The job's timeline from _vq/events.jsonl (best-effort history; the spec is the truth)."""
    timeline = gateway(uid).events(job_id)  # unknown, corrupt or archived ids fail clearly
    if as_json:
        echo_json(timeline)
        return
    from vq.cli.render import print_events

    print_events(timeline, raw=raw)
