"""The per-verb ownership helper (§7.3) with real OS users and a real root daemon.

``vqteam1`` and ``vqteam2`` share a primary group, so the filesystem lets each read the
other's tree (``users/<uid>`` is ``root:<primary gid>`` 0750): only the helper stands
between ``vqteam2 --uid <vqteam1>`` and vqteam1's jobs. ``vqadm`` (the admin group) may act
on any job through the daemon; root on any from the disk.
"""

from __future__ import annotations

import json
import pwd
from collections.abc import Iterator

import pytest

from tests.conftest import processes_with_env, wait_until
from tests.multi_user_support import TERMINAL, System, make_system, needs_multi_user

pytestmark = needs_multi_user


@pytest.fixture
def system() -> Iterator[System]:
    yield from make_system(("vqa", "vqb", "vqteam1", "vqteam2"))


def _uid(user: str) -> str:
    return str(pwd.getpwnam(user).pw_uid)


def test_a_teammate_who_can_read_the_tree_is_refused_by_every_verb(system: System) -> None:
    waiting = system.submit("vqteam1", "--not-before", "1h", "--", "true")
    running = system.submit("vqteam1", "--", "sleep", "300")
    system.wait_state("vqteam1", running, "RUNNING")
    wait_until(
        lambda: (
            system.spec("vqteam1", running).get("pgid")
            and processes_with_env(f"VQ_JOB_ID={running}")
        )
    )
    team1 = _uid("vqteam1")
    # The filesystem alone would let vqteam2 read it: the shared group reads the tree.
    readable = system._run(  # the OS view, not vq's
        ["runuser", "-u", "vqteam2", "--", "cat", str(system.spec_path("vqteam1", waiting))],
        check=False,
    )
    assert readable.returncode == 0 and waiting in readable.stdout
    before = {job: system.spec_path("vqteam1", job).read_bytes() for job in (waiting, running)}
    verbs = [
        ("status", waiting),
        ("logs", waiting),
        ("events", waiting),
        ("wait", waiting, "--timeout", "1s"),
        ("kill", waiting),
        ("kill", running),
        ("pause", running),
        ("resume", running),
        ("fetch", waiting, "/tmp"),
        ("resubmit", running),
    ]
    for verb, job, *rest in verbs:
        refused = system.as_user("vqteam2", verb, job, *rest, "--uid", team1, check=False)
        shown = refused.stdout + refused.stderr
        assert refused.returncode == 15, (verb, shown)
        assert f"job {job}: permission denied" in refused.stderr, (verb, shown)
        for leak in ("PENDING", "RUNNING", "operator", "sleep"):
            assert leak not in shown, (verb, leak, shown)
        assert "Traceback" not in refused.stderr
    assert {job: system.spec_path("vqteam1", job).read_bytes() for job in before} == before
    assert processes_with_env(f"VQ_JOB_ID={running}")
    # Discovery is not gated: the teammate lists what the filesystem lets it read.
    seen = json.loads(system.as_user("vqteam2", "list", "--uid", team1, "--json").stdout)
    assert {row["id"] for row in seen["jobs"]} == {waiting, running}
    # The owner names their own tree with --uid; root and the admin group may act.
    own = system.as_user("vqteam1", "status", waiting, "--uid", team1, "--json")
    assert json.loads(own.stdout)["state"] == "PENDING"
    logs = system.admin("logs", running, "--uid", team1)
    assert logs.returncode == 0
    system.as_user("vqadm", "kill", waiting, "--uid", team1)
    assert system.state("vqteam1", waiting) == "KILLED"


def test_a_bulk_pause_reports_another_owners_jobs_as_error_rows(system: System) -> None:
    job = system.submit("vqteam1", "--tag", "sweep", "--", "sleep", "300")
    system.wait_state("vqteam1", job, "RUNNING")
    wait_until(lambda: system.spec("vqteam1", job).get("pgid"))
    swept = system.as_user(
        "vqteam2", "pause", "--all", "--uid", _uid("vqteam1"), "--json", check=False
    )
    assert swept.returncode == 15, swept.stderr
    rows = json.loads(swept.stdout)
    assert rows == [
        {
            "id": job,
            "error": {
                "code": 15,
                "reference": "permission-denied",
                "message": f"job {job}: permission denied",
                "hint": "only the job's submitter, root or the multi-user admin group may do this",
                "type": "PermissionDenied",
            },
        }
    ]
    assert system.state("vqteam1", job) == "RUNNING" and "paused_by" not in swept.stdout
    # The same sweep by the owner pauses it.
    mine = json.loads(system.as_user("vqteam1", "pause", "--all", "--json").stdout)
    assert [(row["id"], row["state"]) for row in mine] == [(job, "SUSPENDED")]
    system.as_user("vqteam1", "kill", job)
    assert system.wait_state("vqteam1", job, *TERMINAL) == "KILLED"


def test_the_admin_group_acts_only_on_the_owner_it_names(system: System) -> None:
    job = system.submit("vqa", "--not-before", "1h", "--", "true")
    other = system.submit("vqb", "--not-before", "1h", "--", "true")
    for who in ("vqadm", "root"):
        run = system.admin if who == "root" else lambda *a: system.as_user("vqadm", *a)
        listed = json.loads(run("list", "--uid", _uid("vqa"), "--json").stdout)
        assert [row["id"] for row in listed["jobs"]] == [job], who
        assert listed["counts"]["PENDING"] == 1
        assert other in run("list", "--uid", _uid("vqb")).stdout
    wrong = system.as_user("vqadm", "kill", job, "--uid", _uid("vqb"), check=False)
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr
    assert system.state("vqa", job) == "PENDING"
    system.as_user("vqadm", "kill", job, "--uid", _uid("vqa"))
    assert system.state("vqa", job) == "KILLED"


def test_listing_a_tree_the_filesystem_hides_is_a_clear_refusal(system: System) -> None:
    """vqb shares no group with vqa: ``vq list --uid <vqa>`` is refused (exit 15), never
    an internal error, and names no job of vqa's; the admin group and root list it."""
    job = system.submit("vqa", "--not-before", "1h", "--", "true")
    for args in (("list", "--uid", _uid("vqa")), ("list", "--uid", _uid("vqa"), "--json")):
        refused = system.as_user("vqb", *args, check=False)
        assert refused.returncode == 15, refused.stderr
        assert f"the jobs of uid {_uid('vqa')}: permission denied" in refused.stderr
        assert "internal error" not in refused.stderr and "Traceback" not in refused.stderr
        assert job not in refused.stdout + refused.stderr
    for run in (system.admin, lambda *a: system.as_user("vqadm", *a)):
        listed = json.loads(run("list", "--uid", _uid("vqa"), "--json").stdout)
        assert [row["id"] for row in listed["jobs"]] == [job]
