"""What a fleet console reads from one host in one SSH call (run *on* that host).

``vq web fleet-snapshot --json`` and ``vq web fleet-job ID --json`` (hidden verbs) print
these payloads, so the console refreshes a host's whole view — queue summary and listing
— or one job's whole detail — status, timeline, log tails, the last samples, receipt —
with a single bounded SSH call instead of one per panel. Both are built from
:class:`vq.web.backend.Backend`, the code the single-host console reads with, so server
paths are already scrubbed. Pure assembly on top of it; no caching here.
"""

from __future__ import annotations

from typing import Any

from vq.web.backend import Backend
from vq.web.context import WebConfig
from vq.web.pages import jobview

__all__ = [
    "EVENTS_TAIL",
    "LISTED_JOBS",
    "LOG_TAIL_LINES",
    "SAMPLES",
    "host_snapshot",
    "job_snapshot",
]

#: Newest jobs one host lists in a snapshot (the fleet table pages over these).
LISTED_JOBS = 1000
#: Events, log lines and samples one job snapshot carries (§6.5: at most 60 samples).
EVENTS_TAIL = 200
LOG_TAIL_LINES = 200
SAMPLES = 60


def host_snapshot(backend: Backend | None = None) -> dict[str, Any]:
    """``{"summary": <GET /api/v1/queue>, "jobs": [ROW…], "total_jobs": n}``: the
    newest :data:`LISTED_JOBS` rows of ``vq list --json``."""
    data = backend or Backend(WebConfig.from_env())
    summary = data.queue_summary()
    rows = data.list_jobs()["jobs"]
    rows.sort(key=lambda row: str(row.get("submitted_at") or ""), reverse=True)
    return {"summary": summary, "jobs": rows[:LISTED_JOBS], "total_jobs": len(rows)}


def job_snapshot(job_id: str, backend: Backend | None = None) -> dict[str, Any]:
    """``{"job", "events", "logs": {"stdout", "stderr"}, "samples", "receipt"}``."""
    data = backend or Backend(WebConfig.from_env())
    job = jobview.scrub(data.status(job_id))
    return {
        "job": job,
        "events": data.events(job_id, tail=EVENTS_TAIL),
        "logs": {s: data.log_tail(job_id, s, LOG_TAIL_LINES) for s in ("stdout", "stderr")},
        "samples": data.samples(job_id, limit=SAMPLES),
        "receipt": data.receipt(job_id),
    }
