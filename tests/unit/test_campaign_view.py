"""The registered campaigns as the console reads them (registry, campaign file, journal)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.campaign_support import raw
from vq.campaign.files import read_campaign
from vq.campaign.run import register
from vq.campaign.rundir import RunDir
from vq.campaign.view import registered_views
from vq.paths import StateLayout


def test_a_registered_campaign_is_evaluated_and_an_edited_one_is_a_row_saying_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(raw()))
    state = StateLayout(tmp_path / "state")
    register(state, RunDir(tmp_path / "run"), read_campaign(path), "2026-12-03T00:00:00+00:00")
    [view] = registered_views(state)
    assert (view.campaign_id, view.status, view.error) == ("h2o-pipeline", "running", None)
    assert view.summary()["nodes"] == {"ready": 1, "waiting": 3}
    edited = raw()
    edited["nodes"][0]["cpus"] = 4
    path.write_text(json.dumps(edited))
    [changed] = registered_views(state)
    assert changed.status == "unreadable" and "changed since the run was registered" in str(
        changed.error
    )
    path.unlink()
    [gone] = registered_views(state)
    assert gone.status == "unreadable" and gone.error


def test_no_registry_is_no_campaigns(tmp_path: Path) -> None:
    assert registered_views(StateLayout(tmp_path / "nowhere")) == []
