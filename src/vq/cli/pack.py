"""``vq pack``: packed Slurm sweeps — rosters (open, seal, show) and plans. See docs/packing.md.

Thin commands: parse → :mod:`vq.services.pack_roster` / :mod:`vq.services.pack_plan` →
render. Exit codes: 3 a missing pack or file; 4 a refused task file or plan input; 6 a
roster change that is not an exact append, a stale plan, or an existing output path;
7 a damaged pack file; 9 a refused profile.
"""

from __future__ import annotations

from pathlib import Path

import click

from vq.cli.output import echo_json

__all__ = ["pack"]


@click.group()
def pack() -> None:
    """Packed Slurm sweeps: many tasks per single-node allocation."""


@pack.command("open")
@click.argument("name")
@click.argument("tasks_file", metavar="TASKS.jsonl", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def open_(name: str, tasks_file: Path, as_json: bool) -> None:
    """Register the tasks of TASKS.jsonl as pack NAME (create, confirm or append).

    Each line is exactly {"key": K, "args": [PROGRAM, ARG...], "stdin_file": PATH|null},
    stdin_file relative to TASKS.jsonl. Passing the registered tasks again changes
    nothing; the registered tasks followed by new ones appends them (revision + 1);
    anything else is refused (exit 6).
    """
    from vq.cli.common import paths
    from vq.services.pack_roster import open_pack, read_tasks_file

    tasks = read_tasks_file(tasks_file)
    result = open_pack(paths(), name, tasks)
    if as_json:
        echo_json(result.as_dict())
        return
    if result.action == "created":
        click.echo(f"created pack {name}: {result.tasks} tasks, revision {result.revision}")
    elif result.action == "appended":
        click.echo(
            f"appended {result.added} tasks to pack {name}: {result.tasks} tasks, "
            f"revision {result.revision}"
        )
    else:
        click.echo(f"pack {name} unchanged: {result.tasks} tasks, revision {result.revision}")


@pack.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def seal(name: str, as_json: bool) -> None:
    """End authoring of pack NAME for good (idempotent): no task can be added after."""
    from vq.cli.common import paths
    from vq.services.pack_roster import seal_pack

    document, changed = seal_pack(paths(), name)
    if as_json:
        echo_json({"name": name, "sealed": True, "changed": changed, "revision": document.revision})
        return
    state = "sealed" if changed else "already sealed"
    click.echo(f"pack {name} {state}: {len(document.tasks)} tasks, revision {document.revision}")


@pack.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the pack as JSON.")
def show(name: str, as_json: bool) -> None:
    """The roster of pack NAME: revision, sealed, task keys and attempts (no args or stdin)."""
    from vq.cli.common import paths
    from vq.services.pack_roster import load_pack

    document = load_pack(paths(), name)
    payload = {
        "name": document.name,
        "revision": document.revision,
        "sealed": document.sealed,
        "created_at": document.created_at,
        "updated_at": document.updated_at,
        "tasks": [task.key for task in document.tasks],
        "attempts": [attempt.model_dump(mode="json") for attempt in document.attempts],
    }
    if as_json:
        echo_json(payload)
        return
    state = "sealed" if document.sealed else "open"
    click.echo(
        f"pack {name}: {len(document.tasks)} tasks, revision {document.revision}, {state}, "
        f"{len(document.attempts)} attempts"
    )
    for task in document.tasks:
        click.echo(f"  {task.key}")
