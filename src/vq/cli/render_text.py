"""What the human views say, as plain text, and ``vq status``'s table without rich.

The rows a status view shows (:func:`status_rows`), the time and escaping helpers the
rich renderer (:mod:`vq.cli.render`) also uses, and :func:`plain_status`: the exact text
rich prints for a plain status table on an output that is not a terminal, built without
importing rich (its import costs more than the daemon takes to answer ``vq status``).
Pure, apart from reading the environment and the terminal size as rich does.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from vq.domain.durations import format_duration
from vq.domain.text import escape_controls

if TYPE_CHECKING:
    from vq.protocol.answers import StatusView

__all__ = [
    "escaped",
    "field_rows",
    "group_rows",
    "lane_rows",
    "later_rows",
    "plain_status",
    "short_time",
    "status_rows",
    "usage_rows",
]

STATUS_FIELDS = (
    ("state", "state"),
    ("job_name", "name"),
    ("command", "command"),
    ("tags", "tags"),
    ("workspace", "workspace"),
    ("cpus", "cpus"),
    ("cpu_affinity", "cpu affinity"),
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
    ("pending_reason", "pending"),
    ("parent_jobid", "parent job"),
    ("last_fetched_at", "last fetched"),
    ("workdir_swept_at", "workdir removed"),
    ("archived_at", "archived"),
    ("archive_path", "archive"),
)


def short_time(iso: str | None) -> str:
    if not iso:
        return "-"
    moment = datetime.fromisoformat(iso).astimezone()
    today = datetime.now().astimezone().date()
    return moment.strftime("%H:%M:%S" if moment.date() == today else "%Y-%m-%d %H:%M")


def escaped(value: Any, keep: str = "") -> Any:
    """``value`` with every string (nested too) passed through ``escape_controls``."""
    if isinstance(value, str):
        return escape_controls(value, keep)
    if isinstance(value, list):
        return [escaped(item, keep) for item in value]
    if isinstance(value, dict):
        return {
            key: escaped(item, "\n\t" if key == "failure_tail" else keep)
            for key, item in value.items()
        }
    return value


def field_text(key: str, value: Any) -> str:
    """One status field's value as text (the state too: rich only styles it)."""
    if key in ("wall_time_seconds", "elapsed_seconds"):
        return format_duration(value)
    if key == "command":
        return " ".join(value)
    if key == "tags":
        return ", ".join(value)
    if key == "cpu_affinity":
        from vq.domain.affinity import format_cores

        return f"cores {format_cores(value)}"
    return str(value)


def group_rows(view: StatusView) -> list[tuple[str, str]]:
    """The ``array``/``chain`` lines of ``vq status``: index, total, value and group."""
    rows: list[tuple[str, str]] = []
    if view.get("array_index") is not None:
        text = f"[{view['array_index']}] of {view.get('array_total')}"
        rows.append(("array", f"{text} in group {view.get('array_group_id')}"))
        if view.get("array_value") is not None:
            rows.append(("array value", str(view["array_value"])))
    if view.get("chain_index") is not None:
        text = f"segment {view['chain_index']} of {view.get('chain_total')}"
        rows.append(("chain", f"{text} in group {view.get('chain_group_id')}"))
    return rows


def usage_rows(view: StatusView) -> list[tuple[str, str]]:
    """``paused by`` (who and since when) and an ended job's receipt figures."""
    rows: list[tuple[str, str]] = []
    paused_by = view.get("paused_by")
    if paused_by:
        who = {"operator": "an operator (vq pause)", "memory-pressure": "memory pressure"}
        text = who.get(paused_by, paused_by)
        if view.get("paused_at"):
            text += f", since {short_time(view['paused_at'])}"
        rows.append(("paused by", text))
    usage = view.get("resource_usage")
    if usage:
        if usage.get("peak_rss_mb") is not None:
            rows.append(("peak RSS", f"{usage['peak_rss_mb']:.1f} MB (receipt: largest process)"))
        if usage.get("cpu_seconds") is not None:
            rows.append(
                (
                    "CPU time",
                    f"{usage['cpu_seconds']:.2f} s (user {usage['user_cpu_seconds']:.2f} s"
                    f" + system {usage['system_cpu_seconds']:.2f} s)",
                )
            )
    return rows


def eta_text(view: StatusView) -> str | None:
    """The ``queue ETA`` line's text, None when the view has no estimate."""
    eta = view.get("queue_eta")
    if eta is None:
        return None
    seconds = eta.get("eta_seconds")
    basis = str(eta.get("basis") or "")
    if seconds is not None:
        return f"about {format_duration(seconds)} ({basis})"
    if basis.startswith("unknown: "):
        return f"unknown ({basis.removeprefix('unknown: ')})"
    return f"unavailable ({basis})"


def lane_rows(view: StatusView) -> list[tuple[str, str]]:
    """A lane job's cluster lines (after ``state``): its lane and scheduler, the
    scheduler's job id, the phase (§3.3: RUNNING includes cluster-queued time), the
    scheduler's reason for a waiting job, the execution host and the cluster's own
    elapsed time and limit. None of them for a job that is not a lane job."""
    fields: Mapping[str, Any] = view  # an older daemon's view may lack the newer keys
    lane = fields.get("scheduler_target")
    if lane is None:
        return []
    dialect = fields.get("scheduler_dialect")
    rows = [("lane", f"{lane} ({dialect})" if dialect else str(lane))]
    if fields.get("scheduler_job_id"):
        rows.append((f"{dialect or 'cluster'} job", str(fields["scheduler_job_id"])))
    if fields.get("phase"):
        rows.append(("phase", str(fields["phase"])))
    reason = fields.get("scheduler_queued_reason")
    if reason:
        label = "submit retry" if fields.get("phase") == "submitting" else "queued reason"
        rows.append((label, str(reason)))
    if fields.get("scheduler_exec_host"):
        rows.append(("exec host", str(fields["scheduler_exec_host"])))
    used, limit = fields.get("scheduler_walltime_used"), fields.get("scheduler_walltime_limit")
    if used or limit:
        rows.append(("cluster elapsed", f"{used or '-'} of {limit or 'no limit'}"))
    return rows


def field_rows(view: StatusView) -> list[tuple[str, str]]:
    """The id and the spec fields a status view has, as (label, text), in order (a lane
    job's :func:`lane_rows` right after the state)."""
    rows = [("id", str(view["id"]))]
    fields: Mapping[str, object] = view  # read by name, from the table of fields below
    for key, label in STATUS_FIELDS:
        value = fields.get(key)
        if value is None or value == [] or (key == "retry_count" and not value):
            continue
        rows.append((label, field_text(key, value)))
        if key == "state":
            rows.extend(lane_rows(view))
    return rows


def later_rows(view: StatusView) -> list[tuple[str, str]]:
    """The rows after the fields (and after the over-capacity row, when there is one):
    array/chain, paused by and the receipt, the queue ETA."""
    rows = [*group_rows(view), *usage_rows(view)]
    eta = eta_text(view)
    if eta is not None:
        rows.append(("queue ETA", eta))
    return rows


def status_rows(view: StatusView) -> list[tuple[str, str]]:
    """Every (label, text) row of ``vq status``'s table of a job not over capacity, in
    order; ``view`` already escaped as wanted."""
    return [*field_rows(view), *later_rows(view)]


# --- the table rich would print, without rich ----------------------------------------
_PLAIN = re.compile(r"[ -~]*")  # printable ASCII


def _is_plain(text: str) -> bool:
    """Whether rich prints ``text`` in a table cell exactly as it is: printable ASCII with
    no leading or trailing blank (vq's consoles read no markup and no emoji codes:
    :mod:`vq.cli.rich_console`)."""
    return _PLAIN.fullmatch(text) is not None and text == text.strip()


def _piped_width(environ: Mapping[str, str]) -> int | None:
    """The width rich gives a console writing to a non-terminal stdout; None when rich
    would treat stdout as a terminal (colours, styles) or the case is not this one."""
    if environ.get("TTY_COMPATIBLE", "") not in ("", "0") or environ.get("FORCE_COLOR"):
        return None
    if environ.get("TTY_COMPATIBLE") != "0" and environ.get("FORCE_COLOR") is None:
        try:
            if sys.stdout.isatty():
                return None
        except ValueError:
            return None
    width = None
    for fd in (0, 1, 2):  # rich asks stdin, stdout, stderr in this order
        try:
            width = os.get_terminal_size(fd).columns
        except OSError:
            continue
        break
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
    return width or 80


def plain_status(view: StatusView, *, raw: bool = False) -> str | None:
    """``vq status``'s output exactly as :func:`vq.cli.render.print_status` prints it
    to a non-terminal, or None when rich must print it (a terminal, a row that would
    wrap, text rich would interpret or measure otherwise, a warning or stderr tail)."""
    if not raw:
        view = escaped(view)
    if view.get("pending_over_capacity") or view.get("scheduler_warning"):
        return None
    if view.get("failure_tail"):
        return None
    width = _piped_width(os.environ)
    if width is None:
        return None
    rows = status_rows(view)
    if not all(_is_plain(label) and _is_plain(text) for label, text in rows):
        return None
    label_width = max(len(label) for label, _ in rows)
    text_width = max(len(text) for _, text in rows)
    if label_width + 2 + text_width > width:
        return None  # rich would wrap the value column
    return "".join(
        f"{label.ljust(label_width)}  {text.ljust(text_width)}\n" for label, text in rows
    )
