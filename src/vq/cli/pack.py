"""``vq pack``: packed Slurm sweeps — rosters (open, seal, show) and plans. See docs/packing.md.

Thin commands: parse → :mod:`vq.packing.cases.rosters` / :mod:`vq.packing.cases.plans` →
render; the Slurm verbs live in :mod:`vq.cli.pack_run`. A pack with accepted attempts is
planned on an inspected view (the scheduler is asked). Exit codes: 3 a missing pack or
file; 4 a refused task file or plan input; 6 a roster change that is not an exact append,
a stale plan, or an existing output path; 7 a damaged pack file; 9 a refused profile.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from vq.cli import pack_run
from vq.cli.output import echo_json

__all__ = ["pack"]


@click.group()
def pack() -> None:
    """Packed Slurm sweeps: many tasks per single-node allocation."""


for _command in (
    pack_run.validate,
    pack_run.submit,
    pack_run.inspect,
    pack_run.reconcile,
    pack_run.resolve,
    pack_run.record,
    pack_run.log,
):
    pack.add_command(_command)


@pack.command("open")
@click.argument("name")
@click.argument("tasks_file", metavar="TASKS.jsonl", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def open_(name: str, tasks_file: Path, as_json: bool) -> None:
    """Register the tasks of TASKS.jsonl as pack NAME (create, confirm or append).

    Each line is exactly {"key": K, "args": [PROGRAM, ARG...], "stdin_file": PATH|null},
    stdin_file relative to TASKS.jsonl. TASKS.jsonl "-" reads the tasks from standard
    input (stdin_file relative to the working directory). Passing the registered tasks again changes
    nothing; the registered tasks followed by new ones appends them (revision + 1);
    anything else is refused (exit 6).
    """
    from vq.cli.common import paths
    from vq.packing.cases.rosters import open_pack, read_tasks_file, read_tasks_stream

    if str(tasks_file) == "-":
        tasks = read_tasks_stream(sys.stdin.buffer, Path.cwd())
    else:
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
    from vq.packing.cases.rosters import seal_pack

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
    from vq.packing.cases.rosters import load_pack

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


@pack.command()
@click.argument("name")
@click.option(
    "--output",
    "output",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write PLAN.json (owner-only; an existing path is refused).",
)
@click.option("--profile", "profile_name", help="The packing profile (default: default_packing).")
@click.option(
    "--tasks-per-allocation",
    type=click.IntRange(min=1),
    help="Pack at most this many tasks per allocation (above the profile's capacity: refused).",
)
@click.option("--retry", "retry", multiple=True, metavar="KEY", help="Run an accepted task again.")
@click.option(
    "--allow-duplicate-risk",
    "allow_duplicate_risk",
    multiple=True,
    metavar="KEY",
    help="With --retry KEY: accept that an earlier attempt of unknown outcome may still run.",
)
@click.option(
    "--show-scripts",
    is_flag=True,
    help="Also print every complete batch script (task arguments and stdin included).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def plan(
    name: str,
    output: Path,
    profile_name: str | None,
    tasks_per_allocation: int | None,
    retry: tuple[str, ...],
    allow_duplicate_risk: tuple[str, ...],
    show_scripts: bool,
    as_json: bool,
) -> None:
    """Plan pack NAME into allocations and write PLAN.json (no task arguments or stdin).

    The plan holds task keys, requested resources, totals, the target, the exact sbatch
    directives, allocation ids and digests. It is bound to the pack's revision: after an
    append or a seal, make a new one.
    """
    from vq.cli.common import paths
    from vq.cli.output import warn
    from vq.config.settings import load_settings, packing_profiles
    from vq.errors import ConfigError
    from vq.packing.cases.inspection import inspect_pack
    from vq.packing.cases.plans import make_plan, write_plan
    from vq.packing.cases.remote import lane_runner
    from vq.packing.cases.rosters import load_pack
    from vq.packing.planner import View
    from vq.packing.profiles import ProfileError, select_profile
    from vq.packing.roster import PackDocument

    settings = load_settings()
    try:
        profile = select_profile(packing_profiles(settings), settings.default_packing, profile_name)
    except ProfileError as exc:
        raise ConfigError(
            f"{'.'.join(exc.loc)}: {exc.reason}",
            hint="define [packing.NAME.target] and [packing.NAME.resources] (docs/packing.md)",
        ) from None

    def observe(pack: PackDocument) -> View:
        return inspect_pack(paths(), name, lane_runner(settings)).planner_view()

    accepted = any(a.outcome == "accepted" for a in load_pack(paths(), name).attempts)
    made = make_plan(
        paths(),
        name,
        profile,
        observe=observe if accepted else None,
        tasks_per_allocation=tasks_per_allocation,
        retry=frozenset(retry),
        allow_duplicate_risk=frozenset(allow_duplicate_risk),
    )
    written = write_plan(output, made)
    document = made.document
    if show_scripts:
        warn("the scripts below hold every task's arguments and stdin")
        for alloc, script in made.scripts.items():
            click.echo(f"### allocation {alloc}")
            click.echo(script.decode("utf-8", errors="replace"), nl=False)
    if as_json:
        echo_json({"path": str(written), **document})
        return
    totals = document["totals"]
    click.echo(
        f"plan {written}: {totals['tasks']} tasks in {totals['allocations']} allocations "
        f"(profile {profile.name}, revision {document['revision']})"
    )
    for allocation in document["allocations"]:
        click.echo(
            f"  {allocation['allocation_id']}  {allocation['tasks']} tasks  "
            f"{allocation['cpus']} CPUs  {allocation['memory_mib']} MiB  "
            f"{allocation['gpus']} GPUs  {allocation['time']}"
        )
    for item in document["selection"]["withheld"]:
        click.echo(f"  withheld {item['key']}: {item['reason']}")
    for key in document["selection"]["skipped"]:
        click.echo(f"  skipped {key}: valid result")
