"""Packing profiles follow ``vq daemon reload``: a profile added while the daemon runs is
accepted by ``vq submit --pack`` and its elements are packed on its ceilings, without a
restart; a changed ceiling applies to the next allocation.

Real daemon, real CLI, the testbed's Slurm 22.05 over real sshd (the lane and profile of
``test_pack_lane_slurm.py``). Needs root (the testbed); skipped without it and FAILS
under ``CI=true``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_pack_lane_slurm import (  # the lane's profile and helpers
    _all_terminal,
    _configure,
    _submit_array,
)
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(300)


def _config(vq: Vq) -> Path:
    return Path(vq.env["VQ_CONFIG_DIR"]) / "config.toml"


def _reload(vq: Vq) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(vq.run("daemon", "reload", "--json").stdout)
    return answer


def test_a_profile_added_or_changed_by_reload_packs_the_next_allocations(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,
) -> None:
    _configure(vq, slurm_testbed, remote_root)  # profile tb: 2 one-CPU tasks per allocation
    vq.start_daemon()
    refused = vq.run(
        "submit", "cluster", "--array", "0-1", "--pack", "solo", "--", "true", check=False
    )
    assert refused.returncode == 4 and "no packing profile" in refused.stderr
    assert "hint:" in refused.stderr

    text = _config(vq).read_text()
    solo = text[text.index("[packing.tb.target]") :].replace("packing.tb.", "packing.solo.")
    solo = solo.replace("max_tasks_per_allocation = 2", "max_tasks_per_allocation = 1")
    _config(vq).write_text(text + "\n" + solo)
    answer = _reload(vq)
    assert "packing.solo" in answer["applied"]

    jobs = _submit_array(vq, "0-1", "--", "true")  # --pack tb: one allocation of 2
    singles = [
        job["id"]
        for job in json.loads(
            vq.run(
                "submit", "cluster", "--json", "--array", "0-1", "--pack", "solo", "--", "true"
            ).stdout
        )["jobs"]
    ]
    specs = _all_terminal(vq, jobs + singles)
    assert [s["state"] for s in specs] == ["COMPLETED"] * 4
    packs = [s["scheduler_pack_id"] for s in specs]
    assert packs[0] == packs[1]  # tb: two per allocation
    assert len({packs[2], packs[3], packs[0]}) == 3  # solo: one per allocation

    # tb now holds one task per allocation: the next array is packed on the new ceiling
    _config(vq).write_text(
        _config(vq)
        .read_text()
        .replace("max_tasks_per_allocation = 2", "max_tasks_per_allocation = 1", 1)
    )
    assert "packing.tb" in _reload(vq)["applied"]
    later = _all_terminal(vq, _submit_array(vq, "0-1", "--", "true"))
    assert [s["state"] for s in later] == ["COMPLETED"] * 2
    assert later[0]["scheduler_pack_id"] != later[1]["scheduler_pack_id"]
