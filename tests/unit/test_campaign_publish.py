"""Publishing a succeeded attempt's outputs into artifacts/ through vq.publish."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.campaign_support import raw
from vq.campaign.files import LoadedCampaign, read_campaign
from vq.campaign.journal import Attempt
from vq.campaign.publish import publish_outputs
from vq.campaign.rundir import RunDir


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedCampaign:
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(raw()))
    return read_campaign(path)


def fetched(tmp_path: Path, energy: str = "-76.02\n") -> Path:
    workspace = tmp_path / "incoming" / "calculate" / "1"
    (workspace / "out" / "deep").mkdir(parents=True)
    (workspace / "out" / "energy.txt").write_text(energy)
    (workspace / "out" / "deep" / "log.txt").write_text("scf converged\n")
    return workspace


def succeeded(loaded: LoadedCampaign) -> Attempt:
    return Attempt(node="calculate", attempt=1, state="succeeded", key="k" * 64, job_id="1" * 12)


def publish_once(loaded: LoadedCampaign, tmp_path: Path, energy: str = "-76.02\n") -> Path:
    node = loaded.campaign.node("calculate")
    assert node is not None
    run_dir = RunDir(tmp_path / "run")
    records = publish_outputs(
        loaded, run_dir, node, succeeded(loaded), fetched(tmp_path, energy), []
    )
    assert [(r.name, r.status) for r in records] == [("result", "verified")]
    return run_dir.artifact("calculate", 1, "result")


def test_a_published_output_is_complete_and_leaves_no_stage(
    loaded: LoadedCampaign, tmp_path: Path
) -> None:
    final = publish_once(loaded, tmp_path)
    assert (final / "energy.txt").read_text() == "-76.02\n"
    assert (final / "deep" / "log.txt").read_text() == "scf converged\n"
    assert sorted(os.listdir(final.parent)) == [
        "result",
        "result.manifest.json",
        "result.seal.json",
    ]
    assert not (tmp_path / "incoming" / "calculate" / "1").exists()
    # the fetched copy's files became the artifact's (linked, then the fetched names removed)
    assert os.stat(final / "energy.txt").st_nlink == 1


def test_a_verified_copy_already_in_place_is_kept(loaded: LoadedCampaign, tmp_path: Path) -> None:
    """A publish interrupted after its commit and before its journal record: the next
    pass keeps the committed copy rather than replacing it."""
    final = publish_once(loaded, tmp_path)
    inode = os.stat(final / "energy.txt").st_ino
    publish_once(loaded, tmp_path)
    assert os.stat(final / "energy.txt").st_ino == inode


def test_a_copy_in_place_that_differs_is_published_again(
    loaded: LoadedCampaign, tmp_path: Path
) -> None:
    final = publish_once(loaded, tmp_path)
    (final / "energy.txt").write_text("-99.99\n")  # tampered between passes
    (final / "extra").write_text("x")
    publish_once(loaded, tmp_path)
    assert (final / "energy.txt").read_text() == "-76.02\n"
    assert not (final / "extra").exists()
    assert sorted(os.listdir(final.parent)) == [
        "result",
        "result.manifest.json",
        "result.seal.json",
    ]
