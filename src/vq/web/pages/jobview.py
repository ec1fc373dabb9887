"""The job page's specification rows: every user-meaningful JobSpec field, readable.

:func:`spec_rows` turns a ``vq status --json`` view into ``{"label", "text", "links"}``
rows (``links``: ``{"href", "text", "state"}``, ``state`` a dependency's current state or
None). It is pure (no I/O): the states of dependencies come in as ``dep_states``.

Contracts:

* Empty or default-valued fields are skipped (no "none" rows), so a plain job shows few.
* Server paths are never rendered: ``workspace``, ``workdir``, ``cwd``, ``archive_path``,
  the log paths and the runtime pin's executable and git directory are left out;
  ``workspace_source`` is shown as plain text, as recorded.
* The idempotency key is stored only as a hash: the page says whether one was used and
  never shows the hash nor the intent digest (:func:`scrub` drops both from the view).
* Links only ever point at well-formed job ids (``/jobs/<12 hex>``) or the queue page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast
from urllib.parse import urlencode

from vq.domain.ids import is_job_id
from vq.web.pages.render import when

__all__ = [
    "DEFAULT_BACKOFF_SECONDS",
    "MAX_DEP_LINKS",
    "PageLink",
    "ShownJob",
    "SpecRow",
    "dependency_ids",
    "scrub",
    "spec_rows",
]

#: The retry backoff base the daemon uses when a spec sets none.
DEFAULT_BACKOFF_SECONDS = 30
#: Dependencies shown (with their states) before the rest are summarized as a count.
MAX_DEP_LINKS = 50
#: View keys never sent to a page: server paths and idempotency digests.
HIDDEN = ("workspace", "idempotency_key_hash", "idempotency_intent_digest")


class PageLink(TypedDict):
    """A link a page row shows: where to, its text, and a state badge (or none)."""

    href: str
    text: str
    state: str | None


class SpecRow(TypedDict):
    """One specification row of the job page: a label, its text, its links."""

    label: str
    text: str
    links: list[PageLink]


class ShownJob(TypedDict, total=False):
    """A job's status view as a console page shows it: every key of the view but the
    :data:`HIDDEN` ones, and ``idempotency_key_used``. The keys code here reads are
    declared; the templates read the others as the view carries them."""

    id: str
    state: str
    mem_mb: int | None
    depends_on: list[str]
    depends_on_any: list[str]
    idempotency_key_used: bool


def scrub(job: Mapping[str, object]) -> ShownJob:
    """``job`` without :data:`HIDDEN` keys, with ``idempotency_key_used`` instead."""
    kept = {key: value for key, value in job.items() if key not in HIDDEN}
    return cast(ShownJob, {**kept, "idempotency_key_used": bool(job.get("idempotency_key_hash"))})


def dependency_ids(job: Mapping[str, Any]) -> list[str]:
    """The well-formed ids of ``depends_on`` then ``depends_on_any`` (duplicates dropped)."""
    ids = [*(job.get("depends_on") or []), *(job.get("depends_on_any") or [])]
    return [d for d in dict.fromkeys(str(i) for i in ids) if is_job_id(d)]


def _row(label: str, text: str = "", links: list[PageLink] | None = None) -> SpecRow:
    return {"label": label, "text": text, "links": links or []}


def _job_link(job_id: str, state: str | None = None) -> PageLink:
    return {"href": f"/jobs/{job_id}", "text": job_id, "state": state}


def _seconds(value: Any) -> str:
    total = int(value)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if total >= size and total % size == 0:
            return f"{total // size}{unit}"
    return f"{total}s"


def _deps(label: str, ids: list[str], dep_states: Mapping[str, str | None]) -> SpecRow:
    shown = [d for d in ids if is_job_id(d)][:MAX_DEP_LINKS]
    links = [_job_link(d, dep_states.get(d) or "unknown") for d in shown]
    rest = len(ids) - len(shown)
    return _row(label, f"and {rest} more" if rest else "", links)


def _program(job: Mapping[str, Any]) -> SpecRow | None:
    pin = job.get("program_runtime_pin") or {}
    program = job.get("program") or pin.get("program")
    if not program:
        return None
    parts = [str(program)]
    branch = job.get("branch") or pin.get("branch")
    if branch:
        parts.append(f"branch {branch}")
    sha = pin.get("resolved_git_sha") or pin.get("git_sha")
    if sha:
        enforced = " (enforced)" if pin.get("enforce_git_sha") else ""
        parts.append(f"pinned at {str(sha)[:12]}{enforced}")
    version = pin.get("import_version") or pin.get("version")
    if version:
        parts.append(f"version {version}")
    if job.get("refresh_before"):
        parts.append("refreshed before the run")
    return _row("Program", " · ".join(parts))


def _group(job: Mapping[str, Any], kind: str) -> SpecRow | None:
    group = job.get(f"{kind}_group_id")
    if not group:
        return None
    index, total = job.get(f"{kind}_index"), job.get(f"{kind}_total")
    word = "element" if kind == "array" else "step"
    text = f"{word} {index} of {total}" if total else f"{word} {index}"
    if kind == "array" and job.get("array_max_parallel"):
        text += f" · at most {job['array_max_parallel']} at once"
    if kind == "array" and job.get("array_value") is not None:
        text += f" · value {job['array_value']}"
    link: PageLink = {"href": "/?" + urlencode({"open": group}), "text": str(group), "state": None}
    return _row(kind.capitalize(), text, [link])


def _retry(job: Mapping[str, Any]) -> SpecRow | None:
    retry_max = int(job.get("retry_max") or 0)
    if not retry_max and not job.get("retry_count"):
        return None
    backoff = job.get("retry_backoff_seconds") or DEFAULT_BACKOFF_SECONDS
    return _row(
        "Retries",
        f"{job.get('retry_count') or 0} of {retry_max} used · backoff {_seconds(backoff)}, "
        "doubling per attempt",
    )


def _rerun(job: Mapping[str, Any]) -> SpecRow | None:
    until = job.get("rerun_until_file_exists")
    if not until and job.get("rerun_max") is None and not job.get("rerun_count"):
        return None
    parts = [f"until {until} exists"] if until else []
    limit = job.get("rerun_max")
    parts.append(
        f"{job.get('rerun_count') or 0} of {limit} reruns"
        if limit is not None
        else f"{job.get('rerun_count') or 0} reruns so far"
    )
    return _row("Rerun", " · ".join(parts))


def _scheduler(job: Mapping[str, Any]) -> SpecRow | None:
    target = job.get("scheduler_target")
    if not target:
        return None
    dialect = job.get("scheduler_dialect")
    parts = [f"{target} ({dialect})" if dialect else str(target)]
    for key, label in (
        ("scheduler_job_id", f"{dialect} job" if dialect else "job"),
        ("phase", "phase"),
        ("scheduler_queued_reason", "waiting:"),
        ("scheduler_exec_host", "on"),
    ):
        if job.get(key):
            parts.append(f"{label} {job[key]}")
    used, limit = job.get("scheduler_walltime_used"), job.get("scheduler_walltime_limit")
    if used or limit:
        parts.append(f"cluster elapsed {used or '-'} of {limit or 'no limit'}")
    if job.get("scheduler_tasks"):
        parts.append(f"{job['scheduler_tasks']} tasks")
    return _row("Scheduler", " · ".join(parts))


def spec_rows(job: Mapping[str, Any], dep_states: Mapping[str, str | None]) -> list[SpecRow]:
    """The specification rows of the job page, in reading order, empty ones skipped."""
    rows: list[SpecRow | None] = []
    if job.get("submitter"):
        rows.append(_row("Submitter", str(job["submitter"])))
    if job.get("not_before"):
        rows.append(_row("Not before", when(job["not_before"])))
    rows.append(_program(job))
    if job.get("workspace_source"):
        rows.append(_row("Workspace from", str(job["workspace_source"])))
    if job.get("depends_on"):
        rows.append(_deps("Depends on (all)", list(job["depends_on"]), dep_states))
    if job.get("depends_on_any"):
        rows.append(_deps("Depends on (any)", list(job["depends_on_any"]), dep_states))
    rows.append(_group(job, "array"))
    rows.append(_group(job, "chain"))
    parent = job.get("parent_jobid")
    if parent and is_job_id(str(parent)):
        rows.append(_row("Resubmitted from", "", [_job_link(str(parent))]))
    rows.append(_retry(job))
    rows.append(_rerun(job))
    rows.append(_scheduler(job))
    if job.get("idempotency_key_used"):
        rows.append(_row("Idempotency key", "used (stored only as a hash)"))
    flags = [
        text
        for key, text in (
            ("clean_workdir_on_terminal", "workdir removed when the job ends"),
            ("recover_on_reboot", "resumed after a reboot"),
        )
        if job.get(key)
    ]
    if flags:
        rows.append(_row("Cleanup and recovery", " · ".join(flags)))
    if job.get("expected_outputs"):
        rows.append(_row("Expected outputs", ", ".join(str(o) for o in job["expected_outputs"])))
    if job.get("last_output_status"):
        rows.append(_row("Outputs", str(job["last_output_status"])))
    if job.get("archived_at"):
        rows.append(_row("Archived", when(job["archived_at"])))
    return [row for row in rows if row is not None]
