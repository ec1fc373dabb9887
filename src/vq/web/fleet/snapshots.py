"""What a fleet console reads from one host in one SSH call (run *on* that host).

``vq web fleet-snapshot --json`` and ``vq web fleet-job ID --json`` (hidden verbs) print
these payloads, so the console refreshes a host's whole view — queue summary and listing
— or one job's whole detail — status, timeline, log tails, the last samples, receipt —
with a single bounded SSH call instead of one per panel. ``vq web fleet-list --json``
prints one filtered selection of the host's jobs, for the fleet table's pages and filters
past the snapshot's newest :data:`LISTED_JOBS` rows.

They read exactly what the single-host console reads (the gateway and the workspace's
``_vq`` files) but import no web framework, so a call costs one light
``vq`` start on the host. Server paths are never included: the view drops
``workspace`` and the idempotency digests, and error messages name the state root as
``<state-root>``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict, cast

from vq._fs import read_regular, read_tail_lines
from vq.domain.ids import is_job_id
from vq.domain.receipt import Receipt
from vq.domain.spec import utcnow
from vq.errors import NotFound, VqError
from vq.gateway import Gateway
from vq.hosts.health import read_health
from vq.paths import StatePaths
from vq.protocol.answers import ListQuery, ListRow, SchedulerWarning
from vq.services.status import blind_lane_warning
from vq.services.top import Sample, parse_sample
from vq.web.fleet.lanes import driven_lanes_here, lane_summaries
from vq.web.fleet.shapes import FleetRow, HostSnapshot, JobSnapshot, LaneSummary

__all__ = ["EVENTS_TAIL", "LISTED_JOBS", "LOG_TAIL_LINES", "SAMPLES", "ListedRows", "Snapshots"]

#: Newest jobs one host lists in a snapshot (the fleet table pages over these).
LISTED_JOBS = 1000
#: Events, log lines and samples one job snapshot carries (§6.5: at most 60 samples).
EVENTS_TAIL = 200
LOG_TAIL_LINES = 200
SAMPLES = 60
_TAIL_BYTES = 256 * 1024
_SAMPLE_BYTES = 256 * 1024
#: View keys never sent: server paths and idempotency digests.
_HIDDEN = ("workspace", "idempotency_key_hash", "idempotency_intent_digest")


class ListedRows(TypedDict):
    """``vq web fleet-list --json``: the newest matching rows and how many match."""

    jobs: list[ListRow]
    total: int


class Snapshots:
    """The two payloads, over one state root (see the module docstring)."""

    def __init__(self, paths: StatePaths | None = None) -> None:
        self.paths = paths or StatePaths.from_env()
        self.gateway = Gateway(self.paths, os.environ)

    @contextlib.contextmanager
    def scrubbed(self) -> Iterator[None]:
        """Re-raise a VqError with the state root's paths replaced by names."""
        try:
            yield
        except VqError as exc:
            for path, name in (
                (self.paths.archive_dir, "<archive-dir>"),
                (self.paths.root, "<state-root>"),
            ):
                exc.message = exc.message.replace(str(path), name)
                exc.hint = exc.hint.replace(str(path), name) if exc.hint else exc.hint
            exc.args = (exc.message,)
            raise

    def host(self) -> HostSnapshot:
        """``{"summary": <GET /api/v1/queue>, "jobs": [ROW…], "total_jobs": n, "running":
        [ROW…], "lanes": [LANE…]}``: the newest :data:`LISTED_JOBS` rows of ``vq list
        --json`` (newest submitted first, ties by id descending), every running or paused
        one, and the scheduler lanes this host drives (:mod:`vq.web.fleet.lanes`)."""
        from vq.web.cockpit import queue_summary

        with self.scrubbed():
            summary = queue_summary(self.gateway, self.paths)
            rows, total = self._newest({}, LISTED_JOBS)
            active = self.gateway.list_rows({"states": ["RUNNING", "SUSPENDED"]})["jobs"]
            lanes = self._lanes(active)
        return {
            "summary": summary,
            "jobs": rows,
            "total_jobs": total,
            "running": _newest_first(active),
            "lanes": lanes,
        }

    def _lanes(self, active: list[ListRow]) -> list[LaneSummary]:
        """The lanes this host drives (:func:`vq.web.fleet.lanes.lane_summaries`), from
        local files only: the configuration, the lanes' health records, the job specs."""
        lanes = driven_lanes_here()
        if not lanes:
            return []
        pending = self.gateway.list_rows({"states": ["PENDING"]})["jobs"]
        now = utcnow()
        warnings: dict[str, SchedulerWarning] = {}
        for row in active:
            lane = lanes.get(str(row.get("scheduler_target")))
            if lane is not None and lane.accounting == "none":
                warning = blind_lane_warning(self.gateway.spec(row["id"]), lane, now)
                if warning is not None:
                    warnings[row["id"]] = warning
        health = {name: read_health(self.paths.root, name) for name in lanes}
        return lane_summaries(lanes, [*pending, *active], health, warnings)

    def listing(self, filters: ListQuery, limit: int) -> ListedRows:
        """``{"jobs": [ROW…], "total": n}``: the newest ``limit`` rows of ``vq list --json``
        matching ``filters`` (its ``states``, ``tags``, ``name``, ``since`` (ISO),
        ``group`` parameters), in :meth:`host`'s order, and how many match."""
        with self.scrubbed():
            rows, total = self._newest(filters, limit)
        return {"jobs": rows, "total": total}

    def _newest(self, filters: ListQuery, limit: int) -> tuple[list[ListRow], int]:
        """The newest ``limit`` rows matching ``filters`` in :func:`_newest_first`'s order,
        and how many match. The queue sends only ``limit + 1`` rows, newest submitted
        first; when the last row kept and the first row dropped were submitted at the same
        moment (an array's members are), the queue's tie order may differ from ours, so
        every matching row is read and sorted here instead."""
        page = self.gateway.list_rows({**filters, "sort": "-submitted_at", "limit": limit + 1})
        rows = page["jobs"]
        cut = 0 < limit < len(rows)
        if cut and rows[limit].get("submitted_at") == rows[limit - 1].get("submitted_at"):
            rows = self.gateway.list_rows(filters)["jobs"]
            return _newest_first(rows)[:limit], len(rows)
        return _newest_first(rows)[:limit], int(page.get("total", len(rows)))

    def job(self, job_id: str) -> JobSnapshot:
        """``{"job", "events", "logs": {"stdout", "stderr"}, "samples", "receipt"}``."""
        if not is_job_id(job_id):
            raise NotFound("no such job: job ids are 12 lowercase hex characters")
        with self.scrubbed():
            view = self.gateway.status(job_id)
            spec = self.gateway.spec(job_id)
            events = self.gateway.events(job_id, refuse_archived=False)[-EVENTS_TAIL:]
        # the console's copy of the view: whether a key was used, never its hash
        kept = {key: value for key, value in view.items() if key not in _HIDDEN}
        used = bool(view.get("idempotency_key_hash"))
        shown = cast(FleetRow, {**kept, "idempotency_key_used": used})
        workspace = self.paths.workspace(job_id)
        return {
            "job": shown,
            "events": events,
            "logs": {
                "stdout": _tail(workspace, spec.stdout_path),
                "stderr": _tail(workspace, spec.stderr_path),
            },
            "samples": _samples(workspace),
            "receipt": _receipt(workspace),
        }


def _newest_first(rows: list[ListRow]) -> list[ListRow]:
    """The fleet table's order on one host: newest submitted first, ties by id."""
    return sorted(
        rows, key=lambda row: (str(row.get("submitted_at") or ""), str(row.get("id"))), reverse=True
    )


def _inside(workspace: Path, relative: str) -> Path | None:
    root = workspace.resolve()
    target = (root / relative).resolve()
    return target if target.is_relative_to(root) and target != root else None


def _tail(workspace: Path, relative: str) -> str:
    """The last :data:`LOG_TAIL_LINES` lines of a log ("" when absent or unreadable)."""
    path = _inside(workspace, relative)
    try:
        chunks = read_tail_lines(path, _TAIL_BYTES) if path is not None else []
    except OSError:
        return ""
    ends = bool(chunks) and chunks[-1] == b""
    kept = (chunks[:-1] if ends else chunks)[-LOG_TAIL_LINES:]
    return (b"\n".join(kept) + (b"\n" if kept and ends else b"")).decode(errors="replace")


def _samples(workspace: Path) -> list[Sample]:
    path = _inside(workspace, "_vq/samples.jsonl")
    try:
        lines = read_tail_lines(path, _SAMPLE_BYTES) if path is not None else []
    except OSError:
        return []
    records = [r for r in (parse_sample(line) for line in lines) if r is not None]
    return records[-SAMPLES:]


def _receipt(workspace: Path) -> Receipt | None:
    path = _inside(workspace, "_vq/resource-usage.json")
    try:
        data = json.loads(read_regular(path, 1024 * 1024, follow=True)) if path else None
    except (OSError, ValueError):
        return None
    return cast(Receipt, data) if isinstance(data, dict) else None
