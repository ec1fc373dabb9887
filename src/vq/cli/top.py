"""``vq top``: a live view of running jobs, queue counts and capacity (§6.3).

Forms: one-shot text (default), ``--watch`` (a rich Live view refreshed every
``--interval`` seconds until Ctrl-C, which exits 0) and ``--json`` (one snapshot).

The JSON schema is :mod:`vq.services.top`'s (stable)::

    {"generated_at": ISO, "daemon": {"running": bool, "pid": int|null},
     "capacity_source": "daemon"|"last_advertised"|null,
     "counts": {STATE: n, ...},
     "capacity": {"cpus": {"reserved": n, "cap": n|null},
                  "mem_mb": {"reserved": n, "cap": n|null},
                  "jobs": {"reserved": n, "cap": n|null}},
     "jobs": [{"id", "job_name", "state", "cpus", "cpu_percent", "rss_mb", "mem_limit_mb",
               "mem_percent", "elapsed_seconds", "wall_time_seconds", "wall_percent",
                "sample_age_seconds", "stale", "phase", "phase_label"}],
     "lanes": {"jobs", "cpus", "running_jobs", "running_cpus",
               "unconfirmed_scheduler_jobs", "unconfirmed_scheduler_cpus"}}

This module only gathers the inputs (the daemon's ping and listing, or the disk when no
daemon answers; the tail of each live job's ``samples.jsonl``) and renders; the model is
:func:`vq.services.top.build_top`. rich is imported only inside the rendering functions.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING

import click

from vq.cli.common import echo_json, gateway
from vq.cli.types import AsciiFloatRange
from vq.domain.durations import format_duration
from vq.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

    from vq.protocol.report_answers import TopAnswer, TopJob

__all__ = ["snapshot", "top"]

#: How long one daemon call may take before ``vq top`` falls back to the disk.
CALL_TIMEOUT_SECONDS = 10.0
_LIVE_STATES = ("RUNNING", "SUSPENDED")


@click.command()
@click.option("--watch", is_flag=True, help="Keep refreshing until Ctrl-C.")
@click.option(
    "--interval",
    type=AsciiFloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes with --watch.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one snapshot as JSON.")
def top(watch: bool, interval: float, as_json: bool) -> None:
    """Live view of running and suspended jobs, queue counts and capacity."""
    if watch and as_json:
        raise UsageError("--watch and --json cannot be combined", hint="use one of them")
    if as_json:
        echo_json(snapshot())
    elif watch:
        _watch(interval)
    else:
        _console().print(_render(snapshot()))


# --- gathering -------------------------------------------------------------------------


def snapshot() -> TopAnswer:
    """One ``vq top`` snapshot (:meth:`vq.gateway.Gateway.top`)."""
    return gateway().top(_LIVE_STATES, CALL_TIMEOUT_SECONDS)


# --- rendering -------------------------------------------------------------------------


def _watch(interval: float) -> None:
    from rich.live import Live

    try:
        with Live(_render(snapshot()), console=_console(), auto_refresh=False) as live:
            while True:
                time.sleep(interval)
                live.update(_render(snapshot()), refresh=True)
    except KeyboardInterrupt:
        return


def _console() -> Console:
    from vq.cli.rich_console import human_console

    return human_console()


def _level_style(percent: float | None) -> str:
    if percent is None:
        return ""
    if percent >= 90:
        return "bold red"
    return "yellow" if percent >= 75 else ""


def _header(snap: TopAnswer) -> Text:
    from rich.text import Text

    moment = datetime.fromisoformat(snap["generated_at"]).astimezone()
    text = Text()
    text.append(f"vq top  {moment:%H:%M:%S}  ", style="bold")
    daemon = snap["daemon"]
    if daemon["running"]:
        text.append(f"daemon: running (pid {daemon['pid']})", style="green")
    else:
        text.append("daemon: not running", style="bold yellow")
        known = snap.get("capacity_source") == "last_advertised"
        caps = "caps as last advertised" if known else "caps unknown"
        text.append(f" (read from disk; {caps})", style="dim")
    counts = [f"{n} {state.lower()}" for state, n in snap["counts"].items() if n]
    text.append("\njobs: " + (", ".join(counts) if counts else "none"))
    return text


def _capacity(snap: TopAnswer) -> RenderableType:
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    known = snap.get("capacity_source") is not None
    capacity = snap["capacity"]
    for use, label, unit in (
        (capacity["cpus"], "cpus", ""),
        (capacity["mem_mb"], "mem", " MB"),
        (capacity["jobs"], "jobs", ""),
    ):
        reserved, cap = use["reserved"], use["cap"]
        if cap:
            percent = 100.0 * reserved / cap
            bar: RenderableType = ProgressBar(
                total=cap,
                completed=min(reserved, cap),
                width=30,
                complete_style=_level_style(percent) or "blue",
            )
            numbers = Text(f"{reserved}/{cap}{unit} reserved ({percent:.0f}%)")
        else:
            bar = Text("")
            why = "no cap" if known else "cap unknown"
            numbers = Text(f"{reserved}{unit} reserved ({why})", style="dim" if known else "")
        grid.add_row(label, bar, numbers)
    return grid


def _lanes(snap: TopAnswer) -> RenderableType | None:
    """The scheduler lanes' live jobs, which the capacity above never counts."""
    from rich.text import Text

    from vq.cli.reports import lane_line

    lanes = snap.get("lanes")
    if not lanes or not lanes["jobs"]:
        return None
    text = Text("lanes: ", style="bold")
    text.append(lane_line(lanes))
    return text


def _with_pct(text: str, percent: float | None) -> Text:
    from rich.text import Text

    out = Text(text)
    if percent is not None:
        out.append(f" {percent:.0f}%", style=_level_style(percent) or "dim")
    return out


def _jobs_table(jobs: list[TopJob]) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    from vq.cli.render import state_text
    from vq.domain.affinity import format_cores

    if not jobs:
        return Text("no running or suspended jobs", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1, 0, 1))
    table.add_column("ID", no_wrap=True, min_width=12)
    table.add_column("NAME", no_wrap=True, overflow="ellipsis", max_width=12)
    table.add_column("STATE", no_wrap=True)
    table.add_column("CORES", no_wrap=True)
    table.add_column("CPU%", justify="right", no_wrap=True)
    table.add_column("RSS/LIMIT", justify="right", no_wrap=True)
    table.add_column("ELAPSED/WALL", justify="right", no_wrap=True)
    table.add_column("SAMPLE", no_wrap=True)
    for job in jobs:
        rss, limit = job["rss_mb"], job["mem_limit_mb"]
        memory = "-" if rss is None else f"{rss:.0f}M"
        if limit:
            memory += f"/{limit}M"
        elapsed = format_duration(job["elapsed_seconds"])
        if job["wall_time_seconds"]:
            elapsed += "/" + format_duration(job["wall_time_seconds"])
        age = job["sample_age_seconds"]
        sample = Text("-" if age is None else f"{age:.0f}s ago", style="dim")
        if job["stale"]:
            sample = Text("STALE" if age is None else f"STALE {age:.0f}s", style="bold red")
        cpu = job["cpu_percent"]
        table.add_row(
            job["id"],
            job["job_name"] or "-",
            state_text(job["state"], label=job.get("phase_label")),
            format_cores(job.get("cpu_affinity") or []) or "-",
            "-" if cpu is None else f"{cpu:.0f}%",
            _with_pct(memory, job["mem_percent"]),
            _with_pct(elapsed, job["wall_percent"]),
            sample,
        )
    return table


def _render(snap: TopAnswer) -> RenderableType:
    from rich.console import Group

    lanes = _lanes(snap)
    parts = [_header(snap), _capacity(snap), *([lanes] if lanes else []), _jobs_table(snap["jobs"])]
    return Group(*parts)
