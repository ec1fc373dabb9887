"""Campaign pages of the fleet console: ``/fleet/campaigns`` and
``/fleet/campaigns/{campaign_id}`` (+ a fragment the page refreshes while it runs).

Contracts:

* Read-only, behind the same read guard as every fleet page
  (:func:`vq.web.fleet.pages.guarded`).
* The data is :mod:`vq.campaign.view`: the campaigns ``vq campaign run``
  registered on this console's state root, evaluated with the same checks and planner as
  ``vq campaign status``. A campaign that cannot be read is a row with its reason.
* A campaign's page checks its published artifacts again, as ``vq campaign status`` does
  (:mod:`vq.campaign.published`): an output the journal calls verified is shown
  ``tampered`` or ``missing`` when its copy no longer is, with a "Needs attention" line.
* The graph is server-rendered SVG: node boxes with status badges, success edges solid,
  completion edges dashed. Each node links its latest job: ``/fleet/jobs/HOST/ID`` on a
  configured host, ``/jobs/ID`` on this queue (a scheduler lane's jobs are this queue's).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from fastapi import APIRouter, Request
from fastapi.responses import Response

from vq.campaign.journal import Attempt
from vq.campaign.layout import BOX_H, BOX_W, GraphLayout
from vq.campaign.published import PublishedCopy, check_published
from vq.campaign.rundir import RunDir
from vq.campaign.view import CampaignSummary, CampaignView, campaign_view, registered
from vq.web.deps import web_config
from vq.web.fleet.api import source_of
from vq.web.fleet.pages import guarded
from vq.web.pages import routes as single
from vq.web.pages.render import render, render_error

__all__ = ["router"]

router = APIRouter(prefix="/fleet", include_in_schema=False)


class ListContext(TypedDict):
    """``/fleet/campaigns``."""

    nav: str
    campaigns: list[CampaignSummary]


class OutputShown(TypedDict):
    name: str
    status: str


class NodeShown(TypedDict):
    """One node box of the campaign graph."""

    id: str
    kind: str
    host: str
    status: str
    reasons: list[str]
    next: str | None
    attempt: Attempt | None
    outputs: list[OutputShown]
    job_link: str | None
    x: int
    y: int


class DetailContext(TypedDict):
    """``/fleet/campaigns/{id}``."""

    nav: str
    view: CampaignView
    nodes: list[NodeShown]
    graph: GraphLayout | None
    box_w: int
    box_h: int
    ran: list[Attempt]


def _list_context(request: Request) -> ListContext:
    entries = registered(web_config(request).state)
    return {"nav": "fleet", "campaigns": [campaign_view(e).summary() for e in entries]}


@router.get("/campaigns")
def campaigns_page(request: Request) -> Response:
    return guarded(
        request, lambda: single.page(request, "fleet/campaigns.html", _list_context(request))
    )


def _job_link(host: str | None, job_id: str | None, remote: set[str]) -> str | None:
    if not job_id:
        return None
    if host in remote:
        return f"/fleet/jobs/{host}/{job_id}"
    return f"/jobs/{job_id}"


def _detail_context(request: Request, campaign_id: str) -> DetailContext | None:
    entry = next(
        (e for e in registered(web_config(request).state) if e["campaign_id"] == campaign_id),
        None,
    )
    if entry is None:
        return None
    view: CampaignView = campaign_view(entry)
    remote = set(source_of(request).names())
    nodes: list[NodeShown] = []
    graph = view.graph()
    copies: dict[tuple[str, int, str], PublishedCopy] = {}
    if view.plan is not None and view.loaded is not None and view.journal is not None:
        checked = check_published(view.loaded, RunDir(Path(view.run_dir)), view.journal, view.plan)
        copies = {(c.node, c.attempt, c.output): c for c in checked}
        view.attention = [*view.attention, *(c.attention() for c in checked if not c.as_verified)]
    if view.plan is not None and view.loaded is not None and graph is not None:
        placed = {item.node: item for item in graph.nodes}
        for node_plan in view.plan.nodes:
            node = view.loaded.campaign.node(node_plan.node)
            latest = node_plan.attempt
            outputs = [] if latest is None else _outputs(latest, copies)
            nodes.append(
                {
                    "id": node_plan.node,
                    "kind": node.kind if node else "",
                    "host": (node.host if node else None) or "localhost",
                    "status": node_plan.status,
                    "reasons": node_plan.reasons,
                    "next": node_plan.action["action"] if node_plan.action else None,
                    "attempt": latest,
                    "outputs": outputs,
                    "job_link": _job_link(
                        latest.host if latest else None, latest.job_id if latest else None, remote
                    ),
                    "x": placed[node_plan.node].x,
                    "y": placed[node_plan.node].y,
                }
            )
    ran = [a for a in view.journal.attempts if a.runtime] if view.journal else []
    return {
        "nav": "fleet",
        "view": view,
        "nodes": nodes,
        "graph": graph,
        "box_w": BOX_W,
        "box_h": BOX_H,
        "ran": ran,
    }


def _outputs(
    attempt: Attempt, copies: dict[tuple[str, int, str], PublishedCopy]
) -> list[OutputShown]:
    """Each output of ``attempt`` with its status: the journal's, unless the copy the
    journal calls verified was checked and is not (tampered, missing, cleaned up)."""
    shown: list[OutputShown] = []
    for record in attempt.outputs:
        copy = copies.get((attempt.node, attempt.attempt, record.name))
        status = copy.status if copy is not None else record.status
        shown.append({"name": record.name, "status": status})
    return shown


@router.get("/campaigns/{campaign_id}")
def campaign_page(request: Request, campaign_id: str) -> Response:
    def build() -> Response:
        context = _detail_context(request, campaign_id)
        if context is None:
            return render_error(request, 404, f"no campaign {campaign_id!r} is registered here")
        return single.page(request, "fleet/campaign.html", context)

    return guarded(request, build)


@router.get("/fragments/campaigns/{campaign_id}")
def campaign_fragment(request: Request, campaign_id: str) -> Response:
    def build() -> Response:
        context = _detail_context(request, campaign_id)
        if context is None:
            return render_error(request, 404, f"no campaign {campaign_id!r} is registered here")
        return render(request, "fleet/_campaign.html", context)

    return guarded(request, build)
