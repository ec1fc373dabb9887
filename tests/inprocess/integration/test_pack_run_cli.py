"""``vq pack`` Slurm verbs refusing bad input before any contact with a cluster.

Each refusal is the real CLI on a temp state root: a ``vq: error:`` line, a ``hint:``
line, its documented exit code, no traceback, and ``pack.json`` unchanged. The verbs
against a real Slurm are in tests/system/test_pack_cli_slurm.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Vq
from tests.inprocess.integration.test_pack_cli import _configure, _tasks


@pytest.fixture
def planned(vq: Vq, tmp_path: Path) -> Path:
    _configure(vq)
    vq.run("pack", "open", "sweep", str(_tasks(tmp_path, ["t0", "t1"])))
    plan = tmp_path / "plan.json"
    vq.run("pack", "plan", "sweep", "--output", str(plan))
    return plan


def _refused(vq: Vq, code: int, *args: str) -> str:
    before = (vq.root / "packs" / "sweep" / "pack.json").read_bytes()
    proc = vq.run(*args, check=False)
    assert proc.returncode == code, (args, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("vq: error: ") and "\nhint: " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (vq.root / "packs" / "sweep" / "pack.json").read_bytes() == before
    return proc.stderr


def test_a_target_that_is_not_a_slurm_lane(vq: Vq, planned: Path) -> None:
    for verb in ("validate", "submit"):
        err = _refused(vq, 9, "pack", verb, "sweep", str(planned))
        assert "'cluster-a' is not a configured Slurm lane" in err
        assert "[hosts.cluster-a]" in err


def test_plan_and_allocation_refusals(vq: Vq, tmp_path: Path, planned: Path) -> None:
    vq.run("pack", "open", "other", str(_tasks(tmp_path, ["x"], name="other.jsonl")))
    err = _refused(vq, 4, "pack", "submit", "other", str(planned))
    assert "plan of pack 'sweep'" in err
    _refused(vq, 3, "pack", "submit", "sweep", str(tmp_path / "missing.json"))
    edited = tmp_path / "edited.json"
    edited.write_text(planned.read_text().replace('"cpus": 2', '"cpus": 1', 1))
    _refused(vq, 4, "pack", "submit", "sweep", str(edited))
    alloc = json.loads(planned.read_text())["allocations"][0]["allocation_id"]
    _refused(vq, 3, "pack", "reconcile", "sweep", alloc)
    _refused(vq, 3, "pack", "log", "sweep", alloc)
    _refused(vq, 4, "pack", "resolve", "sweep", alloc)  # neither --job-id nor --not-submitted
    _refused(vq, 4, "pack", "resolve", "sweep", alloc, "--job-id", "12x")
    _refused(vq, 4, "pack", "log", "sweep", alloc, "--bytes", "1048577")
    _refused(vq, 3, "pack", "inspect", "nosuch")


def test_inspect_without_accepted_attempts_contacts_no_host(vq: Vq, planned: Path) -> None:
    # the profile's host is not configured at all: any contact would exit 9
    view = vq.json("pack", "inspect", "sweep")
    assert view["attempts"] == [] and view["quiescent"] is True
    assert [t["state"] for t in view["tasks"]] == [None, None]
