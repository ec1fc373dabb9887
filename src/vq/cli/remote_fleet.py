"""``vq queue --all`` (``vq list --all``), ``vq overview --all`` and ``vq usage --by host``:
this queue and every configured host; ``vq top|overview|usage HOST``: one host.

``--all`` means every configured host, not every user. Each host is asked in parallel
(:mod:`vq.remote.fanout`); the output adds a HOST column, shows a host that did not
answer as one row (its status, reason and last_ok_at), and ``--json`` carries
``hosts: [{name, status, error, last_ok_at}]``. Exit 0 only when every host answered,
else 11.

The one-host views print the host's own answer (``--json``: its payload plus ``host`` and
the same ``hosts`` list); a host that does not answer within its ``ssh_timeout`` is the
same one row (``--json``: ``{host, hosts}``) and exit 11, never a traceback or a bare
transport error.
"""

from __future__ import annotations

from typing import Any, cast

import click
from pydantic import BaseModel

from vq.cli.output import echo_json
from vq.domain.text import escape_controls
from vq.errors import TransportError
from vq.hosts.health import read_health
from vq.protocol.answers import ListQuery, ListRow
from vq.protocol.remote_answers import ListAnswer, OverviewAnswer, TopAnswer, UsageAnswer
from vq.remote.fanout import HostAnswer, fan_out
from vq.remote.fleet import load_fleet
from vq.remote.host import RemoteHost

__all__ = ["HOST_VIEWS", "run_fleet", "run_host_view", "run_usage_by_host"]

#: Read verbs whose ``vq VERB HOST`` form is a fleet view of one host.
HOST_VIEWS = frozenset({"top", "overview", "usage"})


def _local_list(rest: list[str]) -> Any:
    from vq.cli.inspect import list_jobs, list_rows

    ctx = list_jobs.make_context("vq queue --all", list(rest))
    params: ListQuery = {
        "states": [s.upper() for s in ctx.params["states"]],
        "tags": list(ctx.params["tags"]),
        "name": ctx.params["name"],
        "since": None,
        "group": ctx.params["group"],
    }
    if ctx.params["since"]:
        from vq.cli.inspect import _since

        params["since"] = _since(ctx.params["since"])
    return list_rows(params, ctx.params["uid"])


def _local_overview() -> Any:
    from vq.cli.reports import overview_snapshot

    return overview_snapshot()


class HostedRow(ListRow):
    """A ``vq list --json`` row of one authority (checked by its ListAnswer model: the
    ``id`` and ``state``; the other fields as that host sent them) and its ``host``."""

    host: str


def run_fleet(verb: str, rest: list[str]) -> int:
    """Run the fleet form of ``verb`` (``queue``/``list``/``overview``); the exit status."""
    fleet = load_fleet()
    as_json = "--json" in rest
    forwarded = [word for word in rest if word != "--json"]
    if verb == "overview":
        answers = fan_out(fleet, ["overview", "--json"], OverviewAnswer, _local_overview)
    else:
        words = ["list", "--json", *forwarded]
        answers = fan_out(fleet, words, ListAnswer, lambda: _local_list(forwarded))
    hosts = [answer.summary() for answer in answers]
    if verb == "overview":
        if as_json:
            echo_json({"hosts": hosts, "overviews": {a.name: a.payload for a in answers}})
        else:
            _render_overview(answers)
    else:
        rows = [
            cast(HostedRow, {"host": answer.name, **row})
            for answer in answers
            if answer.payload is not None
            for row in answer.payload.get("jobs", [])
        ]
        if as_json:
            echo_json({"jobs": rows, "hosts": hosts})
        else:
            _render_jobs(rows, answers, raw="--raw" in rest)
    return 0 if all(a.status == "ok" for a in answers) else TransportError.exit_code


def _unanswered(answers: list[HostAnswer]) -> None:
    for answer in answers:
        if answer.status != "ok":
            last = (answer.last_ok_at or "never")[:19]
            click.echo(
                f"{answer.name:<14} {answer.status.upper():<12} "
                f"{escape_controls(answer.error or '')} (last ok: {last})"
            )


#: The fleet table's columns; the last one (COMMAND) is not padded.
_FLEET_COLUMNS = ("HOST", "ID", "STATE", "NAME", "ELAPSED", "EXIT", "COMMAND")
#: Columns at least this wide, so the rows of hosts that did not answer line up.
_MIN_WIDTHS = {"HOST": 14, "ID": 12}
#: Columns cut (with an ellipsis) past this many characters; ids are never cut.
_CUT = {"NAME": 20, "COMMAND": 60}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number(value: object) -> float | None:
    """A row's number as sent (another host's answer), or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _fleet_cells(row: HostedRow) -> dict[str, str]:
    """One row's cells (its text already escaped unless ``--raw``)."""
    from vq.domain.durations import format_duration

    exit_code = _number(row.get("exit_code"))
    elapsed = _number(row.get("elapsed_seconds"))
    cells = {
        "HOST": row["host"],
        "ID": row["id"],
        # a lane job's cluster phase (``queued (slurm: Priority)``) when its host words one
        "STATE": str(row.get("phase_label") or row["state"]),
        "NAME": row.get("job_name") or "-",
        "ELAPSED": format_duration(elapsed) if elapsed is not None and elapsed >= 0 else "-",
        "EXIT": "-" if exit_code is None else str(int(exit_code)),
        "COMMAND": " ".join(str(word) for word in row.get("command") or []),
    }
    return {name: _cut(text, _CUT[name]) if name in _CUT else text for name, text in cells.items()}


def _render_jobs(rows: list[HostedRow], answers: list[HostAnswer], *, raw: bool) -> None:
    """The fleet table: ``vq queue``'s columns (ELAPSED and EXIT included) after HOST; every
    row's text with control characters escaped unless ``raw``, by the same function as
    ``vq queue`` (:func:`vq.cli.render_text.escaped`), before a long name or command is
    cut. Ids are never cut; one job per line."""
    from vq.cli.render_text import escaped

    table = [dict(zip(_FLEET_COLUMNS, _FLEET_COLUMNS, strict=True))]
    table += [_fleet_cells(row) for row in (rows if raw else escaped(rows))]
    widths = {
        name: max(_MIN_WIDTHS.get(name, 0), *(len(cells[name]) for cells in table))
        for name in _FLEET_COLUMNS[:-1]
    }
    for cells in table:
        padded = [cells[name].ljust(widths[name]) for name in _FLEET_COLUMNS[:-1]]
        click.echo(" ".join([*padded, cells["COMMAND"]]).rstrip())
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
    answers = fan_out(load_fleet(), words, UsageAnswer, lambda: usage_report("tag", since))
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


_HOST_VIEW_ANSWERS: dict[str, type[BaseModel]] = {
    "top": TopAnswer,
    "overview": OverviewAnswer,
    "usage": UsageAnswer,
}


def run_host_view(host: RemoteHost, verb: str, rest: list[str]) -> int:
    """``vq top|overview|usage HOST …`` (see the module docstring); the exit status."""
    import sys

    from vq.domain.text import escape_control_bytes

    as_json = "--json" in rest
    words = [verb, *rest]
    try:
        result = host.run(words, deadline_s=host.timeout)
        payload = None
        if result.rc == 0 and as_json:
            payload = host.read(words, result.stdout, _HOST_VIEW_ANSWERS[verb])
    except TransportError as exc:
        health = read_health(host.state_root, host.name)
        status = health.status if health.status in ("unreachable", "down") else "invalid"
        answer = HostAnswer(host.name, status, error=exc.message, last_ok_at=health.last_ok_at)
        if as_json:
            echo_json({"host": host.name, "hosts": [answer.summary()]})
        else:
            _unanswered([answer])
        return TransportError.exit_code
    if payload is not None:
        answered = HostAnswer(
            host.name, "ok", last_ok_at=read_health(host.state_root, host.name).last_ok_at
        )
        echo_json({**payload, "host": host.name, "hosts": [answered.summary()]})
    else:
        sys.stdout.buffer.write(escape_control_bytes(result.stdout))
        sys.stdout.flush()
    sys.stderr.buffer.write(escape_control_bytes(result.stderr))
    sys.stderr.flush()
    return result.rc
