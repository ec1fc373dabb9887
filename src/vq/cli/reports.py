"""``vq overview`` and ``vq usage`` (§6.3): on-demand queue and accounting snapshots.

Sources:

* ``overview`` asks a running daemon (``ping`` for its caps and health, ``list`` for the
  rows, the same index ``vq list`` shows). When none answers it reads the spec files
  itself and the caps the daemon last advertised (``daemon_capacity.json``); with no
  readable snapshot the caps are unknown, so ``capacity`` and
  ``over_capacity_pending_jobs`` are null. The daemon is reported as not running.
* ``usage`` always reads the spec files on disk: they are the durable record, and only
  they carry the pause totals the wall-time accounting subtracts. No daemon is needed.

The JSON schemas are built by :mod:`vq.services.reports` and documented in
``docs/json.md``. rich is imported only inside the rendering functions.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import click

from vq.cli.common import echo_json, gateway, since_moment
from vq.domain.durations import format_duration

if TYPE_CHECKING:
    from rich.console import Console

    from vq.protocol.report_answers import LaneUse, OverviewAnswer, UsageAnswer

__all__ = ["lane_line", "overview", "overview_snapshot", "usage", "usage_report"]


def _console() -> Console:
    from vq.cli.rich_console import human_console

    return human_console()


# --- vq overview ------------------------------------------------------------------------


def overview_snapshot() -> OverviewAnswer:
    """Gather the inputs (daemon, else disk) and build one overview snapshot."""
    return gateway().overview()


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot as JSON.")
def overview(as_json: bool) -> None:
    """Queue counts, recent outcomes, reserved capacity and daemon health at a glance."""
    snap = overview_snapshot()
    if as_json:
        echo_json(snap)
        return
    _print_overview(snap)


def _owner_name(uid: int) -> str:
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} ({uid})"
    except KeyError:
        return str(uid)


def lane_line(lanes: LaneUse) -> str:
    """The scheduler lanes' live jobs in one line (never counted against this host)."""
    return (
        f"{lanes['jobs']} job(s), {lanes['cpus']} cpus on clusters: "
        f"{lanes['running_jobs']} running ({lanes['running_cpus']} cpus), "
        f"{lanes['unconfirmed_scheduler_jobs']} not confirmed running "
        f"({lanes['unconfirmed_scheduler_cpus']} cpus, in pending); "
        "not counted against this host's caps"
    )


def _percent(used: int, cap: int | None) -> str:
    return f" ({100.0 * used / cap:.0f}%)" if cap else ""


def _print_overview(snap: OverviewAnswer) -> None:
    from rich.text import Text

    out = Text()
    moment = datetime.fromisoformat(snap["generated_at"]).astimezone()
    out.append(f"vq overview  {moment:%H:%M:%S}  ", style="bold")
    daemon = snap["daemon"]
    if daemon["running"]:
        up = format_duration(daemon["uptime_seconds"])
        out.append(
            f"daemon: running (pid {daemon['pid']}, up {up}, cgroups {daemon['cgroup_mode']})",
            style="green",
        )
    else:
        out.append("daemon: not running", style="bold yellow")
        known = snap["capacity"] is not None
        out.append(
            " (read from disk; caps as last advertised)"
            if known
            else " (read from disk; caps unknown)",
            style="dim",
        )
    counts = [f"{n} {state.lower()}" for state, n in snap["counts"].items() if n]
    out.append("\njobs: " + (", ".join(counts) if counts else "none"))
    out.append(f" ({snap['total_jobs']} total)", style="dim")
    if snap["quarantined"]:
        out.append(f"  {snap['quarantined']} unreadable spec file(s)", style="bold red")
    recent = [f"{n} {s.lower()}" for s, n in snap["recent_terminal"]["counts"].items() if n]
    out.append("\nlast 24 h: " + (", ".join(recent) if recent else "nothing ended"))
    caps = snap["capacity"]
    reserved, running = snap["reserved"], snap["running"]
    cpu_cap = caps["max_cpus"] if caps else None
    mem_cap = caps["max_mem_mb"] if caps else None
    out.append("\ncpus: ", style="bold")
    out.append(
        f"{reserved['cpus']}" + (f"/{cpu_cap}" if cpu_cap else "") + " reserved"
        f"{_percent(reserved['cpus'], cpu_cap)}, {running['cpus']} running, "
        f"{snap['pending_cpus']} pending"
    )
    out.append("\nmemory: ", style="bold")
    out.append(
        f"{reserved['mem_mb']}" + (f"/{mem_cap}" if mem_cap else "") + " MB reserved"
        f"{_percent(reserved['mem_mb'], mem_cap)}"
    )
    if caps and caps["max_jobs"]:
        out.append(f"\njob slots: {reserved['jobs']}/{caps['max_jobs']} in use")
    lanes = snap.get("lanes")
    if lanes and lanes["jobs"]:
        out.append("\nlanes: ", style="bold")
        out.append(lane_line(lanes))
    for owner in snap.get("owners") or []:
        out.append(f"\nowner {_owner_name(owner['uid'])}: ", style="bold")
        out.append(
            f"{owner['holders']}"
            + (f"/{owner['max_pending_jobs']}" if owner["max_pending_jobs"] else "")
            + " active, "
            + f"{owner['cpus']}"
            + (f"/{owner['max_concurrent_cpus']}" if owner["max_concurrent_cpus"] else "")
            + f" cpus, {owner['pending']} pending"
        )
    over = snap["over_capacity_pending_jobs"]
    if over:
        out.append(
            f"\n⚠ {over} pending job(s) exceed the configured capacity "
            f"(max_cpus {cpu_cap}, max_mem_mb {mem_cap}) and cannot start until the caps "
            "change; `vq list --state pending` marks them",
            style="bold red",
        )
    _console().print(out)


# --- vq usage ---------------------------------------------------------------------------


def usage_report(by: str, since: str | None) -> UsageAnswer:
    """Read the retained specs and build the usage report."""
    return gateway().usage(by, since_moment(since))


@click.command()
@click.option(
    "--by",
    type=click.Choice(["tag", "name", "day", "state", "submitter", "total"]),
    default="tag",
    show_default=True,
    help="Group by tag (a job counts under each), job name, UTC start date, state, "
    "submitter (multi-user: the owner's uid), or one total group.",
)
@click.option("--since", help="Only jobs started since an ISO time or a duration ago (7d).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def usage(by: str, since: str | None, as_json: bool) -> None:
    """Wall-hours and CPU-hours (runtime x declared CPUs) of retained jobs, per group."""
    report = usage_report(by, since)
    if as_json:
        echo_json(report)
        return
    _print_usage(report)


def _hours(value: float) -> str:
    """Two decimals, or four for a small nonzero amount (so short jobs do not read 0)."""
    return f"{value:.4f}" if 0 < value < 0.01 else f"{value:.2f}"


def _user_label(submitter: str) -> str:
    """``name (uid)`` for a numeric submitter the passwd database knows, else as given."""
    import pwd

    try:
        return f"{pwd.getpwuid(int(submitter)).pw_name} ({submitter})"
    except (KeyError, ValueError, OverflowError):
        return submitter


def _print_usage(report: UsageAnswer) -> None:
    from rich.table import Table
    from rich.text import Text

    console = _console()
    if not report["groups"]:
        console.print(Text("no jobs have run" + (" since then" if report["since"] else "")))
        return
    table = Table(box=None, header_style="bold", pad_edge=False, show_footer=True)
    total = report["total"]
    table.add_column(report["by"].upper(), footer="total", no_wrap=True)
    table.add_column("JOBS", justify="right", footer=str(total["jobs"]))
    table.add_column("WALL H", justify="right", footer=_hours(total["wall_hours"]))
    table.add_column("CPU H", justify="right", footer=_hours(total["cpu_hours"]))
    for group in report["groups"]:
        key = group["key"]
        if key is not None and report["by"] == "submitter":
            key = _user_label(key)
        table.add_row(
            Text(key) if key is not None else Text("(none)", style="dim"),
            str(group["jobs"]),
            _hours(group["wall_hours"]),
            _hours(group["cpu_hours"]),
        )
    console.print(table)
    if report["by"] == "tag":
        console.print(Text("a job with several tags counts under each", style="dim"))
