"""What vq does with what a remote vq host answers over real SSH (§2.2): wrappers that
print before vq starts, answers that cannot be read after a submit may have run, hostile
or garbled answers, and the command lines vq sends.

Three namespace hosts of the testbed each run a real vq daemon (this checkout, started
over SSH by the module fixture). A hostile or noisy remote is a real ``vq_command``: a
shell wrapper the real SSH path runs on the host, printing a crafted answer for one verb
(from a file on the host) or running the real vq around its own noise. Every verb runs
through the real ``vq`` CLI in a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.system.remote_fleet import HOSTS, RemoteFleet, wait_until
from tests.testbed import SshTestbed, testbed  # noqa: F401 - the fixture

JOB_ID = re.compile(r"[0-9a-f]{12}")


@pytest.fixture(autouse=True)
def _fresh(fleet: RemoteFleet) -> Iterator[None]:
    fleet.write_config()
    yield
    fleet.write_config()
    for entry in _outbox(fleet):
        subprocess.run(["rm", "-rf", str(entry)], check=False)
    for host in HOSTS:  # what a test left beside the host's state root, even a failed one
        for suffix in ("-answers", "-calls.log", "-first"):
            subprocess.run(["rm", "-rf", f"{fleet.remote_state(host)}{suffix}"], check=False)


def _outbox(fleet: RemoteFleet) -> list[Path]:
    outbox = fleet.local / "outbox"
    return sorted(outbox.iterdir()) if outbox.is_dir() else []


def _wrapped(fleet: RemoteFleet, host: str, script: str) -> list[str]:
    """A ``vq_command`` running ``script`` on ``host``, with ``REAL`` standing for the
    host's real vq command line."""
    real = shlex.join(fleet.vq_command(host))
    return ["sh", "-c", script.replace("REAL", real), "sh"]


def _answering(fleet: RemoteFleet, host: str, verb: str, answer: bytes) -> list[str]:
    """A ``vq_command`` that answers ``vq VERB …`` with ``answer`` (read from a file on
    the host, written here) and runs the real vq for every other verb."""
    folder = Path(f"{fleet.remote_state(host)}-answers")
    folder.mkdir(mode=0o755, exist_ok=True)
    path = folder / f"{verb.strip('-')}.answer"
    path.write_bytes(answer)
    path.chmod(0o644)
    script = (
        f'if [ "$1" = {shlex.quote(verb)} ]; then cat >/dev/null; cat {shlex.quote(str(path))}; '
        'else exec REAL "$@"; fi'
    )
    return _wrapped(fleet, host, script)


def _remote_jobs_named(fleet: RemoteFleet, host: str, name: str) -> list[str]:
    """Ids of the jobs named ``name`` in ``host``'s queue, read from its spec files."""
    found = []
    for path in (fleet.remote_state(host) / "queue").glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            if json.loads(path.read_text()).get("job_name") == name:
                found.append(path.stem)
    return found


# --- finding 3: a noisy wrapper, and answers that cannot be read -------------------------
def test_a_banner_printed_before_vq_starts_is_dropped_on_every_verb(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    banner = 'echo "Loading vq/0.1 module"; echo "module: vq/0.1 loaded" >&2; exec REAL "$@"'
    fleet.write_config(h1={"vq_command": _wrapped(fleet, "h1", banner)})
    source = tmp_path / "in"
    source.mkdir()
    (source / "data.txt").write_text("payload\n")
    done = fleet.vq(
        "submit", "h1", str(source), "--idempotency-key", "banner-1", "--", "cat", "data.txt"
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert JOB_ID.fullmatch(job_id), done.stdout
    assert "Loading" not in done.stderr and "module:" not in done.stderr
    assert not _outbox(fleet)
    assert fleet.vq("wait", "h1", job_id).returncode == 0
    status = fleet.vq("status", "h1", job_id, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "COMPLETED"
    text = fleet.vq("status", "h1", job_id)
    assert text.returncode == 0 and "Loading" not in text.stdout
    assert "module:" not in text.stderr
    assert fleet.vq("logs", "h1", job_id).stdout == "payload\n"
    assert fleet.vq("logs", "h1", job_id, "-f", "--tail", "5").stdout == "payload\n"
    listed = fleet.vq("queue", "h1", "--json")
    assert job_id in [row["id"] for row in json.loads(listed.stdout)["jobs"]]
    every = fleet.vq("queue", "--all", "--json")
    assert every.returncode == 0, every.stdout
    fetched = fleet.vq("fetch", "h1", job_id, str(tmp_path / "out"))
    assert fetched.returncode == 0, fetched.stderr
    assert (tmp_path / "out" / "data.txt").read_text() == "payload\n"
    assert fleet.vq("hosts", "--probe", "--force").returncode == 0
    assert fleet.health("h1")["status"] == "ok"
    assert fleet.health("h1")["vq_version"] == "0.1.0"


#: Wrappers around the real vq whose answer cannot be read once the submit ran.
UNREADABLE = {
    "text-after-the-answer": 'REAL "$@"; rc=$?; echo "module: vq/0.1 unloaded"; exit $rc',
    "a-status-without-vq-error": 'REAL "$@" >/dev/null; exit 3',
    "more-than-the-output-cap": 'REAL "$@"; head -c 70000000 /dev/zero',
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_an_unreadable_submit_answer_is_an_unknown_outcome_then_exactly_one_job(
    fleet: RemoteFleet, case: str
) -> None:
    fleet.write_config(h1={"vq_command": _wrapped(fleet, "h1", UNREADABLE[case])})
    key = f"unread-{case}"
    args = ("submit", "h1", "--idempotency-key", key, "--job-name", key)
    first = fleet.vq(*args, "--", "true")
    assert first.returncode == 12, first.stderr
    assert "may or may not have been accepted" in first.stderr, first.stderr
    assert "same --idempotency-key" in first.stderr and "Traceback" not in first.stderr
    assert first.stdout == ""
    kept = _outbox(fleet)
    assert len(kept) == 1
    created = _remote_jobs_named(fleet, "h1", key)
    assert len(created) == 1  # the submit did run there
    fleet.write_config()
    again = fleet.vq(*args, "--json", "--", "true")
    assert again.returncode == 0, again.stderr
    answer = json.loads(again.stdout)
    assert answer["id"] == created[0]
    assert answer["reconciled_outbox"] == [str(kept[0])]
    assert not _outbox(fleet)
    assert _remote_jobs_named(fleet, "h1", key) == created


def test_an_api_submit_whose_answer_cannot_be_read_is_504_and_kept(fleet: RemoteFleet) -> None:
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
        fleet.write_config(
            h2={"vq_command": _wrapped(fleet, "h2", UNREADABLE["text-after-the-answer"])}
        )
        body = {
            "command": ["true"],
            "idempotency_key": "api-unread-1",
            "host": "h2",
            "job_name": "api-unread-1",
        }
        headers = {"Authorization": f"Bearer {token}"}
        lost = httpx.post(f"{base}/api/v1/jobs", json=body, headers=headers, timeout=60)
        assert lost.status_code == 504, lost.text
        assert lost.json()["error"]["code"] == "outcome-unknown"
        kept = _outbox(fleet)
        assert len(kept) == 1
        created = _remote_jobs_named(fleet, "h2", "api-unread-1")
        assert len(created) == 1
        fleet.write_config()
        again = httpx.post(f"{base}/api/v1/jobs", json=body, headers=headers, timeout=60)
        assert again.status_code in (200, 201), again.text
        assert again.json()["id"] == created[0]
        assert not _outbox(fleet)
    finally:
        server.terminate()
        server.wait(timeout=30)


# --- finding 8: hostile or garbled answers ----------------------------------------------
def _deep(levels: int) -> bytes:
    return b'{"jobs": [], "x": ' + b"[" * levels + b"]" * levels + b"}"


#: `vq list --json` answers no vq gives: each must make h2 one invalid row.
HOSTILE_LISTINGS = {
    "list-shaped": b"[1, 2, 3]\n",
    "rows-that-are-numbers": b'{"jobs": [5, 6]}\n',
    "wrong-typed-fields": b'{"jobs": [{"id": 5, "state": null, "job_name": ["x"]}]}\n',
    "a-path-as-an-id": b'{"jobs": [{"id": "../../../../tmp/evil", "state": "RUNNING"}]}\n',
    "nested-past-the-parser": _deep(100_000),
    "nested-past-the-printer": _deep(900),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_LISTINGS))
def test_a_hostile_listing_is_an_invalid_host_never_a_traceback(
    fleet: RemoteFleet, case: str
) -> None:
    fleet.write_config(h2={"vq_command": _answering(fleet, "h2", "list", HOSTILE_LISTINGS[case])})
    as_json = fleet.vq("queue", "--all", "--json")
    assert as_json.returncode == 11, as_json.stderr
    assert as_json.stderr == ""
    payload = json.loads(as_json.stdout)
    hosts = {h["name"]: h for h in payload["hosts"]}
    assert {name: h["status"] for name, h in hosts.items()} == {
        "localhost": "ok",
        "h1": "ok",
        "h2": "invalid",
        "h3": "ok",
    }
    assert "host h2" in hosts["h2"]["error"] and "not a valid vq answer" in hosts["h2"]["error"]
    assert not [row for row in payload["jobs"] if row["host"] == "h2"]
    human = fleet.vq("queue", "--all")
    assert human.returncode == 11 and human.stderr == "", human.stderr
    assert any(line.startswith("h2") and "INVALID" in line for line in human.stdout.splitlines())
    assert "evil" not in human.stdout
    one = fleet.vq("queue", "h2", "--json")
    assert one.returncode == 11, one.stderr
    assert one.stdout == ""
    assert one.stderr.startswith("vq: error: host h2 answered `vq list`"), one.stderr
    assert "\nhint: " in one.stderr and "Traceback" not in one.stderr
    assert fleet.health("h2")["status"] == "invalid"


#: `vq submit --json` answers no vq gives.
HOSTILE_SUBMITS = {
    "a-path-as-the-id": b'{"id": "../../../../tmp/evil", "state": "PENDING"}\n',
    "a-group-of-paths": b'{"jobs": ["../../../etc/passwd"], "array_group_id": "0123456789ab"}\n',
    "a-group-without-its-id": b'{"jobs": [{"id": "0123456789ab", "state": "PENDING"}]}\n',
    "no-id-at-all": b'{"state": "PENDING"}\n',
}


@pytest.mark.parametrize("case", sorted(HOSTILE_SUBMITS))
def test_a_hostile_submit_answer_is_never_taken_as_a_job(fleet: RemoteFleet, case: str) -> None:
    fleet.write_config(h2={"vq_command": _answering(fleet, "h2", "submit", HOSTILE_SUBMITS[case])})
    done = fleet.vq("submit", "h2", "--", "true")
    assert done.returncode == 12, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("vq: error: the submit to host h2 may or may not"), done.stderr
    assert "not a valid vq answer" in done.stderr and "\nhint: " in done.stderr
    assert "Traceback" not in done.stderr and "KeyError" not in done.stderr
    assert len(_outbox(fleet)) == 1  # a person checks `vq queue h2`
    assert fleet.health("h2")["status"] == "invalid"


def test_an_action_answered_with_garbage_ran_with_an_unknown_outcome(fleet: RemoteFleet) -> None:
    job_id = fleet.submit("h3", "--", "sleep", "120")
    wait_until(lambda: fleet.remote_spec("h3", job_id)["state"] == "RUNNING", 30)
    real = shlex.join(fleet.vq_command("h3"))
    # the host kills the job, then prints a listing where the kill's rows belong
    garbled = 'REAL "$@" >/dev/null; rc=$?; echo \'{"jobs": []}\'; exit $rc'.replace("REAL", real)
    fleet.write_config(h3={"vq_command": ["sh", "-c", garbled, "sh"]})
    done = fleet.vq("kill", "h3", job_id, "--json")
    assert done.returncode == 12, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert (
        "not a valid vq answer" in done.stderr and "may or may not have taken effect" in done.stderr
    )
    assert f"vq status h3 {job_id}" in done.stderr
    fleet.write_config()
    wait_until(lambda: fleet.remote_spec("h3", job_id)["state"] == "KILLED", 30)


def test_escape_sequences_from_a_remote_never_reach_a_column(fleet: RemoteFleet) -> None:
    hostile = b"vq, version 1.0\x1b]0;owned\x07\x1b[2J\xc2\x9b31m\n"
    fleet.write_config(h3={"vq_command": _answering(fleet, "h3", "--version", hostile)})
    probed = fleet.vq("hosts", "--probe", "--force")
    shown = fleet.vq("hosts")
    for out in (probed.stdout, shown.stdout, shown.stderr):
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    row = next(line for line in shown.stdout.splitlines() if line.startswith("h3"))
    assert "invalid" in row
    listed = json.loads(fleet.vq("hosts", "--json").stdout)["hosts"]
    assert all("\x1b" not in json.dumps(h, ensure_ascii=False) for h in listed)
    # a job whose command holds escape sequences, on a real remote
    fleet.write_config()
    job_id = fleet.submit("h1", "--job-name", "esc", "--", "printf", "\x1b[2J\x1b]0;t\x07")
    every = fleet.vq("queue", "--all")
    assert job_id in every.stdout
    line = next(text for text in every.stdout.splitlines() if job_id in text)
    assert "\x1b" not in line and "\x07" not in line and "\\x1b[2J" in line


# --- finding 9: command lines, --debug, concurrent keyed submits -------------------------
def test_ids_are_checked_and_follow_dashes_on_every_remote_command_line(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    job_id = fleet.submit("h1", "--", "sh", "-c", "echo seen")
    wait_until(lambda: fleet.remote_spec("h1", job_id)["state"] == "COMPLETED", 30)
    calls = Path(f"{fleet.remote_state('h1')}-calls.log")
    calls.unlink(missing_ok=True)
    recording = f'printf "%s\\n" "$*" >> {shlex.quote(str(calls))}; exec REAL "$@"'
    fleet.write_config(h1={"vq_command": _wrapped(fleet, "h1", recording)})
    refused = fleet.vq("logs", "h1", "--", "--tail=1")
    assert refused.returncode == 4, refused.stderr
    assert "'--tail=1' is not a job id" in refused.stderr and "\nhint: " in refused.stderr
    for bad in (["status", "h1", "--", "-x"], ["kill", "h1", "--", "--all"]):
        assert fleet.vq(*bad).returncode == 4
    assert not calls.exists()  # nothing was sent
    sent = [
        ["status", "h1", job_id],
        ["status", "h1", job_id[:6], "--json"],
        ["events", "h1", job_id],
        ["logs", "h1", job_id, "--tail", "1"],
        ["logs", "h1", job_id, "-f"],
        ["wait", "h1", job_id],
        ["fetch", "h1", job_id, str(tmp_path / "fetched")],
    ]
    for words in sent:
        assert fleet.vq(*words).returncode == 0, words
    assert fleet.vq("kill", "h1", job_id).returncode == 6  # it has ended: refused there
    sent.append(["kill"])
    lines = calls.read_text().splitlines()
    assert len(lines) >= len(sent)
    for line in lines:
        words = line.split()
        assert "--" in words, line
        assert all(JOB_ID.fullmatch(w) or w == job_id[:6] for w in words[words.index("--") + 1 :])
    calls.unlink()


def test_debug_before_the_verb_still_sends_a_submit_to_its_host(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    (tmp_path / "h1").mkdir()  # a directory named like the host, where the user stands
    done = fleet.vq("--debug", "submit", "h1", "--job-name", "debug-h1", "--", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert _remote_jobs_named(fleet, "h1", "debug-h1") == [job_id]
    assert not (fleet.local / "queue" / f"{job_id}.json").exists()


def test_a_keyed_answer_never_settles_a_sibling_still_in_flight(
    fleet: RemoteFleet, tmp_path: Path
) -> None:
    gate = Path(f"{fleet.remote_state('h1')}-first")
    subprocess.run(["rm", "-rf", str(gate)], check=True)
    # the first call to reach the host is held there 8 s before it runs the real vq
    held = f'if mkdir {shlex.quote(str(gate))} 2>/dev/null; then sleep 8; fi; exec REAL "$@"'
    fleet.write_config(h1={"vq_command": _wrapped(fleet, "h1", held)})
    args = ("submit", "h1", "--idempotency-key", "siblings-1", "--job-name", "siblings-1")
    slow = fleet.popen(*args, "--", "true", stderr=tmp_path / "slow.err")
    try:
        wait_until(gate.exists, 30)
        fast = fleet.vq(*args, "--", "true")
        assert slow.poll() is None  # the sibling is still in flight
        assert fast.returncode == 0, fast.stderr
        assert "removed" not in fast.stderr and "outbox" not in fast.stderr, fast.stderr
        assert len(_outbox(fleet)) == 1  # the sibling's own entry, still in flight
        out, _ = slow.communicate(timeout=60)
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
        subprocess.run(["rm", "-rf", str(gate)], check=True)
    assert slow.returncode == 0, (tmp_path / "slow.err").read_text()
    assert out.decode().strip() == fast.stdout.strip()
    assert "removed" not in (tmp_path / "slow.err").read_text()
    assert not _outbox(fleet)
    assert _remote_jobs_named(fleet, "h1", "siblings-1") == [fast.stdout.strip()]
