"""Human rendering with rich: tables and key/value panels. No logic, no I/O but stdout.

rich is imported here only, and this module only by commands that print for humans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from vq.cli.render_text import escaped as _escaped
from vq.cli.render_text import field_rows, later_rows
from vq.cli.render_text import short_time as _short_time
from vq.cli.rich_console import human_console
from vq.domain.durations import format_duration

if TYPE_CHECKING:
    from vq.domain.events import Event
    from vq.protocol.answers import ListRow, QuarantinedItem, StatusView

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
    # a lane job's phase (vq.domain.lane_phase), shown instead of RUNNING/SUSPENDED
    "submitting": "yellow",
    "queued": "yellow",
    "held": "magenta",
    "running": "bold blue",
    "finishing": "blue",
    "cancelling": "red",
    "in doubt": "bold yellow",
}


def _console() -> Console:
    return human_console()


def state_text(state: str, over_capacity: bool | None = None, label: str | None = None) -> Text:
    """``state`` styled; ``label``: the text shown instead (a lane job's phase label,
    styled by its phase word)."""
    shown = label or state
    text = Text(shown, style=STATE_STYLES.get(shown.split(" (")[0], STATE_STYLES.get(state, "")))
    if over_capacity:
        text.append(" ⚠ over cap", style="bold yellow")
    return text


def _index(row: ListRow) -> str:
    """``[i]`` of an array element, ``#i`` of a chain segment, else ``-``."""
    if row.get("array_index") is not None:
        return f"[{row['array_index']}]"
    if row.get("chain_index") is not None:
        return f"#{row['chain_index']}"
    return "-"


#: Columns given up, in this order, when even shrunk names and commands do not fit.
_DROPPABLE = ("SUBMITTED", "MEM", "CPUS", "COMMAND", "NAME")
_MIN_SHRUNK = {"NAME": 6, "COMMAND": 10}


def _fit(columns: dict[str, list[str]], width: int) -> dict[str, int | None]:
    """Column → the width it may take (None: its natural width), or absent: dropped.

    NAME and COMMAND shrink first (COMMAND gives twice as much); then whole columns are
    dropped in :data:`_DROPPABLE` order. ID is never shortened or dropped.
    """
    natural = {name: max(len(v) for v in values) for name, values in columns.items()}
    shown = list(columns)
    while True:
        fixed = sum(natural[c] + 2 for c in shown if c not in _MIN_SHRUNK)
        flexible = [c for c in shown if c in _MIN_SHRUNK]
        room = width - fixed - 2 * len(flexible)
        needed = sum(natural[c] for c in flexible)
        if room >= needed:
            return dict.fromkeys(shown)
        if room >= sum(min(natural[c], _MIN_SHRUNK[c]) for c in flexible):
            limits: dict[str, int | None] = dict.fromkeys(shown)
            if "NAME" in flexible:
                name_room = room - sum(min(natural[c], 10) for c in flexible if c != "NAME")
                limits["NAME"] = max(min(natural["NAME"], 6), min(natural["NAME"], name_room // 3))
                room -= limits["NAME"] or 0
            if "COMMAND" in flexible:
                limits["COMMAND"] = max(min(natural["COMMAND"], 10), room)
            return limits
        droppable = [c for c in _DROPPABLE if c in shown]
        if not droppable:
            return dict.fromkeys(shown)
        shown.remove(droppable[0])


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + "…"


def print_jobs(
    rows: list[ListRow], quarantined: list[QuarantinedItem], *, raw: bool = False
) -> None:
    """The ``vq list`` table. Names, commands and reasons are shown with control
    characters escaped (:func:`vq.domain.text.escape_controls`) unless ``raw``. Ids are
    never shortened: on a narrow terminal the name and command columns shrink (with an
    ellipsis) and then the least useful columns go; piped, nothing is cut or coloured
    (one job per line, aligned, no trailing blanks)."""
    if not raw:
        rows, quarantined = _escaped(rows), _escaped(quarantined)
    console = _console()
    piped = not console.is_terminal
    columns: dict[str, list[str]] = {"ID": ["ID"]}
    indexed = any(_index(row) != "-" for row in rows)
    if indexed:
        columns["IDX"] = ["IDX"]
    for name in ("NAME", "STATE", "CPUS", "MEM", "SUBMITTED", "ELAPSED", "EXIT", "COMMAND"):
        columns[name] = [name]
    for row in rows:
        label = row.get("phase_label") or row["state"]  # a lane job: its cluster phase
        state = label + (" ⚠ over cap" if row["pending_over_capacity"] else "")
        values = {
            "ID": row["id"],
            "IDX": _index(row),
            "NAME": row["job_name"] or "-",
            "STATE": state,
            "CPUS": str(row["cpus"]),
            "MEM": f"{row['mem_mb']}M" if row["mem_mb"] else "-",
            "SUBMITTED": _short_time(row["submitted_at"]),
            "ELAPSED": format_duration(row["elapsed_seconds"]),
            "EXIT": "-" if row["exit_code"] is None else str(row["exit_code"]),
            "COMMAND": " ".join(row["command"]),
        }
        for name, cells in columns.items():
            cells.append(values[name])
    if not rows:
        console.print("no jobs", style="dim")
    elif piped:
        widths = {name: max(len(v) for v in cells) for name, cells in columns.items()}
        last = list(columns)[-1]
        for i in range(len(rows) + 1):
            line = "  ".join(
                cells[i] if name == last else cells[i].ljust(widths[name])
                for name, cells in columns.items()
            )
            print(line.rstrip())
    else:
        limits = _fit(columns, console.width)
        table = Table(box=None, header_style="bold", pad_edge=False)
        for name in limits:
            table.add_column(
                name, no_wrap=True, overflow="ellipsis", min_width=12 if name == "ID" else None
            )
        for i, row in enumerate(rows, start=1):
            shown: list[str | Text] = []
            for name, limit in limits.items():
                if name == "STATE":
                    shown.append(
                        state_text(
                            row["state"], row["pending_over_capacity"], row.get("phase_label")
                        )
                    )
                else:
                    shown.append(_cut(columns[name][i], limit))
            table.add_row(*shown)
        console.print(table)
    for item in quarantined:
        console.print(Text(f"unreadable spec {item['path']}: {item['reason']}", style="bold red"))


def print_status(view: StatusView, *, raw: bool = False) -> None:
    """One job's fields; user text escaped as in :func:`print_jobs` unless ``raw``."""
    if not raw:
        view = _escaped(view)
    console = _console()
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value")
    for label, text in field_rows(view):
        table.add_row(label, state_text(text) if label == "state" else text)
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
    for label, text in later_rows(view):
        table.add_row(label, text)
    console.print(table)
    warning = view.get("scheduler_warning")
    if warning:
        console.print(Text(f"warning: {warning['message']}", style="bold yellow"))
        console.print(Text(f"hint: {warning['hint']}", style="yellow"))
    tail = view.get("failure_tail")
    if tail:
        console.print(Text("stderr tail:", style="bold"))
        console.print(Text(tail, style="red"))


def print_events(events: list[Event], *, raw: bool = False) -> None:
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
