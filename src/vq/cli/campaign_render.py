"""Human output of ``vq campaign`` (tables via rich) and the ``status --json`` document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vq.campaign.checks import Edge
    from vq.campaign.cleanup import CleanupReport
    from vq.campaign.files import LoadedCampaign, SourcesCheck
    from vq.campaign.journal import Journal
    from vq.campaign.pin import PinResult
    from vq.campaign.planner import CampaignPlan, NodePlan
    from vq.campaign.published import CampaignStatusJSON, PublishedCopy

__all__ = [
    "print_cleanup",
    "print_pinned",
    "print_status",
    "print_validation",
    "status_json",
]


def _console() -> Any:
    from vq.cli.rich_console import human_console

    return human_console(soft_wrap=True)


def _styled(*parts: str | tuple[str, str]) -> Any:
    """Plain strings and (text, style) pairs as one rich Text: user text is never markup."""
    from rich.text import Text

    return Text.assemble(*parts)


def print_validation(
    loaded: LoadedCampaign, order: list[str], graph: list[Edge], sources: list[SourcesCheck]
) -> None:
    console = _console()
    console.print(f"campaign        {loaded.campaign.campaign_id}")
    console.print(f"campaign_sha256 {loaded.digest}")
    console.print(f"order           {' -> '.join(order)}")
    console.print("edges")
    if not graph:
        console.print("  (none)")
    for edge in graph:
        console.print(f"  {edge.before} -> {edge.node}  {edge.on} ({edge.via})")
    if sources:
        console.print("sources")
    for check in sources:
        if check.ok:
            verdict: tuple[Any, ...] = (("matches its pin", "green"),)
        elif check.actual is None:
            verdict = (("unreadable", "red"),)
        else:
            verdict = (("does NOT match its pin", "red"), f"; actual sha256 {check.actual}")
        line = f"  {check.node}  {check.path}/  {check.entries} entries  "
        console.print(_styled(line, *verdict))
        for problem in check.problems:
            console.print(_styled("    ", (f"{problem.field}: {problem.message}", "red")))
    if all(check.ok for check in sources):
        console.print("valid", style="green")


def print_pinned(result: PinResult) -> None:
    """Each node's pin (``pinned`` when it changed, else ``unchanged``), then the file's
    fate and the campaign's new digest."""
    from vq.domain.text import escape_controls

    console = _console()
    if not result.sources:
        console.print("no node has sources: nothing to pin")
    for source in result.sources:
        verdict = ("pinned", "green") if source.changed else ("unchanged", "dim")
        line = f"  {escape_controls(source.node)}  {escape_controls(source.path)}/  "
        console.print(_styled(line, f"{source.entries} entries  ", verdict, f" {source.sha256}"))
    where = escape_controls(str(result.path))
    console.print(f"{'wrote' if result.written else 'unchanged'} {where}")
    console.print(f"campaign_sha256 {result.campaign_sha256}")


_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "blocked": "red",
    "uncertain": "yellow",
    "running": "cyan",
    "ready": "blue",
    "waiting": "dim",
}


def status_json(
    loaded: LoadedCampaign,
    journal: Journal,
    current: CampaignPlan,
    copies: list[PublishedCopy] | None = None,
) -> CampaignStatusJSON:
    """The ``vq campaign status --json`` document (additive schema). With ``copies`` (the
    published artifacts checked again): ``artifacts`` lists each verdict, each verified
    output record of ``attempts`` gets its ``copy`` verdict, and a node whose latest
    attempt has a tampered or missing copy is no longer ``outputs_verified``."""
    plan = current.as_dict()
    document: CampaignStatusJSON = {
        "status": plan["status"],
        "nodes": plan["nodes"],
        "retention": plan["retention"],
        "campaign_id": loaded.campaign.campaign_id,
        "campaign_sha256": loaded.digest,
        "attempts": [
            attempt.model_dump(mode="json", exclude_none=True) for attempt in journal.attempts
        ],
    }
    if copies is None:
        return document
    document["artifacts"] = [copy.as_dict() for copy in copies]
    verdicts = {(c.node, c.attempt, c.output): c for c in copies}
    for attempt in document["attempts"]:
        for record in attempt.get("outputs", []):
            found = verdicts.get((attempt["node"], attempt["attempt"], record["name"]))
            if found is not None:
                record["copy"] = found.status
    wrong = {(c.node, c.attempt) for c in copies if not c.as_verified}
    for node in document["nodes"]:
        if (node["node"], node["attempt"]) in wrong:
            node["outputs_verified"] = False
    return document


def print_status(
    loaded: LoadedCampaign,
    journal: Journal,
    current: CampaignPlan,
    problems: list[str] | None = None,
    copies: list[PublishedCopy] | None = None,
) -> None:
    from rich.table import Table

    console = _console()
    wrong = [copy for copy in copies or [] if not copy.as_verified]
    console.print(
        _styled(
            f"campaign {loaded.campaign.campaign_id} ({loaded.digest[:12]}): ",
            (current.status, _STYLE.get(current.status, "bold")),
            *([(f"; published artifacts: {_copy_counts(wrong)}", "red")] if wrong else []),
        )
    )
    jobs = [_job_cell(node) for node in current.nodes]
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("NODE", "STATUS", "ATTEMPT"):
        table.add_column(column, overflow="fold")
    # HOST:ID whole on one line at any width (an id is copied into other commands): the
    # column takes its natural width and the other columns wrap instead
    table.add_column("JOB", no_wrap=True, min_width=max(len("JOB"), *map(len, jobs)))
    for column in ("NEXT", "REASONS"):
        table.add_column(column, overflow="fold")
    for node, job in zip(current.nodes, jobs, strict=True):
        latest = node.attempt
        action = node.action["action"] if node.action else "-"
        table.add_row(
            node.node,
            _styled((node.status, _STYLE[node.status])),
            "-" if latest is None else f"{latest.attempt} ({latest.state})",
            job,
            action,
            "; ".join(node.reasons),
        )
    console.print(table)
    ran = [a for a in journal.attempts if a.runtime]
    if ran:
        console.print("Ran with")
        for attempt in ran:
            assert attempt.runtime is not None
            fields = ", ".join(f"{k}={v}" for k, v in attempt.runtime.items() if v is not None)
            console.print(f"  {attempt.node} attempt {attempt.attempt}: {fields}")
    if current.retention:
        console.print("Retained (a consumer still needs them)")
        for item in current.retention:
            console.print(f"  {item.node} attempt {item.attempt} for {', '.join(item.consumers)}")
    if copies:
        console.print(f"Published artifacts: {_copy_counts(copies)}")
        for copy in wrong:
            where = f"  {copy.node} attempt {copy.attempt} {copy.output}: "
            detail = f"  {copy.problem}" if copy.problem else f"  {copy.path}"
            console.print(_styled(where, (copy.status.upper(), "red"), detail))
    from vq.campaign.planner import attention

    lines = [*(problems or []), *attention(current), *(copy.attention() for copy in wrong)]
    if lines:
        console.print("Needs attention")
        for line in lines:
            console.print(f"  {line}")


def _job_cell(node: NodePlan) -> str:
    """``HOST:ID`` of the node's latest attempt, or ``-`` before it has a job."""
    latest = node.attempt
    return "-" if latest is None or not latest.job_id else f"{latest.host}:{latest.job_id}"


def _copy_counts(copies: list[PublishedCopy]) -> str:
    """``2 verified, 1 TAMPERED``: how many published artifacts have each verdict (a
    verdict that is not as verified in capitals)."""
    counts: dict[str, int] = {}
    for copy in copies:
        word = copy.status.replace("_", " ")
        word = word if copy.as_verified else word.upper()
        counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{count} {word}" for word, count in counts.items())


def print_cleanup(report: CleanupReport) -> None:
    console = _console()
    if not report.items:
        console.print("nothing to clean up")
        return
    for item in report.items:
        rest = f"{item.path}  {_bytes(item.size)}  {item.reason}"
        if not report.applied:
            console.print(rest)
        elif item.removed:
            console.print("removed  " + rest)
        else:
            console.print(_styled((f"failed ({item.error})", "red"), "  " + rest))
    if report.applied:
        console.print(f"freed {_bytes(report.bytes_freed)} of {_bytes(report.bytes_listed)}")
    else:
        console.print(
            f"{_bytes(report.bytes_listed)} listed; nothing removed (add --apply to remove it)",
            style="dim",
        )


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
