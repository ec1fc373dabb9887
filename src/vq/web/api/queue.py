"""``/api/v1/queue``: the §6.3 cockpit summary, overview, usage, drain and undrain.

Reads need ``read``; drain and undrain need ``control``. Drain state lives in
``drain.json`` (through the daemon when one answers, else written directly), so it
survives restarts and shows in ``GET /queue`` either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import APIRouter, Body, Depends, Query

from vq.protocol.answers import DrainAnswer, UndrainAnswer
from vq.protocol.report_answers import OverviewAnswer, UsageAnswer
from vq.web.api.models import DrainRequest, DrainResult
from vq.web.backend import Backend, backend_of
from vq.web.deps import need

if TYPE_CHECKING:
    from vq.web.cockpit import QueueSummary

__all__ = ["router"]

router = APIRouter(tags=["queue"])

Reader = Depends(need("read"))
Controller = Depends(need("control"))
Gate = Annotated[Backend, Depends(backend_of)]


@router.get(
    "/queue",
    summary="Queue cockpit",
    description="total, active, pending, counts per state, active CPUs and declared memory "
    "of RUNNING/SUSPENDED jobs (local_*: this host's own, which its caps bound; lanes: "
    "scheduler lane jobs, which run on a cluster), the daemon's caps (null without a "
    "daemon), whether the daemon runs, and the drain and throttle holds.",
    dependencies=[Reader],
    response_model=None,
)
def queue_summary(backend: Gate) -> QueueSummary:
    return backend.queue_summary()


@router.get(
    "/queue/overview",
    summary="Overview snapshot",
    description="The `vq overview --json` snapshot.",
    dependencies=[Reader],
    response_model=None,  # the route's JSON is the snapshot as built
)
def overview(backend: Gate) -> OverviewAnswer:
    return backend.overview()


@router.get(
    "/queue/usage",
    summary="Usage report",
    description="The `vq usage --json` report: wall- and CPU-hours per tag, name, day, "
    "state or in total.",
    dependencies=[Reader],
    response_model=None,
)
def usage(
    backend: Gate,
    by: Literal["tag", "name", "day", "state", "total"] = "tag",
    since: Annotated[str | None, Query(max_length=64)] = None,
) -> UsageAnswer:
    return backend.usage(by, since)


@router.post(
    "/queue/drain",
    response_model=DrainResult,
    summary="Drain the queue",
    description="Stop starting jobs until undrain; `full` also pauses running jobs, "
    "`reject_submits` refuses new submissions.",
    dependencies=[Controller],
)
def drain(backend: Gate, body: Annotated[DrainRequest | None, Body()] = None) -> DrainAnswer:
    request = body or DrainRequest()
    return backend.drain(request.full, request.reject_submits, request.reason)


@router.post(
    "/queue/undrain",
    response_model=DrainResult,
    summary="Undrain the queue",
    description="Start dispatching again (and resume the jobs a full drain paused).",
    dependencies=[Controller],
)
def undrain(backend: Gate) -> UndrainAnswer:
    return backend.undrain()
