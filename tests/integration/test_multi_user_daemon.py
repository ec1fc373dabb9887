"""The multi-user root daemon end to end (§2.4, §4.9, §7.1, §7.3), with real OS users.

Root starts ``vq daemon start`` on a fresh 0755 system root with ``[multi_user] enabled``
and the collector drop; the users of ``scripts/testbed/users.sh`` run their own CLI with
``runuser`` and the world-readable testbed venv (built from Debian's /usr/bin/python3),
this checkout on ``PYTHONPATH``. Nothing is mocked: jobs really run as their owners in
their own cgroups, and the kernel really OOM-kills.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import processes_with_env, wait_until
from tests.multi_user_support import (
    SRC,
    TERMINAL,
    USER_PYTHON,
    System,
    make_system,
    needs_multi_user,
    start,
)

pytestmark = needs_multi_user


@pytest.fixture
def system() -> Iterator[System]:
    yield from make_system()


IDENTITY = (
    "id -u; id -G; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; "
    "grep -E ':(memory|pids):' /proc/self/cgroup"
)


def test_each_job_runs_exactly_as_its_owner(system: System) -> None:
    jobs = {user: system.submit(user, "--", "sh", "-c", IDENTITY) for user in ("vqa", "vqb")}
    for user, job_id in jobs.items():
        assert system.wait_state(user, job_id, *TERMINAL) == "COMPLETED", system.spec(user, job_id)
        who = pwd.getpwnam(user)
        lines = system.out(user, job_id).splitlines()
        assert lines[0] == str(who.pw_uid)
        assert sorted(map(int, lines[1].split())) == sorted(set(os.getgrouplist(user, who.pw_gid)))
        assert "CapEff:\t0000000000000000" in lines and "NoNewPrivs:\t1" in lines
        groups = [line for line in lines if ":memory:" in line or ":pids:" in line]
        assert groups and all(line.endswith(f"/vq-job-{job_id}") for line in groups)
        spec = system.spec(user, job_id)
        assert spec["submitter"] == str(who.pw_uid)
        # every write of the spec and its lock (submit, claim, end: the last two by the
        # root daemon) leaves them the owner's, in the owner's primary group
        for path in (
            system.spec_path(user, job_id),
            system.spec_path(user, job_id).with_suffix(".json.lock"),
        ):
            assert (path.stat().st_uid, path.stat().st_gid) == (who.pw_uid, who.pw_gid), path
    # vq usage --by submitter: root sees one group per owner; a user only their own.
    usage = json.loads(system.admin("usage", "--by", "submitter", "--json").stdout)
    owners = {group["key"]: group["jobs"] for group in usage["groups"]}
    assert owners == {str(pwd.getpwnam(user).pw_uid): 1 for user in jobs}
    mine = json.loads(system.as_user("vqb", "usage", "--by", "submitter", "--json").stdout)
    assert [group["key"] for group in mine["groups"]] == [str(pwd.getpwnam("vqb").pw_uid)]
    table = system.admin("usage", "--by", "submitter").stdout
    assert f"vqa ({pwd.getpwnam('vqa').pw_uid})" in table


def test_a_job_over_its_memory_limit_is_oom_killed_through_its_group(system: System) -> None:
    job = system.submit(
        "vqa", "--mem-mb", "100", "--", "/usr/bin/python3", "-c", "b = bytearray(300 << 20)"
    )
    assert system.wait_state("vqa", job, *TERMINAL) == "OOM_KILLED"
    # the daemon says how: each job's own cgroup, not a failed systemd-run probe
    status = json.loads(system.admin("daemon", "status", "--json").stdout)
    assert status["cgroup_mode"] == "job-cgroup", status
    assert "systemd-run" not in status["cgroup_reason"]


def test_other_users_learn_nothing_and_admins_read_everything(system: System) -> None:
    job = system.submit("vqa", "--not-before", "1h", "--", "true")
    for verb in ("status", "logs", "kill", "pause"):
        refused = system.as_user("vqb", verb, job, check=False)
        assert refused.returncode != 0, verb
        assert "PENDING" not in refused.stdout + refused.stderr, verb
        assert "Traceback" not in refused.stderr, verb
    assert job not in system.as_user("vqb", "list").stdout
    assert system.state("vqa", job) == "PENDING"
    # The admin group reads through the daemon's socket; writes need the admin token.
    seen = json.loads(system.as_user("vqadm", "status", job, "--json").stdout)
    assert seen["state"] == "PENDING"
    drained = system.as_user("vqadm", "daemon", "drain", check=False)
    assert drained.returncode == 15 and "admin token" in drained.stderr
    # An ordinary user cannot even connect; their own jobs are served from their tree.
    ping = system.as_user("vqa", "daemon", "ping", check=False)
    assert ping.returncode == 15 and "open to its admin group only" in ping.stderr
    assert json.loads(system.as_user("vqa", "status", job, "--json").stdout)["state"] == "PENDING"
    sock = (system.root / "daemon.sock").lstat()
    assert (sock.st_uid, sock.st_mode & 0o777) == (0, 0o660)


def test_an_owner_kills_their_own_running_job(system: System) -> None:
    job = system.submit("vqa", "--", "sleep", "300")
    system.wait_state("vqa", job, "RUNNING")
    wait_until(lambda: processes_with_env(f"VQ_JOB_ID={job}"))
    wait_until(lambda: system.spec("vqa", job).get("pgid"))  # the launch is recorded
    system.as_user("vqa", "kill", job)
    assert system.wait_state("vqa", job, *TERMINAL) == "KILLED"
    wait_until(lambda: not processes_with_env(f"VQ_JOB_ID={job}"), timeout=30)


#: As the user: write KILLED under the spec lock and ring the doorbell, sending no
#: signal, as a ``vq kill`` does whose signal the kernel refused (root's processes only).
KILL_ON_DISK_ONLY = """
import sys
from vq.cli.common import gateway
from vq.client import ring_doorbell
from vq.services.lifecycle import Lifecycle

door = gateway()
Lifecycle(door.local_context()).kill(sys.argv[1], "killed by operator")
ring_doorbell(door.paths.doorbell)
"""


def test_the_daemon_finishes_a_kill_its_owner_could_not_signal(system: System) -> None:
    job = system.submit("vqa", "--", "sleep", "300")
    system.wait_state("vqa", job, "RUNNING")
    wait_until(lambda: processes_with_env(f"VQ_JOB_ID={job}"))
    wait_until(lambda: system.spec("vqa", job).get("pgid"))
    argv = ["runuser", "-u", "vqa", "--", "env", f"PYTHONPATH={SRC}", "HOME=/tmp"]
    argv += [f"{k}={v}" for k, v in system.env.items() if k.startswith("VQ_")]
    wrote = subprocess.run(
        [*argv, USER_PYTHON, "-c", KILL_ON_DISK_ONLY, job],
        env=system.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrote.returncode == 0, wrote.stderr
    assert system.state("vqa", job) == "KILLED"
    wait_until(lambda: not processes_with_env(f"VQ_JOB_ID={job}"), timeout=30)


def test_a_pause_the_owner_could_not_signal_leaves_the_job_running_on_disk(
    system: System,
) -> None:
    """Held before the drop, the job's group holds only root's processes: the owner's
    SIGSTOP is refused, so the pause is undone and the spec never says SUSPENDED."""
    holds = system.base / "holds"
    holds.mkdir()
    system.admin("daemon", "stop")
    system.env["VQ_TEST_HOLD"] = f"privdrop-before-setresuid:{holds}"
    try:
        start(system)
        job = system.submit("vqa", "--", "sleep", "300")
        wait_until(lambda: (holds / "privdrop-before-setresuid.held").exists(), timeout=30)
        wait_until(lambda: system.spec("vqa", job).get("pgid"))
        refused = json.loads(system.as_user("vqa", "pause", job, "--json").stdout)
        assert refused == [{"id": job, "state": "RUNNING", "changed": False, "signaled": False}]
        spec = system.spec("vqa", job)
        assert spec["state"] == "RUNNING" and spec.get("paused_by") is None
        said = system.as_user("vqa", "pause", job).stdout
        assert "not paused: it could not be signalled yet" in said
        (holds / "privdrop-before-setresuid.go").touch()
        wait_until(lambda: processes_with_env(f"VQ_JOB_ID={job}"))
        paused = wait_until(
            lambda: (
                (rows := json.loads(system.as_user("vqa", "pause", job, "--json").stdout))[0][
                    "state"
                ]
                == "SUSPENDED"
                and rows
            ),
            timeout=30,
        )
        assert paused[0]["signaled"] is True
        assert system.state("vqa", job) == "SUSPENDED"
        system.as_user("vqa", "kill", job)
        assert system.wait_state("vqa", job, *TERMINAL) == "KILLED"
    finally:
        (holds / "privdrop-before-setresuid.go").touch()
        del system.env["VQ_TEST_HOLD"]


def test_an_unprovisioned_user_is_told_the_admin_command(system: System) -> None:
    refused = system.as_user("vqadm", "submit", "--", "true", check=False)
    assert refused.returncode == 15
    assert "hint: ask an administrator to run `vq admin user add vqadm`" in refused.stderr
    root = system.admin("submit", "--", "true", check=False)
    assert root.returncode == 15 and "runs no job as root" in root.stderr


def _quarantined(system: System) -> dict[str, str]:
    listing = json.loads(system.admin("list", "--json").stdout)
    return {item["name"]: item["reason"] for item in listing.get("quarantined", [])}


def test_tampered_specs_are_quarantined_and_never_steer_root(system: System) -> None:
    vqa, vqb = pwd.getpwnam("vqa"), pwd.getpwnam("vqb")
    canary = system.base / "canary"
    canary.write_text("root's\n")
    canary.chmod(0o600)
    # 1. a spec whose submitter names another user
    forged = system.submit("vqa", "--not-before", "1h", "--", "touch", "forged-ran")
    spec = system.spec("vqa", forged)
    spec.update(submitter=str(vqb.pw_uid), not_before=None)
    _replace_as(system.spec_path("vqa", forged), spec, vqa)
    # 2. an id copied into another owner's tree: only the copy is quarantined
    copied = system.submit("vqa", "--not-before", "1h", "--", "true")
    twin = system.spec("vqa", copied)
    twin["submitter"] = str(vqb.pw_uid)
    _replace_as(system.spec_path("vqb", copied), twin, vqb)
    # 3. stdout.log planted as a symlink to a root-owned file
    planted = system.submit("vqa", "--not-before", "3s", "--", "echo", "borrowed root")
    log = system.tree("vqa") / "jobs" / planted / "stdout.log"
    log.symlink_to(canary)
    os.lchown(log, vqa.pw_uid, vqa.pw_gid)

    reasons = wait_until(
        lambda: (found := _quarantined(system)).keys() >= {forged, copied} and found, timeout=20
    )
    assert f"submitter '{vqb.pw_uid}' is not its owner directory's uid" in reasons[forged]
    assert f"belongs to uid {vqa.pw_uid}" in reasons[copied]
    assert system.wait_state("vqa", planted, *TERMINAL, timeout=30) == "FAILED"
    assert "launch failed" in system.spec("vqa", planted)["failure_reason"]
    assert canary.read_text() == "root's\n" and canary.stat().st_uid == 0
    # The recorded owner keeps the job: a bare lookup through the daemon is its copy.
    owned = json.loads(system.admin("status", copied, "--json").stdout)
    assert owned["submitter"] == str(vqa.pw_uid) and owned["state"] == "PENDING"
    # --uid reads one owner's copy: through the daemon (an admin) and from the disk (root).
    mine = json.loads(system.admin("status", copied, "--uid", str(vqa.pw_uid), "--json").stdout)
    assert mine["id"] == copied and mine["submitter"] == str(vqa.pw_uid)
    seen = system.as_user("vqadm", "status", copied, "--uid", str(vqa.pw_uid), "--json")
    assert json.loads(seen.stdout)["state"] == "PENDING"
    theirs = system.admin("status", copied, "--uid", str(vqb.pw_uid), "--json").stdout
    assert json.loads(theirs)["submitter"] == str(vqb.pw_uid)
    assert not (system.tree("vqa") / "jobs" / forged / "forged-ran").exists()
    assert system.spec("vqa", forged)["state"] == "PENDING"  # quarantined, never changed


def _replace_as(path: Path, spec: dict[str, Any], who: pwd.struct_passwd) -> None:
    """Rewrite a spec as its tree's user would (a new file renamed into place)."""
    temp = path.with_name(f".{path.name}.edit")
    temp.write_text(json.dumps(spec))
    os.chown(temp, who.pw_uid, who.pw_gid)
    temp.rename(path)


def _quota_reason(system: System, job: str, who: str = "vqadm") -> str | None:
    """``who``'s view of a waiting job's reason (the admin's through the daemon, the
    owner's from their own tree), once it names a quota."""
    answer = system.as_user(who, "status", job, "--json", check=False)
    if answer.returncode != 0:
        return None
    reason = json.loads(answer.stdout).get("pending_reason")
    return reason if isinstance(reason, str) and reason.startswith("quota:") else None


def test_a_quota_caps_one_owner_while_others_run(system: System) -> None:
    """vqa may hold 2 CPUs: of four 1-CPU jobs never more than two run, across a restart,
    while vqb's jobs run beside them; a waiting job says why. Every job waits for a gate
    file, so nothing ends while the quota is checked, however loaded the machine is."""
    gate = system.base / "gate"
    script = f"while [ ! -e {gate} ]; do sleep 0.1; done; sleep 0.5"
    mine = [system.submit("vqa", "--", "sh", "-c", script) for _ in range(4)]
    theirs = [system.submit("vqb", "--", "sh", "-c", script) for _ in range(2)]
    peak = 0

    def vqa_states() -> list[str]:
        nonlocal peak
        states = [system.state("vqa", j) for j in mine]
        peak = max(peak, states.count("RUNNING"))
        return states

    def held() -> bool:  # two of vqa's run, two wait; both of vqb's run beside them
        states = vqa_states()
        return (states.count("RUNNING"), states.count("PENDING")) == (2, 2) and all(
            system.state("vqb", j) == "RUNNING" for j in theirs
        )

    wait_until(held, timeout=60)
    waiting = mine[vqa_states().index("PENDING")]
    reason = wait_until(lambda: _quota_reason(system, waiting), timeout=20)
    assert reason.startswith("quota: max_concurrent_cpus (2/2)"), reason
    own = wait_until(lambda: _quota_reason(system, waiting, "vqa"), timeout=20)
    assert own.startswith("quota: max_concurrent_cpus (2/2)"), own
    overview = json.loads(system.admin("overview", "--json").stdout)
    vqa_use = next(o for o in overview["owners"] if o["uid"] == pwd.getpwnam("vqa").pw_uid)
    assert (vqa_use["cpus"], vqa_use["max_concurrent_cpus"]) == (2, 2), overview
    shown = system.admin("overview").stdout
    assert f"owner vqa ({pwd.getpwnam('vqa').pw_uid}): " in shown and "/2 cpus" in shown

    system.admin("daemon", "stop")
    start(system)
    wait_until(held, timeout=60)  # the restarted daemon keeps the quota

    gate.touch()
    everyone = [("vqa", j) for j in mine] + [("vqb", j) for j in theirs]

    def finished() -> bool:
        vqa_states()
        return all(system.state(user, j) in TERMINAL for user, j in everyone)

    wait_until(finished, timeout=90, interval=0.1)
    assert peak == 2
    assert [system.state(user, j) for user, j in everyone] == ["COMPLETED"] * 6


def test_a_job_over_its_owners_cpu_quota_says_it_can_never_fit(system: System) -> None:
    """vqa may hold 2 CPUs: a 3-CPU job can never start under that quota. Like a job over a
    configured cap it is accepted with a warning and stays PENDING, and every view of it
    says it can never fit (never ``quota: max_concurrent_cpus (0/2)``, which reads as a
    wait), while vqa's other jobs run past it."""
    # one through the owner's submit socket, one written by the user's CLI (a keyed submit)
    sent = system.as_user("vqa", "submit", "--cpus", "3", "--", "true")
    written = system.as_user(
        "vqa", "submit", "--cpus", "3", "--idempotency-key", "big-1", "--", "true"
    )
    never = "can never start under this quota"
    for answer in (sent, written):
        assert "exceeds your max_concurrent_cpus quota 2" in answer.stderr, answer.stderr
        assert never in answer.stderr
    big = [sent.stdout.strip(), written.stdout.strip()]
    small = system.submit("vqa", "--", "true")
    assert system.wait_state("vqa", small, *TERMINAL) == "COMPLETED"
    for job in big:
        assert system.state("vqa", job) == "PENDING"
        for who in ("vqa", "vqadm"):  # the owner from the disk, the admin group via the daemon
            view = json.loads(system.as_user(who, "status", job, "--json").stdout)
            assert view["pending_reason"].startswith("quota: over max_concurrent_cpus"), view
            assert (
                never in view["pending_reason"] and "(cpus 3 > quota 2)" in view["pending_reason"]
            )
            assert view["queue_eta"]["eta_seconds"] is None, (who, view["queue_eta"])
            assert view["queue_eta"]["basis"] == "over its owner's quota", (who, view)
        text = " ".join(system.as_user("vqa", "status", job).stdout.split())  # unwrapped
        assert never in text and "unavailable (over its owner's quota)" in text, text


def test_a_user_deleted_after_submit_fails_closed(system: System) -> None:
    """The drop cannot resolve the owner: FAILED, the command never ran (no ledger)."""
    name = "vqgone"
    subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], check=True, timeout=60)
    try:
        system.admin("admin", "user", "add", name)
        job = system.submit(name, "--not-before", "2s", "--", "touch", "ledger")
        subprocess.run(["userdel", name], check=True, timeout=60)
        tree = next((system.root / "users").glob(f"*/queue/{job}.json")).parent.parent
        spec = wait_until(
            lambda: (
                (data := json.loads((tree / "queue" / f"{job}.json").read_text()))["state"]
                in TERMINAL
                and data
            ),
            timeout=30,
        )
        assert spec["state"] == "FAILED"
        assert "launch failed" in spec["failure_reason"] and "passwd" in spec["failure_reason"]
        receipt = json.loads((tree / "jobs" / job / "_vq" / "resource-usage.json").read_text())
        assert receipt["command_status"] == "not_run"
        assert not (tree / "jobs" / job / "ledger").exists()
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=60)
