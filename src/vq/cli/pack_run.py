"""``vq pack validate|submit|inspect|reconcile|resolve|record|log``: packs on Slurm.

Thin commands over :mod:`vq.packing.cases.submit`, :mod:`vq.packing.cases.inspection` and
:mod:`vq.packing.cases.resolve`; the profile's ``host`` is a configured Slurm lane.
Exit codes: 3 a missing pack, allocation, task or log, or nothing to adopt; 4 refused
input or a shape the controller refuses; 6 a stale plan, changed eligibility or an attempt
already settled; 9 a target that is not a Slurm lane; 10 scheduler output vq cannot trust;
11 the SSH transport; 12 an ``sbatch`` whose acceptance is unknown.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from vq.cli.output import echo_json, warn

if TYPE_CHECKING:
    from vq.packing.cases.submit import SubmitReport

__all__ = ["inspect", "log", "reconcile", "record", "resolve", "submit", "validate"]

_PLAN = click.Path(path_type=Path)


def _runner_for() -> Any:
    from vq.config.settings import load_settings
    from vq.packing.cases.remote import lane_runner

    return lane_runner(load_settings())


@click.command()
@click.argument("name")
@click.argument("plan_path", metavar="PLAN.json", type=_PLAN)
@click.option("--json", "as_json", is_flag=True, help="Print the answers as JSON.")
def validate(name: str, plan_path: Path, as_json: bool) -> None:
    """Ask Slurm (sbatch --test-only) whether each allocation shape of PLAN.json would run.

    One call per distinct shape; nothing is submitted and nothing changes. The answer
    holds at the moment it is given.
    """
    from vq.cli.common import paths
    from vq.packing.cases.submit import validate_plan

    answers = validate_plan(paths(), name, plan_path, _runner_for())
    if as_json:
        echo_json({"name": name, "shapes": answers})
        return
    for answer in answers:
        click.echo(
            f"shape {answer['shape_sha256'][:16]} (allocation {answer['allocation_id']}, "
            f"{answer['tasks']} tasks, script {answer['script_sha256'][:16]}): would start "
            f"{answer['start']} on {answer['nodes']} in {answer['partition']} "
            f"({answer['processors']} processors)"
        )


@click.command()
@click.argument("name")
@click.argument("plan_path", metavar="PLAN.json", type=_PLAN)
@click.option("--json", "as_json", is_flag=True, help="Print the receipts as JSON.")
def submit(name: str, plan_path: Path, as_json: bool) -> None:
    """Submit every allocation of PLAN.json: intent recorded first, then sbatch, then the
    receipt. A missing receipt stops here (exit 12): reconcile or resolve it."""
    from vq.cli.common import paths
    from vq.packing.cases.submit import submit_plan

    receipts: list[SubmitReport] = []

    def report(item: SubmitReport) -> None:
        receipts.append(item)
        if not as_json:
            verb = "accepted" if item["action"] == "submitted" else "already accepted"
            click.echo(f"allocation {item['allocation_id']}: {verb} as job {item['job_id']}")

    submit_plan(paths(), name, plan_path, _runner_for(), report)
    if not receipts and not as_json:
        click.echo(f"{plan_path} has no allocations: nothing to submit")
    if as_json:
        echo_json({"name": name, "allocations": receipts})


@click.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the view as JSON.")
def inspect(name: str, as_json: bool) -> None:
    """Observe every accepted attempt of pack NAME (squeue, sacct, slot markers)."""
    from vq.cli.common import paths
    from vq.packing.cases.inspection import inspect_pack

    view = inspect_pack(paths(), name, _runner_for()).as_dict()
    if as_json:
        echo_json(view)
        return
    click.echo(
        f"pack {name}: revision {view['revision']}, observed {view['observed_at']}, "
        f"results_ready {str(view['results_ready']).lower()}, "
        f"quiescent {str(view['quiescent']).lower()}"
    )
    for attempt in view["attempts"]:
        job = attempt["job_id"] or "-"
        state = attempt["state"] or attempt["outcome"].upper()
        click.echo(
            f"  allocation {attempt['allocation_id']}  job {job}  {state}  "
            f"{len(attempt['task_keys'])} tasks"
        )
    for task in view["tasks"]:
        code = "" if task["exit_code"] is None else f" (exit {task['exit_code']})"
        click.echo(f"  {task['key']}: {task['state'] or 'not submitted'}{code}")


@click.command()
@click.argument("name")
@click.argument("allocation")
@click.option("--json", "as_json", is_flag=True, help="Print the attempt as JSON.")
def reconcile(name: str, allocation: str, as_json: bool) -> None:
    """Adopt from accounting the one job of ALLOCATION whose acceptance is unknown."""
    from vq.cli.common import paths
    from vq.packing.cases.resolve import reconcile_attempt

    attempt = reconcile_attempt(paths(), name, allocation, _runner_for())
    if as_json:
        echo_json(attempt.model_dump(mode="json"))
        return
    click.echo(f"allocation {allocation}: adopted job {attempt.job_id}")


@click.command()
@click.argument("name")
@click.argument("allocation")
@click.option("--job-id", help="Slurm accepted it as this job.")
@click.option("--cluster", help="On this cluster (with --job-id).")
@click.option("--not-submitted", is_flag=True, help="Slurm never accepted it.")
@click.option("--json", "as_json", is_flag=True, help="Print the attempt as JSON.")
def resolve(
    name: str,
    allocation: str,
    job_id: str | None,
    cluster: str | None,
    not_submitted: bool,
    as_json: bool,
) -> None:
    """Record an operator's word on ALLOCATION: --job-id N [--cluster C] or --not-submitted."""
    from vq.cli.common import paths
    from vq.packing.cases.resolve import resolve_attempt

    attempt = resolve_attempt(
        paths(), name, allocation, job_id=job_id, cluster=cluster, not_submitted=not_submitted
    )
    if as_json:
        echo_json(attempt.model_dump(mode="json"))
        return
    if attempt.outcome == "accepted":
        click.echo(f"allocation {allocation}: accepted as job {attempt.job_id}")
    else:
        click.echo(f"allocation {allocation}: not submitted; its tasks can be planned again")


@click.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="The record is JSON either way.")
def record(name: str, as_json: bool) -> None:
    """Print the redacted operational record of pack NAME (observes the scheduler)."""
    from vq.cli.common import paths
    from vq.packing.cases.inspection import inspect_pack
    from vq.packing.cases.resolve import record_bytes

    del as_json
    data = record_bytes(inspect_pack(paths(), name, _runner_for()))
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _escape(data: bytes) -> str:
    """Control bytes (C0, DEL and C1, but newline and tab) and invalid UTF-8 as visible
    escapes."""
    text = data.decode("utf-8", errors="backslashreplace")
    return "".join(
        ch
        if ch in "\n\t" or not (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F)
        else f"\\x{ord(ch):02x}"
        for ch in text
    )


@click.command()
@click.argument("name")
@click.argument("allocation")
@click.option(
    "--task", "task", metavar="KEY", help="The task's own log (default: the allocation's)."
)
@click.option(
    "--bytes",
    "count",
    type=int,
    default=65536,
    show_default=True,
    help="How many bytes from the end (1 to 1048576).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot as JSON (base64).")
def log(name: str, allocation: str, task: str | None, count: int, as_json: bool) -> None:
    """The last bytes of ALLOCATION's log (or --task KEY's), read once over SSH.

    Log bytes are untrusted: on a terminal, control bytes are shown escaped.
    """
    from vq.cli.common import paths
    from vq.packing.cases.resolve import read_log

    snapshot = read_log(
        paths(), name, allocation, task=task, max_bytes=count, runner_for=_runner_for()
    )
    if as_json:
        echo_json(
            {
                "allocation_id": snapshot.allocation_id,
                "task": snapshot.task,
                "path": snapshot.path,
                "truncated": snapshot.truncated,
                "bytes": len(snapshot.data),
                "data_base64": base64.b64encode(snapshot.data).decode(),
            }
        )
        return
    if snapshot.truncated:
        warn(f"showing the last {len(snapshot.data)} bytes of {snapshot.path}")
    if sys.stdout.isatty():
        click.echo(_escape(snapshot.data), nl=False)
    else:
        sys.stdout.buffer.write(snapshot.data)
        sys.stdout.buffer.flush()
