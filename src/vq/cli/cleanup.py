"""``vq cleanup``: list, and with ``--execute`` archive or sweep, old terminal jobs.

A dry run unless ``--execute`` (it then changes nothing at all). Disk only; the work is
:mod:`vq.cleanup.jobs`. Exit code 1 when ``--execute`` left any selected job undone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from vq.cli.common import echo_json, gateway

if TYPE_CHECKING:
    from vq.cleanup.jobs import CleanupReport

__all__ = ["cleanup"]


@click.command()
@click.option(
    "--older-than",
    default="14d",
    show_default=True,
    metavar="D",
    help="Only jobs that finished at least this long ago (90m, 2d, ...; 0 means any age).",
)
@click.option("--state", "states", multiple=True, help="Only this terminal state (repeatable).")
@click.option("--archive", is_flag=True, help="Archive to .tar.bz2, then remove workspace+workdir.")
@click.option("--execute", is_flag=True, help="Do it (default: a dry run that changes nothing).")
@click.option("--json", "as_json", is_flag=True, help="Print {dry_run, jobs: [...]} as JSON.")
def cleanup(
    older_than: str, states: tuple[str, ...], archive: bool, execute: bool, as_json: bool
) -> int:
    """Sweep the workdirs of ended jobs, or archive them (--archive).

    Only terminal jobs are touched, never PENDING, RUNNING or SUSPENDED ones. Archives go
    to VQ_ARCHIVE_DIR (else <state-root>/archive) as NAME-ID.tar.bz2; the spec stays, so
    `vq status ID` shows archive_path.
    """
    from vq.cleanup.jobs import CleanupPolicy

    policy = CleanupPolicy.parse(older_than, states, archive)
    report = gateway().cleanup(policy, execute=execute)
    if as_json:
        echo_json(report.as_dict())
    else:
        _print(report)
    return 1 if execute and report.failed else 0


def _print(report: CleanupReport) -> None:
    from rich.table import Table
    from rich.text import Text

    from vq.cli.render import state_text
    from vq.cli.rich_console import human_console

    console = human_console()
    dry, jobs = report.dry_run, report.jobs
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("ID", "STATE", "FINISHED", "ACTION", "RESULT"):
        table.add_column(column, no_wrap=column != "RESULT", overflow="fold")
    for job in jobs:
        if job.error:
            result = Text(f"skipped: {job.error}" if dry else job.error, style="red")
        elif dry:
            result = Text(f"would write {job.archive_path}" if job.archive_path else "")
        else:
            result = Text(job.archive_path or "workdir removed", style="green")
        finished = (job.finished_at or "-")[:19].replace("T", " ")
        table.add_row(job.id, state_text(job.state), finished, job.action, result)
    if jobs:
        console.print(table)
    archiving = any(job.action == "archive" for job in jobs)
    if dry:
        ready = sum(1 for job in jobs if not job.error)
        what = "would be archived" if archiving else "would have their workdirs removed"
        summary = f"dry run: {ready} of {len(jobs)} selected job(s) {what}"
        console.print(
            summary + "; nothing changed (add --execute to do it)", style="dim", soft_wrap=True
        )
    else:
        done = sum(1 for job in jobs if job.done)
        rest = len(jobs) - done
        what = "archived" if archiving else "had their workdirs removed"
        console.print(f"{done} job(s) {what}" + (f"; {rest} not done" if rest else ""))
