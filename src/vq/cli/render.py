"""Human rendering with rich: tables and key/value panels. No logic, no I/O but stdout.

rich is imported here only, and this module only by commands that print for humans.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from vq.domain.durations import format_duration
from vq.domain.text import escape_controls

__all__ = ["print_events", "print_jobs", "print_status", "state_text"]

STATE_STYLES = {
    "PENDING": "yellow",
    "RUNNING": "bold blue",
    "SUSPENDED": "magenta",
    "COMPLETED": "green",
    "FAILED": "bold red",
    "KILLED": "red",
    "OOM_KILLED": "bold red",
    "STARVED": "red",
    "TIME_EXCEEDED": "bold red",
    "ABORTED_BY_QUEUE": "red",
    "INTERRUPTED": "red",
}


def _console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def state_text(state: str, over_capacity: bool | None = None) -> Text:
    text = Text(state, style=STATE_STYLES.get(state, ""))
    if over_capacity:
        text.append(" ⚠ over cap", style="bold yellow")
    return text


def _short_time(iso: str | None) -> str:
    if not iso:
        return "-"
    moment = datetime.fromisoformat(iso).astimezone()
    today = datetime.now().astimezone().date()
    return moment.strftime("%H:%M:%S" if moment.date() == today else "%Y-%m-%d %H:%M")


def _command(argv: list[str], width: int = 40) -> str:
    text = " ".join(argv)
    return text if len(text) <= width else text[: width - 1] + "…"


def _escaped(value: Any, keep: str = "") -> Any:
    """``value`` with every string (nested too) passed through ``escape_controls``."""
    if isinstance(value, str):
        return escape_controls(value, keep)
    if isinstance(value, list):
        return [_escaped(item, keep) for item in value]
    if isinstance(value, dict):
        return {
            key: _escaped(item, "\n\t" if key == "failure_tail" else keep)
            for key, item in value.items()
        }
    return value


def print_jobs(
    rows: list[dict[str, Any]], quarantined: list[dict[str, Any]], *, raw: bool = False
) -> None:
    """The job table. Names, commands and reasons are shown with control characters
    escaped (:func:`vq.domain.text.escape_controls`) unless ``raw``."""
    if not raw:
        rows, quarantined = _escaped(rows), _escaped(quarantined)
    console = _console()
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "NAME", "STATE", "CPUS", "MEM", "SUBMITTED", "ELAPSED", "EXIT", "COMMAND"):
        table.add_column(column, no_wrap=column != "COMMAND")
    for row in rows:
        table.add_row(
            row["id"],
            row["job_name"] or "-",
            state_text(row["state"], row["pending_over_capacity"]),
            str(row["cpus"]),
            f"{row['mem_mb']}M" if row["mem_mb"] else "-",
            _short_time(row["submitted_at"]),
            format_duration(row["elapsed_seconds"]),
            "-" if row["exit_code"] is None else str(row["exit_code"]),
            _command(row["command"]),
        )
    if rows:
        console.print(table)
    else:
        console.print("no jobs", style="dim")
    for item in quarantined:
        console.print(Text(f"unreadable spec {item['path']}: {item['reason']}", style="bold red"))


_STATUS_FIELDS = (
    ("state", "state"),
    ("job_name", "name"),
    ("command", "command"),
    ("tags", "tags"),
    ("workspace", "workspace"),
    ("cpus", "cpus"),
    ("mem_mb", "memory (MB)"),
    ("wall_time_seconds", "wall time"),
    ("priority", "priority"),
    ("submitted_at", "submitted"),
    ("not_before", "not before"),
    ("started_at", "started"),
    ("finished_at", "finished"),
    ("elapsed_seconds", "elapsed"),
    ("pid", "pid"),
    ("exit_code", "exit code"),
    ("retry_count", "retries"),
    ("failure_reason", "failure reason"),
    ("pending_reason", "waiting for"),
    ("parent_jobid", "parent job"),
    ("last_fetched_at", "last fetched"),
    ("workdir_swept_at", "workdir removed"),
    ("archived_at", "archived"),
    ("archive_path", "archive"),
)


def _value(key: str, value: Any) -> str | Text:
    if key == "state":
        return state_text(str(value))
    if key in ("wall_time_seconds", "elapsed_seconds"):
        return format_duration(value)
    if key == "command":
        return " ".join(value)
    if key == "tags":
        return ", ".join(value)
    return str(value)


def print_status(view: dict[str, Any], *, raw: bool = False) -> None:
    """One job's fields; user text escaped as in :func:`print_jobs` unless ``raw``."""
    if not raw:
        view = _escaped(view)
    console = _console()
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value")
    table.add_row("id", view["id"])
    for key, label in _STATUS_FIELDS:
        value = view.get(key)
        if value is None or value == [] or (key == "retry_count" and not value):
            continue
        table.add_row(label, _value(key, value))
    if view.get("pending_over_capacity"):
        table.add_row(
            "over capacity",
            Text(
                "; ".join(
                    f"{o['resource']} {o['requested']} > cap {o['capacity']}"
                    for o in view["configured_capacity_overages"]
                ),
                style="bold yellow",
            ),
        )
    eta = view.get("queue_eta")
    if eta is not None:
        seconds = eta.get("eta_seconds")
        text = (
            f"about {format_duration(seconds)} ({eta['basis']})"
            if seconds is not None
            else f"unavailable ({eta['basis']})"
        )
        table.add_row("queue ETA", text)
    console.print(table)
    if view.get("failure_tail"):
        console.print(Text("stderr tail:", style="bold"))
        console.print(Text(view["failure_tail"], style="red"))


def print_events(events: list[dict[str, Any]], *, raw: bool = False) -> None:
    if not raw:
        events = _escaped(events)
    console = _console()
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("TIME", "EVENT", "DETAIL"):
        table.add_column(column, no_wrap=column != "DETAIL")
    for event in events:
        detail = {k: v for k, v in event.items() if k not in ("ts", "kind", "jobid")}
        if event["kind"] == "state_transition":
            text = f"{detail.pop('from', '?')} → {detail.pop('to', '?')}"
            rest = ", ".join(f"{k}={v}" for k, v in detail.items())
            detail_text = text + (f" ({rest})" if rest else "")
        else:
            detail_text = ", ".join(f"{k}={v}" for k, v in detail.items())
        table.add_row(_short_time(event.get("ts")), event["kind"], detail_text)
    console.print(table if events else Text("no events", style="dim"))
