"""Ordinary remote daemon hosts over real SSH (§2.2): delegation and remote verbs.

Three namespace hosts of the testbed each run a real vq daemon (started over SSH by the
module fixture); every verb runs through the real ``vq`` CLI in a subprocess.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.system.remote_fleet import (
    HOSTS,
    MEASURED_SSH_TIMEOUT,
    RemoteFleet,
    slow_uplink,
    wait_until,
)
from tests.testbed import SshTestbed, testbed  # noqa: F401 - the fixture

#: every test starts from the fleet's own config (tests/system/conftest.py)
pytestmark = pytest.mark.usefixtures("fresh_fleet_config")


def _state(fleet: RemoteFleet, host: str, job_id: str) -> str:
    done = fleet.vq("status", host, job_id, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["state"])


@pytest.mark.parametrize("host", HOSTS)
def test_submit_status_wait_logs_on_each_host(
    fleet: RemoteFleet, host: str, tmp_path: Path
) -> None:
    source = tmp_path / "inputs"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "data.txt").write_bytes(b"payload \xff bytes\n")
    job_id = fleet.submit(
        host,
        str(source),
        "--job-name",
        f"t-{host}",
        "--",
        "sh",
        "-c",
        "cat sub/data.txt; echo to-stderr >&2; exit 7",
    )
    assert len(job_id) == 12 and int(job_id, 16) >= 0
    # the remote queue owns the job: its spec and workspace exist there, not here
    assert fleet.remote_spec(host, job_id)["id"] == job_id
    assert not (fleet.local / "queue" / f"{job_id}.json").exists()
    waited = fleet.vq("wait", host, job_id)
    assert waited.returncode == 7, waited.stderr
    assert _state(fleet, host, job_id) == "FAILED"
    logs = fleet.vq("logs", host, job_id)
    assert logs.returncode == 0
    assert logs.stdout.encode(errors="surrogateescape") == b"payload \xff bytes\n"
    assert fleet.remote_log(host, job_id) == b"payload \xff bytes\n"
    err = fleet.vq("logs", host, job_id, "--stderr", "--tail", "1")
    assert err.stdout == "to-stderr\n"
    # -f with --tail: the start offset is asked for first, then followed to the end
    followed = fleet.vq("logs", host, job_id, "--stderr", "-f", "--tail", "1")
    assert followed.returncode == 0 and followed.stdout == "to-stderr\n", followed.stderr
    events = fleet.vq("events", host, job_id, "--json")
    assert events.returncode == 0
    assert any(str(e.get("to", "")).upper() == "FAILED" for e in json.loads(events.stdout))
    assert fleet.health(host)["status"] == "ok"


@pytest.mark.parametrize("host", HOSTS)
def test_follow_pause_resume_kill_and_fetch_on_each_host(
    fleet: RemoteFleet, host: str, tmp_path: Path
) -> None:
    script = "i=0; while [ $i -lt 20 ]; do echo row-$i; i=$((i+1)); sleep 0.1; done; echo x > out"
    follow_id = fleet.submit(host, "--", "sh", "-c", script)
    follower = fleet.popen("logs", host, follow_id, "-f")
    sleeper = fleet.submit(host, "--", "sleep", "120")
    out, err = follower.communicate(timeout=90)
    assert follower.returncode == 0, err
    assert (
        out
        == fleet.remote_log(host, follow_id)
        == b"".join(f"row-{i}\n".encode() for i in range(20))
    )
    wait_until(lambda: _state(fleet, host, sleeper) == "RUNNING", 30)
    assert fleet.vq("pause", host, sleeper).returncode == 0
    assert _state(fleet, host, sleeper) == "SUSPENDED"
    assert fleet.vq("resume", host, sleeper).returncode == 0
    assert _state(fleet, host, sleeper) == "RUNNING"
    assert fleet.vq("kill", host, sleeper).returncode == 0
    wait_until(lambda: _state(fleet, host, sleeper) == "KILLED", 30)
    wait_until(lambda: _state(fleet, host, follow_id) == "COMPLETED", 30)
    dest = tmp_path / "fetched"
    done = fleet.vq("fetch", host, follow_id, str(dest))
    assert done.returncode == 0, done.stderr
    workspace = fleet.remote_state(host) / "jobs" / follow_id
    files = {p.relative_to(workspace) for p in workspace.rglob("*") if p.is_file()}
    assert Path("out") in files and Path("stdout.log") in files
    for relative in files - {Path("_vq/fetch-manifest.json")}:
        assert (dest / relative).read_bytes() == (workspace / relative).read_bytes(), relative
    assert fleet.health(host)["status"] == "ok"


def test_unknown_id_on_a_host_is_the_remote_not_found(fleet: RemoteFleet) -> None:
    done = fleet.vq("status", "h1", "0123456789ab")
    assert done.returncode == 3
    assert "vq: error:" in done.stderr and "Traceback" not in done.stderr


def test_short_ids_are_resolved_by_the_remote_queue(fleet: RemoteFleet) -> None:
    job_id = fleet.submit("h1", "--", "sh", "-c", "echo short; exit 5")
    assert fleet.vq("wait", "h1", job_id[:6]).returncode == 5
    status = fleet.vq("status", "h1", job_id[:5], "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["id"] == job_id
    assert fleet.vq("logs", "h1", job_id[:7]).stdout == "short\n"


def test_pause_resume_kill(fleet: RemoteFleet) -> None:
    job_id = fleet.submit("h1", "--", "sleep", "120")
    wait_until(lambda: _state(fleet, "h1", job_id) == "RUNNING", 30)
    assert fleet.vq("pause", "h1", job_id).returncode == 0
    assert _state(fleet, "h1", job_id) == "SUSPENDED"
    assert fleet.vq("resume", "h1", job_id).returncode == 0
    assert _state(fleet, "h1", job_id) == "RUNNING"
    assert fleet.vq("kill", "h1", job_id).returncode == 0
    wait_until(lambda: _state(fleet, "h1", job_id) == "KILLED", 30)
    again = fleet.vq("kill", "h1", job_id)
    assert again.returncode == 0 and "already KILLED" in again.stdout


def test_a_kill_whose_answer_is_lost_is_an_unknown_outcome_never_resent(
    fleet: RemoteFleet,
) -> None:
    import shlex

    job_id = fleet.submit("h2", "--", "sleep", "120")
    wait_until(lambda: _state(fleet, "h2", job_id) == "RUNNING", 30)
    # the host acts, then its answer never arrives within ssh_timeout
    real = shlex.join(fleet.vq_command("h2"))
    kills = Path(f"{fleet.remote_state('h2')}-kills.log")  # written as the host's user
    late = f'{real} "$@" >> {shlex.quote(str(kills))}; sleep 30'
    fleet.write_config(
        h2={"vq_command": ["sh", "-c", late, "sh"], "ssh_timeout": MEASURED_SSH_TIMEOUT}
    )
    done = fleet.vq("kill", "h2", job_id)
    assert done.returncode == 12, done.stderr
    assert "may or may not have taken effect" in done.stderr and "Traceback" not in done.stderr
    assert f"vq status h2 {job_id}" in done.stderr
    assert fleet.health("h2")["status"] == "unreachable"  # the host is marked, not the job
    fleet.write_config()
    wait_until(lambda: _state(fleet, "h2", job_id) == "KILLED", 30)
    # sent exactly once: one kill ran on the host
    assert kills.read_text().count(job_id) == 1
    kills.unlink()


def test_idempotent_submit_returns_the_same_remote_job(fleet: RemoteFleet) -> None:
    first = fleet.submit("h2", "--idempotency-key", "same-1", "--", "true")
    second = fleet.submit("h2", "--idempotency-key", "same-1", "--", "true")
    assert first == second
    conflict = fleet.vq("submit", "h2", "--idempotency-key", "same-1", "--", "false")
    assert conflict.returncode == 6
    assert not any((fleet.local / "outbox").iterdir())


def test_unsafe_source_is_refused_here_and_nothing_is_sent(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "escape").symlink_to("/etc/passwd")
    before = sorted((fleet.remote_state("h1") / "queue").glob("*.json"))
    done = fleet.vq("submit", "h1", str(source), "--", "true")
    assert done.returncode == 4, done.stderr
    assert sorted((fleet.remote_state("h1") / "queue").glob("*.json")) == before


def test_logs_follow_resumes_after_a_partition_without_loss(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    script = "i=0; while [ $i -lt 60 ]; do echo line-$i; i=$((i+1)); sleep 0.2; done"
    job_id = fleet.submit("h2", "--", "sh", "-c", script)
    errors = tmp_path / "stderr"
    follower = fleet.popen("logs", "h2", job_id, "-f", stderr=errors)
    wait_until(lambda: b"line-3" in fleet.remote_log("h2", job_id), 30)
    with fleet.partition("h2"):
        # the job completes on its host while the link is down
        wait_until(lambda: fleet.remote_spec("h2", job_id)["state"] in ("FAILED", "COMPLETED"), 40)
        # the follower's stream drops (a dead link, not the job's end) and the host is
        # marked; the follower keeps going
        wait_until(lambda: b"lost contact with host h2" in errors.read_bytes(), 60)
        assert b"resuming at byte" in errors.read_bytes()
        assert fleet.health("h2")["status"] == "unreachable"
        assert follower.poll() is None
    out, _ = follower.communicate(timeout=90)
    assert follower.returncode == 0, errors.read_text()
    assert out == fleet.remote_log("h2", job_id)
    assert out.count(b"line-59\n") == 1
    assert b"host h2 answers again" in errors.read_bytes()
    assert fleet.health("h2")["status"] == "ok"


def test_logs_follow_survives_a_killed_control_master(fleet: RemoteFleet) -> None:
    script = "i=0; while [ $i -lt 30 ]; do echo row-$i; i=$((i+1)); sleep 0.1; done"
    job_id = fleet.submit("h3", "--", "sh", "-c", script)
    follower = fleet.popen("logs", "h3", job_id, "-f")
    wait_until(lambda: b"row-5" in fleet.remote_log("h3", job_id), 30)
    for socket in (fleet.runtime / "vq").glob("cm-*"):
        import subprocess

        subprocess.run(
            ["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "x"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert out == fleet.remote_log("h3", job_id)


def test_wait_rides_out_a_partition(fleet: RemoteFleet, tmp_path: Path) -> None:
    job_id = fleet.submit("h3", "--", "sh", "-c", "sleep 3; exit 7")
    errors = tmp_path / "stderr"
    waiter = fleet.popen("wait", "h3", job_id, stderr=errors)
    time.sleep(0.5)  # let the remote wait start; the partition then hits it mid-call
    with fleet.partition("h3"):
        wait_until(lambda: fleet.remote_spec("h3", job_id)["state"] == "FAILED", 30)
        wait_until(lambda: b"lost contact with host h3" in errors.read_bytes(), 60)
        assert waiter.poll() is None  # no failure while the host is away
        assert fleet.health("h3")["status"] == "unreachable"
    waiter.communicate(timeout=90)
    assert waiter.returncode == 7, errors.read_text()


def test_keyed_submit_cut_during_upload_is_outcome_unknown_then_exactly_one_job(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    import os

    payload = tmp_path / "big.bin"
    payload.write_bytes(os.urandom(8 << 20))
    args = ("submit", "h1", str(payload), "--idempotency-key", "cut-1", "--job-name", "cut-1")
    incoming = fleet.remote_state("h1") / "incoming"
    # a slow link (2 MB/s) keeps the 8 MiB upload in flight long enough to cut it
    with slow_uplink("h1"):
        submitter = fleet.popen(*args, "--", "true")
        wait_until(lambda: incoming.is_dir() and any(incoming.iterdir()), 30, interval=0.02)
        with fleet.partition("h1"):
            _, err = submitter.communicate(timeout=60)
    assert submitter.returncode == 12, err
    assert b"same --idempotency-key" in err
    kept = list((fleet.local / "outbox").iterdir())
    assert len(kept) == 1 and (kept[0] / "source.tar").stat().st_size > 8 << 20
    # the unknown outcome is recorded against the host, never against a job
    assert fleet.health("h1")["status"] == "unreachable"
    hosts = json.loads(fleet.vq("hosts", "--json").stdout)["hosts"]
    assert {row["name"]: row["unresolved_submits"] for row in hosts}["h1"] == 1
    again = fleet.vq(*args, "--json", "--", "true", timeout=120)
    assert again.returncode == 0, again.stderr
    answer = json.loads(again.stdout)
    listed = fleet.vq("queue", "h1", "--name", "cut-1", "--json")
    assert [row["id"] for row in json.loads(listed.stdout)["jobs"]] == [answer["id"]]
    assert fleet.health("h1")["status"] == "ok"
    # the keyed rerun's answer settles the kept attempt: reconciled, not replayed
    assert answer["reconciled_outbox"] == [str(kept[0])]
    assert f"is job {answer['id']}" in again.stderr
    assert not any((fleet.local / "outbox").iterdir())
    hosts = json.loads(fleet.vq("hosts", "--json").stdout)["hosts"]
    assert {row["name"]: row["unresolved_submits"] for row in hosts}["h1"] == 0


def test_fetch_is_byte_identical_with_an_ssh_manifest_and_acknowledged(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    import os

    source = tmp_path / "in"
    (source / "deep").mkdir(parents=True)
    (source / "deep" / "blob.bin").write_bytes(os.urandom(300_000))
    job_id = fleet.submit("h2", str(source), "--", "sh", "-c", "cp deep/blob.bin out.bin")
    wait_until(lambda: fleet.remote_spec("h2", job_id)["state"] == "COMPLETED", 30)
    assert fleet.remote_spec("h2", job_id).get("last_fetched_at") is None
    dest = tmp_path / "fetched"
    done = fleet.vq("fetch", "h2", job_id, str(dest), "--json")
    assert done.returncode == 0, done.stderr
    workspace = fleet.remote_state("h2") / "jobs" / job_id
    remote_files = {p.relative_to(workspace) for p in workspace.rglob("*") if p.is_file()}
    assert Path("deep/blob.bin") in remote_files and Path("out.bin") in remote_files
    for relative in remote_files:
        assert (dest / relative).read_bytes() == (workspace / relative).read_bytes(), relative
    manifest = json.loads((dest / "_vq" / "fetch-manifest.json").read_text())
    assert (manifest["transport"], manifest["source_host"]) == ("ssh", "h2")
    assert manifest["stale"] is False and manifest["source_path"] == str(workspace)
    diagnosis = json.loads((dest / "_vq" / "terminal-diagnosis.json").read_text())
    assert diagnosis["state"] == "COMPLETED"
    stamped = fleet.remote_spec("h2", job_id).get("last_fetched_at")
    assert stamped and json.loads(done.stdout)["last_fetched_at"]
    # fetching again refreshes the same snapshot; an unrelated DEST is refused
    assert fleet.vq("fetch", "h2", job_id, str(dest)).returncode == 0
    other = tmp_path / "occupied"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    refused = fleet.vq("fetch", "h2", job_id, str(other))
    assert refused.returncode == 6 and (other / "mine.txt").read_text() == "keep"


def test_a_snapshot_stream_cut_mid_file_leaves_nothing_and_marks_the_old_copy_stale(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    import os
    import shlex

    source = tmp_path / "in"
    source.mkdir()
    (source / "big.bin").write_bytes(os.urandom(1_000_000))
    job_id = fleet.submit("h2", str(source), "--", "true")
    wait_until(lambda: fleet.remote_spec("h2", job_id)["state"] == "COMPLETED", 30)
    dest = tmp_path / "fetched"
    assert fleet.vq("fetch", "h2", job_id, str(dest)).returncode == 0
    # the host's stream now stops 600 kB in, inside big.bin's data, and the command
    # still ends with status 0: only the tar itself shows the cut
    real = shlex.join(fleet.vq_command("h2"))
    cut = f'if [ "$1" = fetch ]; then {real} "$@" | head -c 600000; else exec {real} "$@"; fi'
    fleet.write_config(h2={"vq_command": ["sh", "-c", cut, "sh"]})
    fresh = tmp_path / "fresh"
    done = fleet.vq("fetch", "h2", job_id, str(fresh))
    assert done.returncode != 0 and done.stderr.startswith("vq: error: "), done.stderr
    assert "not a valid tar" in done.stderr and "Traceback" not in done.stderr
    assert not fresh.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fetched", "in"]  # no staging left
    # a refresh cut the same way keeps the previous copy whole, marked stale
    refreshed = fleet.vq("fetch", "h2", job_id, str(dest))
    assert refreshed.returncode == done.returncode, refreshed.stderr
    assert (dest / "big.bin").read_bytes() == (source / "big.bin").read_bytes()
    manifest = json.loads((dest / "_vq" / "fetch-manifest.json").read_text())
    assert manifest["stale"] is True and "not a valid tar" in manifest["refresh_error"]


# --- hostless discovery (§2.2) ----------------------------------------------------------
def test_hostless_status_finds_the_job_on_its_host(fleet: RemoteFleet) -> None:
    job_id = fleet.submit("h2", "--job-name", "found-me", "--", "true")
    done = fleet.vq("status", job_id, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["id"] == job_id
    # a short id is resolved fleet-wide, then asked with the full id
    short = fleet.vq("status", job_id[:8], "--json")
    assert short.returncode == 0, short.stderr
    assert json.loads(short.stdout)["id"] == job_id
    local = fleet.vq("submit", "--", "true").stdout.strip()
    here = fleet.vq("status", local[:8], "--json")
    assert here.returncode == 0 and json.loads(here.stdout)["id"] == local


def test_one_id_on_two_hosts_fails_closed_naming_them(fleet: RemoteFleet) -> None:
    import shutil

    job_id = fleet.submit("h1", "--", "true")
    wait_until(lambda: fleet.remote_spec("h1", job_id)["state"] == "COMPLETED", 30)
    planted = fleet.remote_state("h2") / "queue" / f"{job_id}.json"
    shutil.copy2(fleet.remote_state("h1") / "queue" / f"{job_id}.json", planted)
    shutil.chown(planted, fleet.testbed.user, fleet.testbed.user)
    try:
        done = fleet.vq("status", job_id)
        assert done.returncode == 6, done.stderr
        assert "h1, h2" in done.stderr and "name the host" in done.stderr
    finally:
        planted.unlink()


def test_not_found_with_a_partitioned_host_is_unavailable_not_unknown(fleet: RemoteFleet) -> None:
    unknown = "0123456789ab"
    fleet.write_config(h3={"ssh_timeout": MEASURED_SSH_TIMEOUT})  # the partition's cost
    assert fleet.vq("status", unknown).returncode == 3
    with fleet.partition("h3"):
        done = fleet.vq("status", unknown)
    assert done.returncode == 13, done.stderr
    assert f"job {unknown} not found; h3 unavailable" in done.stderr
    assert fleet.health("h3")["status"] == "unreachable"


def test_unreachable_remote_default_is_refused_and_the_action_never_sent(
    fleet: RemoteFleet,
) -> None:
    job_id = fleet.submit("h3", "--", "sleep", "60")
    fleet.write_config('default_host = "h3"\n', h3={"ssh_timeout": MEASURED_SSH_TIMEOUT})
    with fleet.partition("h3"):
        done = fleet.vq("kill", job_id)
    assert done.returncode == 13, done.stderr
    assert "default host h3" in done.stderr and "explicitly" in done.stderr
    assert fleet.remote_spec("h3", job_id)["state"] in ("PENDING", "RUNNING")
    # reachable again: the probe trusts the listing and the verb goes to the default
    killed = fleet.vq("kill", job_id)
    assert killed.returncode == 0, killed.stderr
    wait_until(lambda: fleet.remote_spec("h3", job_id)["state"] == "KILLED", 30)


def test_a_down_default_triggers_fleet_discovery(fleet: RemoteFleet) -> None:
    job_id = fleet.submit("h2", "--", "sh", "-c", "echo from-h2")
    wait_until(lambda: fleet.remote_spec("h2", job_id)["state"] == "COMPLETED", 30)
    fleet.write_config('default_host = "h1"\n', h1={"down": True})
    done = fleet.vq("logs", job_id)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "from-h2\n"
    marked = fleet.vq("status", "h1", job_id)
    assert marked.returncode == 11 and "marked down" in marked.stderr


# --- fleet views (§6.3) -------------------------------------------------------------------
def test_queue_all_lists_every_host_and_one_row_for_an_unreachable_one(
    fleet: RemoteFleet,
) -> None:
    ids = {host: fleet.submit(host, "--job-name", f"all-{host}", "--", "true") for host in HOSTS}
    fleet.write_config(h2={"ssh_timeout": MEASURED_SSH_TIMEOUT})  # the partition's cost
    with fleet.partition("h2"):
        done = fleet.vq("queue", "--all", "--json")
        human = fleet.vq("list", "--all")
        top = fleet.vq("top", "h2", "--json")
        overview = fleet.vq("overview", "h2")
    # a one-host view of an unreachable host is its one row, exit 11, no traceback
    assert top.returncode == 11, top.stderr
    assert json.loads(top.stdout)["hosts"][0]["status"] == "unreachable"
    assert json.loads(top.stdout)["hosts"][0]["last_ok_at"]
    assert overview.returncode == 11 and "Traceback" not in overview.stderr
    assert overview.stdout.startswith("h2") and "UNREACHABLE" in overview.stdout
    assert done.returncode == 11
    payload = json.loads(done.stdout)
    status = {h["name"]: h["status"] for h in payload["hosts"]}
    assert status == {"localhost": "ok", "h1": "ok", "h2": "unreachable", "h3": "ok"}
    listed = {(row["host"], row["id"]) for row in payload["jobs"]}
    assert ("h1", ids["h1"]) in listed and ("h3", ids["h3"]) in listed
    assert not any(host == "h2" for host, _ in listed)
    assert human.returncode == 11
    assert any(
        line.startswith("h2") and "UNREACHABLE" in line for line in human.stdout.splitlines()
    )
    healed = fleet.vq("queue", "--all", "--json")
    assert healed.returncode == 0
    assert ("h2", ids["h2"]) in {(r["host"], r["id"]) for r in json.loads(healed.stdout)["jobs"]}


def test_overview_all_usage_by_host_and_hosts_probe(fleet: RemoteFleet) -> None:
    job_id = fleet.submit("h1", "--", "true")
    wait_until(lambda: fleet.remote_spec("h1", job_id)["state"] == "COMPLETED", 30)
    done = fleet.vq("overview", "--all", "--json")
    assert done.returncode == 0, done.stderr
    overviews = json.loads(done.stdout)["overviews"]
    assert set(overviews) == {"localhost", *HOSTS}
    assert overviews["h1"]["daemon"]["running"] is True
    usage = fleet.vq("usage", "--by", "host", "--json")
    assert usage.returncode == 0, usage.stderr
    groups = {group["key"]: group for group in json.loads(usage.stdout)["groups"]}
    assert set(groups) == {"localhost", *HOSTS} and groups["h1"]["jobs"] >= 1
    top = fleet.vq("top", "h2", "--json")
    assert top.returncode == 0 and json.loads(top.stdout)["daemon"]["running"] is True
    assert json.loads(top.stdout)["host"] == "h2"
    assert json.loads(top.stdout)["hosts"][0]["status"] == "ok"
    fleet.write_config("", h3={"down": True})
    probe = fleet.vq("hosts", "--probe", "--force", "--json")
    assert probe.returncode == 0, probe.stderr
    rows = {row["name"]: row for row in json.loads(probe.stdout)["hosts"]}
    assert rows["h1"]["status"] == "ok" and rows["h1"]["vq_version"]
    assert rows["h3"]["status"] == "down"


# --- SSH trust (§7.1) ---------------------------------------------------------------------
@pytest.mark.parametrize("case", ["unknown", "rotated"])
def test_host_key_problems_mark_the_host_and_write_nothing(
    fleet: RemoteFleet, tmp_path: Path, case: str
) -> None:
    import subprocess

    known = tmp_path / "known_hosts"
    if case == "unknown":
        known.write_text("")
    else:
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True
        )
        kind, key = (tmp_path / "k.pub").read_text().split()[:2]
        known.write_text(f"10.200.1.2 {kind} {key}\n")
    options = ["-F", str(fleet.ssh_config), "-o", f"UserKnownHostsFile={known}"]
    fleet.write_config("", h1={"ssh_options": options})
    import tempfile

    # a control directory of its own: no master connection to reuse, the key is checked
    runtime = Path(tempfile.mkdtemp(prefix="vqk-", dir="/tmp"))
    before = sorted((fleet.remote_state("h1") / "queue").glob("*.json"))
    submit = fleet.vq("submit", "h1", "--", "true", XDG_RUNTIME_DIR=str(runtime))
    assert submit.returncode == 11, submit.stderr
    expected = "is not known" if case == "unknown" else "has changed"
    assert expected in submit.stderr and "Traceback" not in submit.stderr
    assert sorted((fleet.remote_state("h1") / "queue").glob("*.json")) == before
    assert not any((fleet.local / "outbox").iterdir())
    health = fleet.health("h1")
    assert health["status"] == "invalid"
    assert health["last_error_reference"] == (
        "host-key-unknown" if case == "unknown" else "host-key-changed"
    )
    fleet.write_config()
    assert fleet.vq("hosts", "--probe", "--force").returncode == 0  # restored for later tests


# --- the agent API's host (§3.5 as this project extends it) ------------------------------
def test_api_submit_with_a_host_is_delegated_there(fleet: RemoteFleet) -> None:
    import base64
    import socket
    import subprocess
    import sys

    import httpx

    token = json.loads(fleet.vq("web", "init-token", "--force", "--json").stdout)["token"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "vq", "web", "serve", "--port", str(port)],
        env=fleet.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            try:
                return httpx.get(f"{base}/health/live", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, 60, interval=0.2)
        body = {
            "command": ["sh", "-c", "cat in.txt"],
            "idempotency_key": "api-host-1",
            "host": "h2",
            "job_name": "via-api",
            "inputs": {"files": {"in.txt": base64.b64encode(b"from the api\n").decode()}},
        }
        headers = {"Authorization": f"Bearer {token}"}
        answer = httpx.post(f"{base}/api/v1/jobs", json=body, headers=headers, timeout=60)
        assert answer.status_code == 201, answer.text
        job_id = answer.json()["id"]
        wait_until(lambda: fleet.remote_spec("h2", job_id)["state"] == "COMPLETED", 30)
        assert fleet.remote_log("h2", job_id) == b"from the api\n"
        assert fleet.remote_spec("h2", job_id)["job_name"] == "via-api"
        # who asked the API, not the account the delegated submit arrived under
        assert answer.json()["submitter"] == "admin-token"
        assert fleet.remote_spec("h2", job_id)["submitter"] == "admin-token"
        assert not (fleet.local / "queue" / f"{job_id}.json").exists()
        again = httpx.post(f"{base}/api/v1/jobs", json=body, headers=headers, timeout=60)
        assert again.status_code in (200, 201), again.text
        assert again.json()["id"] == job_id
    finally:
        server.terminate()
        server.wait(timeout=30)
