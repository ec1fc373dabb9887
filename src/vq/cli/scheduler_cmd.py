"""``vq scheduler``: operator decisions for scheduler-lane jobs (docs/scheduler.md)."""

from __future__ import annotations

import click

from vq.cli.common import echo_json, gateway
from vq.cli.job_ids import JOB_ID

__all__ = ["scheduler"]


@click.group()
def scheduler() -> None:
    """Scheduler lanes (Slurm, Torque): operator decisions."""


@scheduler.command()
@click.argument("job_id", metavar="ID", type=JOB_ID)
@click.option("--job-id", "scheduler_job_id", help="The job's scheduler job id: adopt it.")
@click.option("--not-submitted", is_flag=True, help="It never reached the scheduler: submit it.")
@click.option("--json", "as_json", is_flag=True, help="Print the decision as JSON.")
def resolve(job_id: str, scheduler_job_id: str | None, not_submitted: bool, as_json: bool) -> None:
    """Decide a job whose submission is in doubt (scheduler_state reattach_failed).

    For a packed array element the decision settles its whole allocation."""
    from vq.errors import DaemonNotRunning, UsageError

    if (scheduler_job_id is None) == (not not_submitted):
        raise UsageError(
            "give exactly one of --job-id N and --not-submitted",
            hint="`squeue --name=vq-ID` / `sacct --name=vq-ID` on the cluster show its jobs",
        )
    from vq.protocol.answers import SCHEDULER_RESOLVE

    answer = gateway().call(SCHEDULER_RESOLVE, {"id": job_id, "scheduler_job_id": scheduler_job_id})
    if answer is None:
        raise DaemonNotRunning(
            "the daemon that drives the lane is not running",
            hint="`vq daemon start`, then run this again",
        )
    if as_json:
        echo_json(answer)
    elif answer.get("scheduler_pack_id"):
        alloc, elements = answer["scheduler_pack_id"], len(answer.get("elements") or [])
        if scheduler_job_id is not None:
            click.echo(
                f"allocation {alloc} ({elements} elements): adopted Slurm job {scheduler_job_id}"
            )
        else:
            click.echo(f"allocation {alloc} ({elements} elements): never submitted; packed again")
    elif scheduler_job_id is not None:
        click.echo(f"{job_id}: adopted scheduler job {scheduler_job_id}")
    else:
        click.echo(f"{job_id}: submitting it under its tag vq-{job_id}")
