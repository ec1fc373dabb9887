"""`vq campaign run` across two remote daemon hosts over real SSH (the controller relays).

The testbed's namespace hosts h1 and h2 each run a real vq daemon (module fixture); the
controller runs here through the real CLI, with no local daemon: every node runs
remotely, every artifact comes back over SSH, is hashed and verified here, and goes out
again inside its consumer's payload.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.system.remote_fleet import RemoteFleet, wait_until
from tests.testbed import SshTestbed, testbed  # noqa: F401 - the fixture

#: every test starts from the fleet's own config (tests/system/conftest.py)
pytestmark = pytest.mark.usefixtures("fresh_fleet_config")


def make_campaign(tmp_path: Path, campaign_id: str, produce_delay: float = 0.0) -> Path:
    """produce (h1) → check (validate, h2) → report (render, h1), and cleanup (h2) on
    produce's completion."""
    produce = f"sleep {produce_delay}; mkdir -p out/sub && echo 42 > out/value.txt"
    data: dict[str, Any] = {
        "schema_name": "vq.campaign/1",
        "campaign_id": campaign_id,
        "nodes": [
            {
                "id": "produce",
                "kind": "compute",
                "host": "h1",
                "command": ["sh", "-c", f"{produce} && echo deep > out/sub/deep.txt"],
                "outputs": [{"name": "result", "path": "out", "kind": "directory"}],
            },
            {
                "id": "check",
                "kind": "validate",
                "host": "h2",
                "command": [
                    "sh",
                    "-c",
                    'test "$(cat in/value.txt)" = 42 && test -f in/sub/deep.txt '
                    "&& echo '{\"ok\": true}' > verdict.json",
                ],
                "inputs": [{"name": "result", "source": "produce.result", "path": "in"}],
                "outputs": [{"name": "verdict", "path": "verdict.json", "kind": "file"}],
            },
            {
                "id": "report",
                "kind": "render",
                "host": "h1",
                "command": ["sh", "-c", "echo minimum $(cat in/value.txt) > report.md"],
                "inputs": [{"name": "result", "source": "produce.result", "path": "in"}],
                "after": [{"node": "check", "on": "success"}],
                "outputs": [{"name": "report", "path": "report.md", "kind": "file"}],
            },
            {
                "id": "cleanup",
                "kind": "other",
                "host": "h2",
                "command": ["true"],
                "after": [{"node": "produce", "on": "completion"}],
            },
        ],
    }
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def run(fleet: RemoteFleet, path: Path, run_dir: Path, code: int = 0) -> dict[str, Any]:
    done = fleet.vq(
        "campaign", "run", str(path), str(run_dir), "--interval", "0.3", "--json", timeout=300
    )
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def remote_names(fleet: RemoteFleet, host: str, campaign_id: str) -> list[str]:
    """The job names of the campaign's jobs on ``host``, as its own queue lists them."""
    done = fleet.remote_vq(host, "list", "--json", "--name", f"{campaign_id}.")
    assert done.returncode == 0, done.stderr
    return sorted(str(job["job_name"]) for job in json.loads(done.stdout)["jobs"])


def assert_one_job_per_node(fleet: RemoteFleet, campaign_id: str) -> None:
    assert remote_names(fleet, "h1", campaign_id) == [
        f"{campaign_id}.produce.a1",
        f"{campaign_id}.report.a1",
    ]
    assert remote_names(fleet, "h2", campaign_id) == [
        f"{campaign_id}.check.a1",
        f"{campaign_id}.cleanup.a1",
    ]


def test_a_campaign_across_two_hosts_relays_verified_artifacts(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    path = make_campaign(tmp_path, "two-hosts")
    run_dir = tmp_path / "run"
    result = run(fleet, path, run_dir)
    assert result["status"] == "succeeded"
    journal = json.loads((run_dir / "journal.json").read_text())
    hosts = {a["node"]: a["host"] for a in journal["attempts"]}
    assert hosts == {"produce": "h1", "check": "h2", "report": "h1", "cleanup": "h2"}
    for attempt in journal["attempts"]:
        assert fleet.remote_spec(attempt["host"], attempt["job_id"])["state"] == "COMPLETED"
        assert all(o["status"] == "verified" for o in attempt["outputs"])
    # the relayed artifacts, each verified against its manifest by the real CLI
    artifacts = run_dir / "artifacts"
    assert (artifacts / "report" / "1" / "report").read_text() == "minimum 42\n"
    for node, output in (("produce", "result"), ("check", "verdict"), ("report", "report")):
        manifest = artifacts / node / "1" / f"{output}.manifest.json"
        verify = fleet.vq(
            "campaign", "artifact-verify", str(manifest), str(manifest.parent / output)
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
    entries = json.loads((artifacts / "produce" / "1" / "result.manifest.json").read_text())
    assert sorted(e["path"] for e in entries["entries"] if e["type"] == "file") == [
        "sub/deep.txt",
        "value.txt",
    ]
    # the consumer on h2 got exactly the producer's bytes, staged from attempt 1
    check = next(a for a in journal["attempts"] if a["node"] == "check")
    assert check["inputs"][0]["producer"] == "produce" and check["inputs"][0]["attempt"] == 1
    assert not [p for p in (run_dir / "incoming").rglob("*") if not p.is_dir()]
    assert_one_job_per_node(fleet, "two-hosts")
    # the relay fetch is the controller's own record: the job's last_fetched_at stays unset
    produce = next(a for a in journal["attempts"] if a["node"] == "produce")
    assert fleet.remote_spec("h1", produce["job_id"]).get("last_fetched_at") is None
    # a rerun of a finished campaign contacts nobody and submits nothing
    again = run(fleet, path, run_dir)
    assert again["status"] == "succeeded"
    assert_one_job_per_node(fleet, "two-hosts")


def wide_campaign(tmp_path: Path, campaign_id: str, pairs: int) -> Path:
    """``pairs`` producers round-robin over h1..h3, each consumed on the next host."""
    hosts = ("h1", "h2", "h3")
    nodes: list[dict[str, Any]] = []
    for i in range(pairs):
        nodes.append(
            {
                "id": f"p{i}",
                "kind": "compute",
                "host": hosts[i % 3],
                "command": ["sh", "-c", f"sleep 0.3; echo {i} > o.txt"],
                "outputs": [{"name": "o", "path": "o.txt", "kind": "file"}],
            }
        )
        nodes.append(
            {
                "id": f"c{i}",
                "kind": "other",
                "host": hosts[(i + 1) % 3],
                "command": ["sh", "-c", f'test "$(cat in.txt)" = {i} && cp in.txt r.txt'],
                "inputs": [{"name": "o", "source": f"p{i}.o", "path": "in.txt"}],
                "outputs": [{"name": "r", "path": "r.txt", "kind": "file"}],
            }
        )
    path = tmp_path / "wide.json"
    data = {"schema_name": "vq.campaign/1", "campaign_id": campaign_id, "nodes": nodes}
    path.write_text(json.dumps(data))
    return path


def _bytes_of(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _kill_9_the_controller(
    fleet: RemoteFleet, tmp_path: Path, campaign_id: str, pairs: int, kills_wanted: int
) -> None:
    """SIGKILL the controller ``kills_wanted`` times, rerunning it each time, then let it
    finish: one job per key per host, and the campaign succeeds.

    Each kill lands just after the controller's next journal write (after a submitting
    record, an acceptance, a published output), with jitter so that some land mid-fetch
    or mid-publish, or at a random moment of a pass that writes nothing. A run is thus
    killed after about one step of progress, and the campaign outlasts the kills.
    """
    path = wide_campaign(tmp_path, campaign_id, pairs)
    run_dir = tmp_path / "run"
    journal = run_dir / "journal.json"
    rng = random.Random(19)
    kills, seen = 0, set()
    interval = ["--interval", "0.2"]
    for _round in range(6 * kills_wanted):
        if kills >= kills_wanted:
            break
        before = _bytes_of(journal)
        proc = subprocess.Popen(
            [sys.executable, "-m", "vq", "campaign", "run", str(path), str(run_dir), *interval],
            env=fleet.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # fault injection (not a wait for a condition): on the next progress, or at a
        # random moment of a pass that makes none
        latest = time.monotonic() + rng.uniform(0.6, 2.0)
        while proc.poll() is None and time.monotonic() < latest:
            if _bytes_of(journal) != before:
                time.sleep(rng.uniform(0.0, 0.25))
                break
            time.sleep(0.02)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        if proc.wait(timeout=60) == 0:
            break  # the campaign ended between two kills
        if journal.exists():
            seen |= {a["state"] for a in json.loads(journal.read_text())["attempts"]}
    assert kills >= kills_wanted
    assert "submitting" in seen or "accepted" in seen  # kills landed mid-progress
    final = run(fleet, path, run_dir)
    assert final["status"] == "succeeded"
    journal_data = json.loads(journal.read_text())
    assert len(journal_data["attempts"]) == 2 * pairs
    for host in ("h1", "h2", "h3"):  # one job per key (per node) on each host
        names = remote_names(fleet, host, campaign_id)
        assert len(names) == len(set(names)), names
    everywhere = sum(len(remote_names(fleet, host, campaign_id)) for host in ("h1", "h2", "h3"))
    assert everywhere == 2 * pairs


def test_controller_kill_9_mid_run_never_duplicates_a_remote_node(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    """At least 10 kill -9s of the controller across a campaign of 8 nodes on h1..h3."""
    _kill_9_the_controller(fleet, tmp_path, "kill-nine", pairs=4, kills_wanted=10)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_controller_kill_9_soak_never_duplicates_a_remote_node(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    """At least 30 kill -9s of the controller across a campaign of 24 nodes on h1..h3."""
    _kill_9_the_controller(fleet, tmp_path, "kill-nine-soak", pairs=12, kills_wanted=30)


def test_a_partitioned_host_is_retried_and_nothing_fails(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    path = make_campaign(tmp_path, "partition", produce_delay=2.0)
    run_dir = tmp_path / "run"
    log = tmp_path / "controller.err"
    proc = fleet.popen(
        "campaign", "run", str(path), str(run_dir), "--interval", "0.3", "--json", stderr=log
    )
    try:
        wait_until(lambda: b"produce: attempt 1 submitted" in log.read_bytes(), 60)
        with fleet.partition("h1"):
            wait_until(lambda: b"cannot observe the jobs on h1" in log.read_bytes(), 60)
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, log.read_text()
    assert json.loads(out)["status"] == "succeeded"
    journal = json.loads((run_dir / "journal.json").read_text())
    assert {a["state"] for a in journal["attempts"]} == {"succeeded"}
    assert_one_job_per_node(fleet, "partition")


def test_a_node_bound_to_a_generation_on_h1_and_a_group_writable_one_refused_there(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    source = tmp_path / "runtime-src" / "bin"
    source.mkdir(parents=True)
    (source / "tool").write_text("#!/bin/sh\necho generation ran\n")
    (source / "tool").chmod(0o755)
    root = Path(tempfile.mkdtemp(prefix="vq-gen-", dir="/tmp"))  # one filesystem for all hosts
    root.chmod(0o755)
    try:
        deployed = fleet.vq("runtime", "deploy", str(source.parent), "--root", str(root), "--json")
        assert deployed.returncode == 0, deployed.stderr
        digest = json.loads(deployed.stdout)["digest"]
        path = make_campaign(tmp_path, "bound-h1")
        data = json.loads(path.read_text())
        produce = data["nodes"][0]
        produce.update(runtime_root=str(root), runtime_digest=digest)
        produce["command"] = [
            "sh",
            "-c",
            "mkdir -p out/sub && echo 42 > out/value.txt && "
            'echo deep > out/sub/deep.txt && "$VQ_RUNTIME_PAYLOAD"/bin/tool > out/ran',
        ]
        path.write_text(json.dumps(data))
        run_dir = tmp_path / "run"
        assert run(fleet, path, run_dir)["status"] == "succeeded"
        journal = json.loads((run_dir / "journal.json").read_text())
        attempt = next(a for a in journal["attempts"] if a["node"] == "produce")
        assert attempt["runtime"]["artifact_identity"] == digest
        assert (run_dir / "artifacts" / "produce" / "1" / "result" / "ran").read_text() == (
            "generation ran\n"
        )
        # the same campaign under another id, with the generation made group writable:
        # h1's queue refuses the submission, the attempt stays submitting, nothing fails
        tool = root / "generations" / digest / "payload" / "bin" / "tool"
        tool.chmod(0o775)
        data["campaign_id"] = "bound-h1-writable"
        path.write_text(json.dumps(data))
        refused = fleet.vq("campaign", "run", str(path), str(tmp_path / "run2"), "--once", "--json")
        assert refused.returncode == 1, refused.stderr
        assert "group or world writable" in refused.stderr
        states = {n["node"]: n["state"] for n in json.loads(refused.stdout)["nodes"]}
        assert states["produce"] == "submitting"
        assert remote_names(fleet, "h1", "bound-h1-writable") == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fetch_campaign(tmp_path: Path, campaign_id: str, mib: int) -> Path:
    """produce (h1) writes ``mib`` MiB of random bytes; check (h2) verifies its hash."""
    produce = (
        f"mkdir out && head -c {mib}M /dev/urandom > out/blob "
        "&& sha256sum out/blob | cut -d' ' -f1 > out/blob.sha256"
    )
    data: dict[str, Any] = {
        "schema_name": "vq.campaign/1",
        "campaign_id": campaign_id,
        "nodes": [
            {
                "id": "produce",
                "kind": "compute",
                "host": "h1",
                "command": ["sh", "-c", produce],
                "outputs": [{"name": "result", "path": "out", "kind": "directory"}],
            },
            {
                "id": "check",
                "kind": "validate",
                "host": "h2",
                "command": [
                    "sh",
                    "-c",
                    'test "$(sha256sum in/blob | cut -d" " -f1)" = "$(cat in/blob.sha256)"',
                ],
                "inputs": [{"name": "result", "source": "produce.result", "path": "in"}],
            },
        ],
    }
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def test_a_host_partitioned_during_the_fetch_is_retried_and_nothing_fails(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    """h1's link goes down while the controller fetches produce's output: the controller
    is held (``VQ_TEST_HOLD=snapshot_stream_began:…``) once the first entry of the stream
    arrived, the link goes down, the hold is released, and the 24 MiB still to come
    cannot arrive. The pass reports the transport failure, nothing is published or
    failed, and after healing the next pass publishes and the campaign succeeds."""
    path = fetch_campaign(tmp_path, "fetch-cut", mib=24)
    run_dir = tmp_path / "run"
    log = tmp_path / "controller.err"
    holds = tmp_path / "holds"
    holds.mkdir()
    proc = fleet.popen(
        "campaign",
        "run",
        str(path),
        str(run_dir),
        "--interval",
        "0.3",
        "--json",
        stderr=log,
        VQ_TEST_HOLD=f"snapshot_stream_began:{holds}",
    )
    try:
        try:
            wait_until((holds / "snapshot_stream_began.held").exists, 120)
        except AssertionError as exc:
            raise AssertionError(log.read_text()) from exc
        with fleet.partition("h1"):
            (holds / "snapshot_stream_began.go").touch()
            try:  # the cut stream fails within the fetch's inactivity deadline (45 s)
                wait_until(lambda: b"publishing failed" in log.read_bytes(), 120)
            except AssertionError as exc:
                raise AssertionError(log.read_text()) from exc
            # the cut stream published nothing and failed nothing
            assert b"published and verified" not in log.read_bytes(), log.read_text()
            assert not (run_dir / "artifacts" / "produce").exists() or not any(
                (run_dir / "artifacts" / "produce").rglob("blob")
            )
            journal = json.loads((run_dir / "journal.json").read_text())
            assert {a["node"]: a["state"] for a in journal["attempts"]} == {"produce": "succeeded"}
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    text = log.read_text()
    assert proc.returncode == 0, text
    failed = next(line for line in text.splitlines() if "publishing failed" in line)
    assert "produce: attempt 1" in failed and "host h1" in failed, failed
    assert json.loads(out)["status"] == "succeeded"
    journal = json.loads((run_dir / "journal.json").read_text())
    assert {a["node"]: (a["attempt"], a["state"]) for a in journal["attempts"]} == {
        "produce": (1, "succeeded"),
        "check": (1, "succeeded"),
    }
    manifest = run_dir / "artifacts" / "produce" / "1" / "result.manifest.json"
    verify = fleet.vq("campaign", "artifact-verify", str(manifest), str(manifest.parent / "result"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert remote_names(fleet, "h1", "fetch-cut") == ["fetch-cut.produce.a1"]


def test_a_submission_whose_answer_is_lost_is_logged_as_unknown_and_reconciled(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    import shlex

    path = make_campaign(tmp_path, "lost-answer")
    run_dir = tmp_path / "run"
    # h1's queue accepts the job, then its answer never arrives within ssh_timeout
    late = f'{shlex.join(fleet.vq_command("h1"))} "$@"; sleep 30'
    fleet.write_config(h1={"vq_command": ["sh", "-c", late, "sh"], "ssh_timeout": 3})
    once = fleet.vq("campaign", "run", str(path), str(run_dir), "--once", "--json")
    assert once.returncode == 1, once.stderr
    logged = [line for line in once.stderr.splitlines() if "produce: attempt 1" in line]
    assert logged and "outcome unknown" in logged[0], once.stderr
    assert "refused" not in logged[0] and "reconciled" in logged[0], logged
    journal = json.loads((run_dir / "journal.json").read_text())
    assert [a["state"] for a in journal["attempts"]] == ["submitting"]
    assert remote_names(fleet, "h1", "lost-answer") == ["lost-answer.produce.a1"]
    fleet.write_config()
    assert run(fleet, path, run_dir)["status"] == "succeeded"
    assert_one_job_per_node(fleet, "lost-answer")  # the resend under its key found the job
