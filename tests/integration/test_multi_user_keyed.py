"""Keyed submits and campaigns of a user of the multi-user root daemon (issue 28, finding 5).

A keyed submit keeps its claim in ``users/<uid>/idempotency`` and a campaign registers its
run directory in ``users/<uid>/campaigns``; the user's CLI cannot create either inside the
root-owned ``users/<uid>``, so ``vq admin user add`` provisions them (and a daemon start
repairs a tree provisioned before). Real users, a real root daemon, real CLIs.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
from collections.abc import Iterator

import pytest

from tests.multi_user_support import TERMINAL, System, make_system, needs_multi_user, start

pytestmark = needs_multi_user


@pytest.fixture
def system() -> Iterator[System]:
    yield from make_system()


def test_keyed_submits_and_campaigns_work_for_a_provisioned_user(system: System) -> None:
    vqa = pwd.getpwnam("vqa")
    for name in ("idempotency", "campaigns"):
        info = (system.tree("vqa") / name).lstat()
        assert stat.S_ISDIR(info.st_mode), name
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (
            vqa.pw_uid,
            vqa.pw_gid,
            0o750,
        ), name

    first = system.as_user("vqa", "submit", "--idempotency-key", "k-1", "--", "true", check=False)
    assert first.returncode == 0, first.stderr
    job = first.stdout.strip()
    again = system.as_user("vqa", "submit", "--idempotency-key", "k-1", "--", "true")
    assert again.stdout.strip() == job  # the same key repeats the same job
    other = system.as_user("vqa", "submit", "--idempotency-key", "k-1", "--", "false", check=False)
    assert other.returncode != 0 and "different submission" in other.stderr
    assert "internal error" not in other.stderr
    assert system.wait_state("vqa", job, *TERMINAL) == "COMPLETED"

    run = system.base / "campaign"
    run.mkdir(mode=0o777)
    run.chmod(0o777)
    campaign = run / "campaign.json"
    campaign.write_text(
        json.dumps(
            {
                "schema_name": "vq.campaign/1",
                "campaign_id": "mu-keyed",
                "nodes": [{"id": "only", "kind": "other", "command": ["true"], "cpus": 1}],
            }
        )
    )
    campaign.chmod(0o644)
    ran = system.as_user(
        "vqa", "campaign", "run", str(campaign), str(run / "run"), "--interval", "1", check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert "succeeded" in ran.stdout
    registry = json.loads((system.tree("vqa") / "campaigns" / "campaigns.json").read_text())
    assert [entry["campaign_id"] for entry in registry["campaigns"]] == ["mu-keyed"]


def test_a_tree_provisioned_before_gets_its_directories_and_never_an_internal_error(
    system: System,
) -> None:
    system.admin("daemon", "stop")
    for name in ("idempotency", "campaigns"):
        shutil.rmtree(system.tree("vqb") / name, ignore_errors=True)  # absent before the fix
    # Without them a keyed submit is refused with the command that provisions them.
    refused = system.as_user("vqb", "submit", "--idempotency-key", "k-2", "--", "true", check=False)
    assert refused.returncode == 15, refused.stderr
    assert "internal error" not in refused.stderr and "Traceback" not in refused.stderr
    assert "vq admin user add" in refused.stderr
    assert not list((system.tree("vqb") / "queue").glob("*.json"))
    # A daemon start repairs the tree like `vq admin user add` does.
    start(system)
    assert os.path.isdir(system.tree("vqb") / "idempotency")
    assert os.path.isdir(system.tree("vqb") / "campaigns")
    job = system.as_user("vqb", "submit", "--idempotency-key", "k-2", "--", "true").stdout.strip()
    assert system.wait_state("vqb", job, *TERMINAL) == "COMPLETED"
