"""The shapes the fleet console reads and answers (docs/json.md, the fleet endpoints).

A host's snapshot (:mod:`vq.web.fleet.snapshots`, run on that host) and the console's
views of it (:mod:`vq.web.fleet.source`, :mod:`vq.web.fleet.views`) share these types. A
row another host sent was checked by :class:`vq.protocol.remote_answers.JobRow` (its
``id`` and ``state``); its other fields are read with ``.get`` because an older vq may
lack them, and every field it carries is passed on as it came (a TypedDict is a plain
dict at run time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

from vq.domain.events import Event
from vq.domain.receipt import Receipt
from vq.protocol.answers import ListRow, SchedulerWarning
from vq.services.top import Sample

if TYPE_CHECKING:  # the hidden snapshot verbs stay light on the host
    from vq.web.cockpit import QueueSummary
    from vq.web.pages.views import CapacityBar

__all__ = [
    "ActionOutcome",
    "FleetEvents",
    "FleetHosts",
    "FleetJob",
    "FleetLogs",
    "FleetPage",
    "FleetQueue",
    "FleetRow",
    "FleetSamples",
    "FleetTable",
    "HostBrief",
    "HostJSON",
    "HostListing",
    "HostRow",
    "HostSnapshot",
    "Incomplete",
    "JobLogs",
    "JobSnapshot",
    "LaneSummary",
    "LaneWarning",
]


class FleetRow(TypedDict, total=False):
    """A job of one host as its ``vq list --json`` row or ``vq status --json`` view
    carries it, plus ``host`` and ``lane`` (the scheduler lane, null for other jobs) the
    console adds to rows; a job snapshot says ``idempotency_key_used`` instead of the
    key's digests."""

    id: str
    state: str
    job_name: str | None
    tags: list[str] | None
    submitted_at: str | None
    scheduler_target: str | None
    scheduler_state: str | None
    array_group_id: str | None
    chain_group_id: str | None
    mem_mb: int | None
    idempotency_key_used: bool
    #: a lane job's cluster phase and its STATE text (``vq.domain.lane_phase``), as a
    #: host that words them sends them; absent from an older host's rows
    phase: str | None
    phase_label: str | None
    host: str
    lane: str | None


class LaneWarning(SchedulerWarning):
    """A blind-lane warning of one of the lane's jobs."""

    job: str


class LaneSummary(TypedDict):
    """One scheduler lane a host drives (:mod:`vq.web.fleet.lanes`)."""

    name: str
    kind: str
    tracked: int
    queued: int
    running: int
    status: str
    last_ok_at: str | None
    last_attempt_at: str | None
    last_error: str | None
    warnings: list[LaneWarning]


class HostSnapshot(TypedDict):
    """``vq web fleet-snapshot --json``: one host's whole view."""

    summary: QueueSummary
    jobs: list[ListRow]
    total_jobs: int
    running: list[ListRow]
    lanes: list[LaneSummary]


class JobLogs(TypedDict):
    stdout: str
    stderr: str


class JobSnapshot(TypedDict):
    """``vq web fleet-job ID --json``: one job's whole detail.

    ``events`` are the job's timeline records and ``samples`` its watchdog samples, each
    as its file holds it; ``receipt`` the resource-usage file's object, or null."""

    job: FleetRow
    events: list[Event]
    logs: JobLogs
    samples: list[Sample]
    receipt: Receipt | None


class HostListing(TypedDict):
    """``vq web fleet-list --json`` as the console reads it: the rows and how many match."""

    jobs: list[FleetRow]
    total: int


class FleetPage(HostListing):
    """One page of the merged fleet table."""

    offset: int
    limit: int


class Incomplete(TypedDict):
    """A host whose listing failed for this page."""

    host: str
    error: str


class FleetTable(FleetPage):
    """``GET /api/v1/fleet/queue`` before its ``hosts``."""

    incomplete: list[Incomplete]


class HostJSON(TypedDict):
    """One host in ``GET /api/v1/fleet/hosts``."""

    name: str
    status: str
    error: str | None
    last_ok_at: str | None
    summary: QueueSummary | None
    total_jobs: int
    lanes: list[LaneSummary]


class FleetHosts(TypedDict):
    """``GET /api/v1/fleet/hosts``."""

    hosts: list[HostJSON]


class HostBrief(TypedDict):
    """One host in ``GET /api/v1/fleet/queue``: :class:`HostJSON` without its summary."""

    name: str
    status: str
    error: str | None
    last_ok_at: str | None
    total_jobs: int
    lanes: list[LaneSummary]


class FleetQueue(FleetTable):
    """``GET /api/v1/fleet/queue``."""

    hosts: list[HostBrief]


class HostRow(HostJSON):
    """One row of the fleet page's host table."""

    counts: dict[str, int]
    bars: list[CapacityBar]
    running: list[FleetRow]


class ActionOutcome(TypedDict):
    """``POST /api/v1/fleet/jobs/{host}/{id}/{action}``: the host's ``vq ACTION --json``
    (its rows, or the new job of ``resubmit``); a kill adds ``resubmitted``."""

    host: str
    id: str
    action: str
    result: list[FleetRow] | FleetRow
    resubmitted: NotRequired[str | None]


class FleetJob(FleetRow, total=False):
    """``GET /api/v1/fleet/jobs/{host}/{id}``: the job's view, its host and receipt."""

    receipt: Receipt | None


class FleetLogs(TypedDict):
    """``GET /api/v1/fleet/jobs/{host}/{id}/logs``."""

    host: str
    id: str
    stream: str
    text: str


class FleetSamples(TypedDict):
    """``GET /api/v1/fleet/jobs/{host}/{id}/samples``."""

    host: str
    id: str
    samples: list[Sample]


class FleetEvents(TypedDict):
    """``GET /api/v1/fleet/jobs/{host}/{id}/events``."""

    host: str
    id: str
    events: list[Event]
