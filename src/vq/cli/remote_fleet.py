"""``vq queue --all`` (``vq list --all``), ``vq overview --all`` and ``vq usage --by host``:
this queue and every configured host.

``--all`` means every configured host, not every user. Each host is asked in parallel
(:mod:`vq.remote.fanout`); the output adds a HOST column, shows a host that did not
answer as one row (its status, reason and last_ok_at), and ``--json`` carries
``hosts: [{name, status, error, last_ok_at}]``. Exit 0 only when every host answered,
else 11.
"""

from __future__ import annotations

from typing import Any

import click

from vq.cli.output import echo_json
from vq.errors import TransportError
from vq.remote.fanout import HostAnswer, fan_out
from vq.remote.fleet import load_fleet

__all__ = ["run_fleet", "run_usage_by_host"]


def _local_list(rest: list[str]) -> Any:
    from vq.cli.inspect import list_jobs, list_rows

    ctx = list_jobs.make_context("vq queue --all", list(rest))
    params = {
        "states": [s.upper() for s in ctx.params["states"]],
        "tags": list(ctx.params["tags"]),
        "name": ctx.params["name"],
        "since": None,
        "group": ctx.params["group"],
    }
    if ctx.params["since"]:
        from vq.cli.inspect import _since

        params["since"] = _since(ctx.params["since"])
    return list_rows(params)


def _local_overview() -> Any:
    from vq.cli.reports import overview_snapshot

    return overview_snapshot()


def run_fleet(verb: str, rest: list[str]) -> int:
    """Run the fleet form of ``verb`` (``queue``/``list``/``overview``); the exit status."""
    fleet = load_fleet()
    as_json = "--json" in rest
    forwarded = [word for word in rest if word != "--json"]
    if verb == "overview":
        answers = fan_out(fleet, ["overview", "--json"], _local_overview)
    else:
        answers = fan_out(fleet, ["list", "--json", *forwarded], lambda: _local_list(forwarded))
    hosts = [answer.summary() for answer in answers]
    if verb == "overview":
        if as_json:
            echo_json({"hosts": hosts, "overviews": {a.name: a.payload for a in answers}})
        else:
            _render_overview(answers)
    else:
        rows = [
            {"host": answer.name, **row}
            for answer in answers
            if answer.payload is not None
            for row in answer.payload.get("jobs", [])
        ]
        if as_json:
            echo_json({"jobs": rows, "hosts": hosts})
        else:
            _render_jobs(rows, answers)
    return 0 if all(a.status == "ok" for a in answers) else TransportError.exit_code


def _unanswered(answers: list[HostAnswer]) -> None:
    for answer in answers:
        if answer.status != "ok":
            last = (answer.last_ok_at or "never")[:19]
            click.echo(
                f"{answer.name:<14} {answer.status.upper():<12} {answer.error or ''} "
                f"(last ok: {last})"
            )


def _render_jobs(rows: list[dict[str, Any]], answers: list[HostAnswer]) -> None:
    click.echo(f"{'HOST':<14} {'ID':<12} {'STATE':<16} {'NAME':<20} COMMAND")
    for row in rows:
        command = " ".join(row.get("command") or [])
        click.echo(
            f"{row['host']:<14} {row['id']:<12} {row['state']:<16} "
            f"{(row.get('job_name') or '-')[:20]:<20} {command[:60]}"
        )
    _unanswered(answers)


def _render_overview(answers: list[HostAnswer]) -> None:
    click.echo(f"{'HOST':<14} {'PENDING':>8} {'RUNNING':>8} {'SUSPENDED':>9} {'TOTAL':>7}  DAEMON")
    for answer in answers:
        if answer.status != "ok" or not isinstance(answer.payload, dict):
            continue
        counts = answer.payload.get("counts", {})
        daemon = answer.payload.get("daemon", {})
        click.echo(
            f"{answer.name:<14} {counts.get('PENDING', 0):>8} {counts.get('RUNNING', 0):>8} "
            f"{counts.get('SUSPENDED', 0):>9} {answer.payload.get('total_jobs', 0):>7}  "
            f"{'running' if daemon.get('running') else 'stopped'}"
        )
    _unanswered(answers)


def run_usage_by_host(rest: list[str]) -> int:
    """``vq usage --by host [--since T] [--json]``: each authority's total as one group."""
    from vq.cli.reports import usage, usage_report

    ctx = usage.make_context("vq usage --by host", list(rest))
    since, as_json = ctx.params["since"], ctx.params["as_json"]
    words = ["usage", "--json", *(["--since", since] if since else [])]
    answers = fan_out(load_fleet(), words, lambda: usage_report("tag", since))
    groups = []
    for answer in answers:
        if answer.status == "ok" and isinstance(answer.payload, dict):
            total = answer.payload.get("total", {})
            groups.append({"key": answer.name, **{k: total.get(k, 0) for k in _USAGE_KEYS}})
    report = {
        "by": "host",
        "since": since,
        "groups": groups,
        "total": {k: round(sum(g[k] for g in groups), 6) for k in _USAGE_KEYS},
        "hosts": [answer.summary() for answer in answers],
    }
    if as_json:
        echo_json(report)
    else:
        click.echo(f"{'HOST':<14} {'JOBS':>6} {'WALL-H':>10} {'CPU-H':>10}")
        for group in groups:
            click.echo(
                f"{group['key']:<14} {group['jobs']:>6} {group['wall_hours']:>10.2f} "
                f"{group['cpu_hours']:>10.2f}"
            )
        _unanswered(answers)
    return 0 if all(a.status == "ok" for a in answers) else TransportError.exit_code


_USAGE_KEYS = ("jobs", "wall_hours", "cpu_hours")
