"""``vq campaign``: validate a campaign, pin its sources, publish and verify artifacts,
read its progress, authorize retries and clean up its run directory. See
docs/campaigns.md.

Thin commands: parse → :mod:`vq.campaign.files` / ``vq.campaign.pin`` /
``vq.campaign.rundir`` / ``vq.campaign.retry`` / ``vq.campaign.cleanup`` → render
(:mod:`vq.cli.campaign_render`). Exit codes: 0 success; 1 a sources pin that does not
match (``validate``) or a sources directory that cannot be pinned (``pin``), or a copy
that does not match its manifest; 3 a missing file; 4 a refused campaign, manifest or
journal; 6 a retry that the journal's state refuses or a run directory held by another
process.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from vq.cli.output import echo_json
from vq.cli.types import AsciiFloatRange, AsciiIntRange
from vq.errors import VqError

__all__ = ["campaign"]

_FILE = click.Path(path_type=Path, dir_okay=False)
_ANY = click.Path(path_type=Path)


@click.group()
def campaign() -> None:
    """Campaigns: pinned DAGs of ordinary vq jobs with verified artifacts."""


@campaign.command()
@click.argument("file", type=_FILE)
@click.option("--json", "as_json", is_flag=True, help="Print the validation as JSON.")
def validate(file: Path, as_json: bool) -> int:
    """Check FILE; print its digest, order, edges and each sources directory's digest.

    Exits 4 when the campaign is refused, 1 when a sources directory is missing, holds a
    link, or does not match its pin (the actual digest is printed).
    """
    from vq.campaign.checks import campaign_order, edges
    from vq.campaign.files import check_sources, read_campaign
    from vq.campaign.model import CampaignRefused
    from vq.cli.campaign_render import print_validation

    try:
        loaded = read_campaign(file)
    except CampaignRefused as exc:
        if as_json:
            echo_json({"valid": False, "problems": [p.as_dict() for p in exc.problems]})
        else:
            for problem in exc.problems:
                click.echo(f"refused: {problem.text()}")
        raise
    sources = check_sources(loaded)
    order = campaign_order(loaded.campaign)
    graph = edges(loaded.campaign)
    problems = [problem for check in sources for problem in check.problems]
    if as_json:
        echo_json(
            {
                "valid": not problems,
                "campaign_id": loaded.campaign.campaign_id,
                "campaign_sha256": loaded.digest,
                "order": order,
                "edges": [edge.as_dict() for edge in graph],
                "sources": [check.as_dict() for check in sources],
                "problems": [problem.as_dict() for problem in problems],
            }
        )
    else:
        print_validation(loaded, order, graph, sources)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise VqError(
            f"{file}: {problems[0].text()}{more}",
            hint="pin a new or edited sources directory with the digest printed above",
            reference="campaign-sources-mismatch",
        )
    return 0


@campaign.command()
@click.argument("file", type=_FILE)
@click.option("--json", "as_json", is_flag=True, help="Print what was pinned as JSON.")
def pin(file: Path, as_json: bool) -> int:
    """Write each node's sources.sha256 into FILE: the digest of its sources directory.

    Hashes every sources directory as `validate` does and replaces only the pins, keeping
    the file's formatting; a rerun changes nothing. Exits 1 (writing nothing) when a
    sources directory is missing, holds a link or special file, or places a file where
    an input or output goes; 4 when the campaign is refused.
    """
    from vq.campaign.pin import pin_campaign

    result = pin_campaign(file)
    if as_json:
        echo_json(
            {
                "file": str(file),
                "written": result.written,
                "campaign_sha256": result.campaign_sha256,
                "sources": [source.as_dict() for source in result.sources],
            }
        )
        return 0
    from vq.cli.campaign_render import print_pinned

    print_pinned(result)
    return 0


@campaign.command("artifact-publish")
@click.argument("file", type=_FILE)
@click.argument("workspace", type=_ANY)
@click.option("--node", "node_id", required=True, help="The producing node.")
@click.option(
    "--attempt", type=AsciiIntRange(min=1), required=True, help="The producing attempt (1, 2, ...)."
)
@click.option("--output", "output_name", required=True, help="The node's output to publish.")
def artifact_publish(
    file: Path, workspace: Path, node_id: str, attempt: int, output_name: str
) -> int:
    """Print the vq.campaign-artifact/1 manifest of one output left in WORKSPACE.

    Symbolic links and special files are refused anywhere in the output, including a
    linked component of its path.
    """
    from vq.campaign.files import publish, read_campaign

    loaded = read_campaign(file)
    manifest = publish(loaded, workspace, node_id, attempt, output_name)
    echo_json(manifest.model_dump(mode="json", exclude_none=True))
    return 0


@campaign.command("artifact-verify")
@click.argument("manifest", type=_FILE)
@click.argument("copy", type=_ANY)
@click.option("--json", "as_json", is_flag=True, help="Print {status, problems} as JSON.")
def artifact_verify(manifest: Path, copy: Path, as_json: bool) -> int:
    """Compare COPY with MANIFEST: exit 0 only when they are identical, else 1 naming each
    problem, worst first (unsafe, missing, partial, digest_mismatch, unexpected)."""
    from vq.campaign.files import read_manifest, verify

    parsed = read_manifest(manifest)
    status, problems = verify(parsed, copy)
    what = f"{parsed.node}.{parsed.output} attempt {parsed.attempt}"
    if as_json:
        echo_json(
            {
                "status": status,
                "node": parsed.node,
                "attempt": parsed.attempt,
                "output": parsed.output,
                "entries": len(parsed.entries),
                "problems": [problem.as_dict() for problem in problems],
            }
        )
    elif not problems:
        click.echo(f"verified: {copy} matches {what} ({len(parsed.entries)} entries)")
    else:
        for problem in problems:
            click.echo(f"{problem.status:<16} {problem.path}  {problem.message}")
    if problems:
        raise VqError(
            f"{copy} does not match the manifest of {what}: {status} ({len(problems)} problem(s))",
            hint="stage the artifact again from its verified copy",
            reference=f"campaign-artifact-{status}",
        )
    return 0


@campaign.command()
@click.argument("file", type=_FILE)
@click.argument("run_dir", type=_ANY)
@click.option(
    "--interval",
    type=AsciiFloatRange(min=0.0),
    default=30.0,
    show_default=True,
    help="Seconds between passes while jobs run.",
)
@click.option("--once", is_flag=True, help="Make one pass, then stop.")
@click.option("--json", "as_json", is_flag=True, help="Print the final status as JSON.")
def run(file: Path, run_dir: Path, interval: float, once: bool, as_json: bool) -> int:
    """Run the campaign in RUN_DIR: submit ready nodes, publish their verified outputs,
    and advance until it succeeds or nothing more can run. Safe to stop and rerun.

    Exits 0 only when the campaign succeeded (with --once: while it still progresses
    without a problem); 1 otherwise. A node runs on this machine, a scheduler lane this
    queue drives, or a configured remote host.
    """
    import time

    from vq.campaign.files import read_campaign
    from vq.campaign.host_directory import HostDirectory
    from vq.campaign.published import check_published
    from vq.campaign.run import run_campaign
    from vq.campaign.rundir import RunDir, read_journal
    from vq.cli.campaign_render import print_status, status_json
    from vq.cli.common import gateway

    loaded = read_campaign(file)
    access = gateway()
    directory = RunDir(run_dir)

    def now() -> str:
        return datetime.now(UTC).isoformat(timespec="seconds")

    def log(line: str) -> None:
        click.echo(f"{now()} {line}", err=True)

    hosts = HostDirectory(access)
    try:
        report = run_campaign(
            loaded,
            directory,
            hosts=hosts,
            host_problem=hosts.problem,
            runtime_problem=hosts.runtime_problem,
            state=access.paths,
            interval=interval,
            once=once,
            sleep=time.sleep,
            now=now,
            log=log,
        )
    finally:
        hosts.close()
    journal = read_journal(directory.journal, loaded)
    copies = check_published(loaded, directory, journal, report.plan)
    wrong = [copy.attention() for copy in copies if not copy.as_verified]
    if as_json:
        document = status_json(loaded, journal, report.plan, copies)
        document["needs_attention"] = [*report.needs_attention, *wrong]
        document["passes"] = report.passes
        echo_json(document)
    else:
        print_status(loaded, journal, report.plan, report.problems, copies)
    return 1 if wrong else report.exit_code


@campaign.command()
@click.argument("file", type=_FILE)
@click.argument("journal", type=_FILE)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def status(file: Path, journal: Path, as_json: bool) -> int:
    """Each node's status, reasons and next action, what each attempt ran with, the
    retention list, and whether each published artifact is still the verified copy, from
    FILE and its JOURNAL (RUN_DIR/journal.json)."""
    from vq.campaign.files import read_campaign
    from vq.campaign.planner import plan
    from vq.campaign.published import check_published
    from vq.campaign.rundir import RunDir, read_journal
    from vq.cli.campaign_render import print_status, status_json

    loaded = read_campaign(file)
    checked = read_journal(journal, loaded)
    current = plan(loaded.campaign, loaded.digest, checked)
    copies = check_published(loaded, RunDir(journal.parent), checked, current)
    if as_json:
        echo_json(status_json(loaded, checked, current, copies))
    else:
        print_status(loaded, checked, current, copies=copies)
    return 0


@campaign.command()
@click.argument("file", type=_FILE)
@click.argument("run_dir", type=_ANY)
@click.argument("node")
@click.option("--json", "as_json", is_flag=True, help="Print the new attempt as JSON.")
def retry(file: Path, run_dir: Path, node: str, as_json: bool) -> int:
    """Authorize attempt n + 1 of NODE after attempt n failed or was cancelled.

    Records it (retry_of: n, its own key) and submits nothing: the next `vq campaign run`
    sends it.
    """
    from vq.campaign.files import read_campaign
    from vq.campaign.retry import retry as record_retry
    from vq.campaign.rundir import RunDir

    loaded = read_campaign(file)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    attempt = record_retry(loaded, RunDir(run_dir), node, now=now)
    if as_json:
        echo_json(attempt.model_dump(mode="json", exclude_none=True))
    else:
        click.echo(
            f"{node}: attempt {attempt.attempt} authorized (retry_of: {attempt.retry_of}, "
            f"key {attempt.key}); `vq campaign run` submits it"
        )
    return 0


@campaign.command()
@click.argument("file", type=_FILE)
@click.argument("run_dir", type=_ANY)
@click.option("--intermediate", is_flag=True, help="Also list consumed outputs no one needs.")
@click.option("--apply", "apply", is_flag=True, help="Remove what is listed (default: list).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def cleanup(file: Path, run_dir: Path, intermediate: bool, apply: bool, as_json: bool) -> int:
    """List what RUN_DIR no longer needs, with each path's size and reason; remove it with
    --apply. Never the journal, a manifest, a retained or unconsumed output."""
    from vq.campaign.cleanup import cleanup as plan_cleanup
    from vq.campaign.files import read_campaign
    from vq.campaign.rundir import RunDir
    from vq.cli.campaign_render import print_cleanup

    loaded = read_campaign(file)
    report = plan_cleanup(loaded, RunDir(run_dir), intermediate=intermediate, apply=apply)
    if as_json:
        echo_json(report.as_dict())
    else:
        print_cleanup(report)
    failed = [item for item in report.items if item.error]
    if failed:
        raise VqError(
            f"{len(failed)} path(s) could not be removed; first: {failed[0].path}: "
            f"{failed[0].error}",
            hint="fix the permissions and run the cleanup again",
        )
    return 0
