"""The verdict of a chaos run: :func:`verify` turns the ledger, the specs and the exit
markers into violated invariants ("nothing acknowledged is lost; no job runs twice; every
ending is explained") and a summary of counts; :func:`format_report` prints a failure."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from tests.chaos.plan import ChaosResult
from vq.domain.states import TERMINAL_NAMES

__all__ = ["EXPECTED_ENDINGS", "format_report", "read_marker", "recovery_totals", "verify"]

TERMINAL = TERMINAL_NAMES
#: The only endings this harness can cause (it never runs `vq kill`, sets no limits).
EXPECTED_ENDINGS = frozenset({"COMPLETED", "FAILED", "ABORTED_BY_QUEUE"})


_RECOVERY_LINE = re.compile(
    r"recovery: (?P<examined>\d+) specs examined, (?P<reattached>\d+) reattached, "
    r"(?P<finished>\d+) finished from markers, (?P<aborted>\d+) aborted"
    r".*?(?P<reaped>\d+) leaked groups reaped"
)


def recovery_totals(daemon_log: Path) -> Counter[str]:
    """Sums of the daemon's per-start recovery report lines (coverage of §4.7 paths)."""
    totals: Counter[str] = Counter()
    try:
        text = daemon_log.read_text(errors="replace")
    except OSError:
        return totals
    for match in _RECOVERY_LINE.finditer(text):
        totals["passes"] += 1
        for key, value in match.groupdict().items():
            totals[key] += int(value)
    totals["forkserver_respawns"] = text.count("the fork server died; restarting it")
    return totals


def read_marker(root: Path, job_id: str) -> str | None:
    try:
        return (root / "jobs" / job_id / "_vq" / "exit-code").read_text()
    except OSError:
        return None


def _short_reason(reason: str | None) -> str:
    if not reason:
        return "-"
    return re.sub(r"\d+", "N", reason)[:90]


def verify(result: ChaosResult) -> ChaosResult:
    """Fill ``result.problems`` (violated invariants) and ``result.summary`` (counts)."""
    problems: list[str] = []
    specs, ledger, markers = result.specs, result.ledger, result.markers
    acked = result.acknowledged
    states: Counter[str] = Counter()
    detail: Counter[str] = Counter()
    reasons: Counter[str] = Counter()

    def lines(job_id: str) -> tuple[int, int]:
        seen = ledger.get(job_id, Counter())
        return seen["start"], seen["end"]

    if len(set(acked)) != len(acked):
        dupes = [job_id for job_id, n in Counter(acked).items() if n > 1]
        problems.append(f"the CLI acknowledged the same id twice: {dupes}")

    # Nothing acknowledged is lost.
    for job_id in acked:
        spec = specs.get(job_id)
        if spec is None:
            problems.append(f"{job_id}: acknowledged but its spec is missing or unreadable")
            continue
        if spec.get("state") not in TERMINAL:
            problems.append(f"{job_id}: acknowledged but not terminal ({spec.get('state')})")

    # No job ran twice; nothing ran that the queue does not know.
    for job_id, seen in sorted(ledger.items()):
        if seen["start"] > 1:
            problems.append(f"{job_id}: ran {seen['start']} times (ledger start lines)")
        if seen["end"] > seen["start"]:
            problems.append(f"{job_id}: {seen['end']} end lines but {seen['start']} starts")
        if job_id not in specs:
            problems.append(f"{job_id}: ran but has no spec")
    if result.ledger_garbage:
        problems.append(f"unparsable ledger lines: {result.ledger_garbage[:5]}")

    # Every ending is explained.
    for job_id, spec in sorted(specs.items()):
        state = str(spec.get("state"))
        states[state] += 1
        starts, ends = lines(job_id)
        marker = markers.get(job_id)
        reason = spec.get("failure_reason")
        if state != "COMPLETED":
            reasons[f"{state}: {_short_reason(reason)}"] += 1
        if state not in EXPECTED_ENDINGS:
            problems.append(f"{job_id}: unexpected state {state} (reason: {reason})")
        if spec.get("retry_count", 0) != 0:
            problems.append(f"{job_id}: retried ({spec.get('retry_count')}) without a policy")
        if state == "COMPLETED":
            if (starts, ends) != (1, 1):
                problems.append(f"{job_id}: COMPLETED with {starts} starts and {ends} ends")
            if spec.get("exit_code") != 0 or marker is None or marker.strip() != "0":
                problems.append(
                    f"{job_id}: COMPLETED with exit_code {spec.get('exit_code')} "
                    f"and marker {marker!r}"
                )
        elif state == "FAILED":
            if job_id not in result.collector_killed:
                problems.append(f"{job_id}: FAILED but its collector was not killed: {reason}")
            if "collector" not in (reason or ""):
                problems.append(
                    f"{job_id}: FAILED with a reason not naming the collector: {reason}"
                )
            # With a marker the outcome was known: a collector killed after writing it
            # must be classified from the marker, never as "exit code unknown".
            if marker is not None:
                problems.append(
                    f"{job_id}: FAILED although its exit marker exists ({marker.strip()!r})"
                )
            detail["failed_without_marker"] += 1
            detail[f"failed_lines_{starts}{ends}"] += 1
        elif state == "ABORTED_BY_QUEUE":
            if marker is not None:
                problems.append(
                    f"{job_id}: ABORTED_BY_QUEUE although its exit marker exists "
                    f"({marker.strip()!r}): the outcome was knowable; reason: {reason}"
                )
            if not reason:
                problems.append(f"{job_id}: ABORTED_BY_QUEUE without a recorded reason")
            if job_id in result.collector_killed:
                detail["aborted_collector_killed"] += 1
            elif starts:
                # Not a harness-killed collector, yet it started: only the narrow window
                # between launch and the pid record can explain it. Worth a look.
                detail["aborted_started_not_collector_killed"] += 1
            key = {(0, 0): "never_started", (1, 0): "start_no_end"}.get((starts, ends), "ran")
            detail[f"aborted_{key}"] += 1

    if result.stray_pids:
        problems.append(f"processes of this state root survive the final stop: {result.stray_pids}")

    counts = result.counts
    acked_set = set(acked)
    result.problems = problems
    result.summary = {
        "seed": result.plan.seed,
        "elapsed_seconds": round(result.elapsed, 1),
        "submitted": len(acked),
        "completed": sum(1 for j in acked_set if specs.get(j, {}).get("state") == "COMPLETED"),
        "failed": sum(1 for j in acked_set if specs.get(j, {}).get("state") == "FAILED"),
        "aborted": sum(1 for j in acked_set if specs.get(j, {}).get("state") == "ABORTED_BY_QUEUE"),
        "daemon_kills": counts["daemon_kills"],
        "startup_kills": counts["startup_kills"],
        "collector_kills": counts["collector_kills"],
        "collector_kill_skipped": counts["collector_kill_skipped"],
        "forkserver_kills": counts["forkserver_kills"],
        "forkserver_only_kills": counts["forkserver_only_kills"],
        "graceful_stops": counts["graceful_stops"],
        "restarts": counts["restarts"],
        "start_retries": counts["start_retries"],
        "submitted_while_down": counts["submitted_down"],
        "submit_errors": counts["submit_errors"],
        "unacknowledged_specs": len(set(specs) - acked_set),
        "states_all_specs": dict(states),
        **dict(sorted(detail.items())),
        "recovery": dict(result.recovery),
        "reasons": dict(reasons.most_common()),
        "anomalies": list(result.anomalies),
    }
    problems.extend(f"anomaly: {a}" for a in result.anomalies)
    return result


def format_report(result: ChaosResult, log_tail: Iterable[str] = ()) -> str:
    """A failure message: plan, seed, summary, the first problems and a log tail."""
    parts = [
        f"chaos run failed — reproduce with VQ_CHAOS_SEED={result.plan.seed} "
        f"({result.plan.describe()})",
        "summary: " + json.dumps(result.summary, indent=1),
        f"{len(result.problems)} problem(s):",
        *(f"  - {p}" for p in result.problems[:40]),
    ]
    tail = list(log_tail)
    if tail:
        parts += ["chaos log tail:", *tail]
    return "\n".join(parts)
