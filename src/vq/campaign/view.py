"""The campaigns registered on a state root, evaluated as ``vq campaign status`` does.

The console (``/fleet/campaigns``) reads only this: the registry
``campaigns.json`` of a state (:mod:`vq.campaign.run`), each run directory's
campaign file and journal, and the same checks and planner as the CLI. Nothing here
writes. A registered campaign that can no longer be read (its file moved or was edited,
its journal refused) is a row with the reason, never an error of the whole page; the
last registration of a campaign id wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from vq.campaign.files import LoadedCampaign, read_campaign, read_json_file
from vq.campaign.journal import Journal
from vq.campaign.layout import GraphLayout, layout
from vq.campaign.planner import CampaignPlan, attention, plan
from vq.campaign.rundir import RunDir, load_journal
from vq.errors import VqError
from vq.paths import StateLayout

__all__ = ["CampaignView", "campaign_view", "registered", "registered_views"]


class CampaignSummary(TypedDict):
    """One registered campaign as the fleet's campaign list shows it."""

    campaign_id: str
    status: str
    run_dir: str
    registered_at: str
    nodes: dict[str, int]
    error: str | None


@dataclass
class CampaignView:
    """One registered run directory and, when readable, its evaluated state."""

    campaign_id: str
    run_dir: str
    campaign_file: str
    registered_at: str
    loaded: LoadedCampaign | None = None
    journal: Journal | None = None
    plan: CampaignPlan | None = None
    error: str | None = None
    attention: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "unreadable" if self.plan is None else self.plan.status

    def graph(self) -> GraphLayout | None:
        return None if self.loaded is None else layout(self.loaded.campaign)

    def summary(self) -> CampaignSummary:
        counts: dict[str, int] = {}
        for node in self.plan.nodes if self.plan else []:
            counts[node.status] = counts.get(node.status, 0) + 1
        return {
            "campaign_id": self.campaign_id,
            "status": self.status,
            "run_dir": self.run_dir,
            "registered_at": self.registered_at,
            "nodes": counts,
            "error": self.error,
        }


def registered(state: StateLayout) -> list[dict[str, str]]:
    """The registry's entries, the last one per campaign id, sorted by id."""
    try:
        data = read_json_file(state.campaigns_registry, "campaign registry")
    except VqError:
        return []
    rows = data.get("campaigns") if isinstance(data, dict) else None
    latest: dict[str, dict[str, str]] = {}
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("campaign_id"), str):
            latest[row["campaign_id"]] = {k: str(v) for k, v in row.items()}
    return [latest[key] for key in sorted(latest)]


def campaign_view(entry: dict[str, str]) -> CampaignView:
    """Evaluate one registry entry (a reason in ``error`` when it cannot be read)."""
    view = CampaignView(
        campaign_id=entry.get("campaign_id", ""),
        run_dir=entry.get("run_dir", ""),
        campaign_file=entry.get("campaign_file", ""),
        registered_at=entry.get("registered_at", ""),
    )
    try:
        loaded = read_campaign(Path(view.campaign_file))
        if loaded.digest != entry.get("campaign_sha256"):
            view.error = (
                f"{view.campaign_file} changed since the run was registered "
                f"(digest {loaded.digest[:12]}, registered {entry.get('campaign_sha256', '')[:12]})"
            )
            return view
        journal = load_journal(RunDir(Path(view.run_dir)), loaded)
    except VqError as exc:
        view.error = exc.message
        return view
    view.loaded, view.journal = loaded, journal
    view.plan = plan(loaded.campaign, loaded.digest, journal)
    view.attention = attention(view.plan)
    return view


def registered_views(state: StateLayout) -> list[CampaignView]:
    return [campaign_view(entry) for entry in registered(state)]
