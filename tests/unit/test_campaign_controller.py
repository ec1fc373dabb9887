"""The controller's passes with an in-memory host (injected through the host seam)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.campaign_support import raw
from vq.campaign.controller import Controller, not_accepted
from vq.campaign.files import LoadedCampaign, read_campaign
from vq.campaign.hosts import Observation, SubmitRequest
from vq.campaign.rundir import RunDir
from vq.errors import (
    CommandTimeout,
    Conflict,
    InvalidInput,
    OutcomeUnknown,
    RemoteCommandFailed,
    RemoteProtocolError,
    SshUnreachable,
    VqError,
)


class MemoryHost:
    """A queue that keeps each job's workspace in a directory; keyed submissions are
    idempotent, as the real queue's are."""

    name = "localhost"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.by_key: dict[str, str] = {}
        self.states: dict[str, str] = {}
        self.requests: list[SubmitRequest] = []
        self.refuse: Exception | None = None
        self.observe_error: Exception | None = None
        self.listings: list[str] = []

    def submit(self, request: SubmitRequest) -> str:
        if self.refuse is not None:
            raise self.refuse
        self.requests.append(request)
        if request.key not in self.by_key:
            job_id = f"{len(self.by_key) + 1:012x}"
            self.by_key[request.key] = job_id
            shutil.copytree(request.payload, self.root / job_id)
            self.states[job_id] = "PENDING"
        return self.by_key[request.key]

    def observe(self, job_ids: Sequence[str], name_hint: str) -> dict[str, Observation]:
        if self.observe_error is not None:
            raise self.observe_error
        self.listings.append(name_hint)
        return {
            job_id: Observation(
                self.states[job_id], None, None, None, self.states[job_id] != "PENDING"
            )
            for job_id in job_ids
            if job_id in self.states
        }

    def runtime(self, job_id: str, seen: Observation) -> dict[str, Any] | None:
        return {"program": "vibe-qc", "version": "1.4"} if seen.started else None

    def close(self) -> None:
        return None

    def fetch(self, job_id: str, dest: Path) -> list[dict[str, str]]:
        shutil.copytree(self.root / job_id, dest)
        return []

    def finish(self, job_id: str, files: dict[str, str], state: str = "COMPLETED") -> None:
        for rel, text in files.items():
            (self.root / job_id / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.root / job_id / rel).write_text(text)
        self.states[job_id] = state


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedCampaign:
    data = raw()
    for item in data["nodes"]:
        item.pop("host", None)
    data["nodes"][0]["program"] = "vibe-qc"
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(data))
    return read_campaign(path)


@pytest.fixture
def host(tmp_path: Path) -> MemoryHost:
    (tmp_path / "queue").mkdir()
    return MemoryHost(tmp_path / "queue")


def controller(loaded: LoadedCampaign, tmp_path: Path, host: MemoryHost) -> Controller:
    run_dir = RunDir(tmp_path / "run")
    run_dir.root.mkdir(exist_ok=True)
    lines: list[str] = []
    return Controller(
        loaded, run_dir, lambda _name: host, lambda: "2026-01-01T00:00:00", lines.append
    )


def states(ctl: Controller) -> dict[str, str]:
    return {a.node: a.state for a in ctl.journal.attempts}


def test_a_pass_submits_ready_nodes_and_an_idle_pass_changes_nothing(
    loaded: LoadedCampaign, tmp_path: Path, host: MemoryHost
) -> None:
    ctl = controller(loaded, tmp_path, host)
    first = ctl.run_pass()
    assert first.changed and first.in_flight
    assert states(ctl) == {"calculate": "accepted"}
    assert host.requests[0].job_name == "h2o-pipeline.calculate.a1"
    assert host.requests[0].key == ctl.journal.attempts[0].key
    stored = json.loads((tmp_path / "run" / "journal.json").read_text())
    assert stored["attempts"][0]["job_id"] == "000000000001"
    idle = ctl.run_pass()
    assert not idle.changed and idle.in_flight
    host.states["000000000001"] = "RUNNING"
    assert ctl.run_pass().changed
    assert ctl.journal.attempts[0].runtime == {"program": "vibe-qc", "version": "1.4"}
    host.states["000000000001"] = "PENDING"  # resumed: never moved backwards
    ctl.run_pass()
    assert states(ctl) == {"calculate": "running"}
    assert host.listings == ["h2o-pipeline."] * 3  # one listing per host and pass


def test_a_verified_output_is_staged_into_its_consumers(
    loaded: LoadedCampaign, tmp_path: Path, host: MemoryHost
) -> None:
    ctl = controller(loaded, tmp_path, host)
    ctl.run_pass()
    host.finish("000000000001", {"out/energy.txt": "-76.02\n"})
    ctl.run_pass()
    assert states(ctl) == {"calculate": "succeeded", "validate": "accepted", "cleanup": "accepted"}
    record = ctl.journal.attempts[0].outputs[0]
    assert (record.name, record.status) == ("result", "verified")
    artifact = tmp_path / "run" / "artifacts" / "calculate" / "1"
    assert (artifact / "result" / "energy.txt").read_text() == "-76.02\n"
    manifest = json.loads((artifact / "result.manifest.json").read_text())
    assert manifest["executed_runtime"] == {"program": "vibe-qc", "version": "1.4"}
    staged = tmp_path / "queue" / "000000000002" / "in" / "energy.txt"
    assert staged.read_text() == "-76.02\n"
    assert not (tmp_path / "run" / "incoming" / "calculate" / "1").exists()
    validate = next(a for a in ctl.journal.attempts if a.node == "validate")
    assert validate.inputs[0].manifest_sha256 == record.manifest_sha256


def test_a_lost_job_is_reported_and_a_transport_failure_retried(
    loaded: LoadedCampaign, tmp_path: Path, host: MemoryHost
) -> None:
    ctl = controller(loaded, tmp_path, host)
    ctl.run_pass()
    del host.states["000000000001"]  # the queue no longer lists it
    lost = ctl.run_pass()
    assert not lost.retry_later and "unknown on localhost" in lost.problems[0]
    host.observe_error = OSError("connection reset")
    flaky = ctl.run_pass()
    assert flaky.retry_later and "cannot observe" in flaky.problems[0]
    assert states(ctl) == {"calculate": "accepted"}


def test_a_refused_submission_stays_submitting_and_is_resent_under_its_key(
    loaded: LoadedCampaign, tmp_path: Path, host: MemoryHost
) -> None:
    ctl = controller(loaded, tmp_path, host)
    host.refuse = Conflict("idempotency key already used for a different submission")
    refused = ctl.run_pass()
    assert states(ctl) == {"calculate": "submitting"}
    assert "submission refused, left submitting" in refused.problems[0]
    key = ctl.journal.attempts[0].key
    host.refuse = None
    ctl.run_pass()
    assert states(ctl) == {"calculate": "accepted"}
    assert [r.key for r in host.requests] == [key]


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (OutcomeUnknown("the submit to host h1 may or may not have been accepted"), "unknown"),
        (RemoteProtocolError("the command started but its end was not seen"), "unknown"),
        (RemoteCommandFailed("on host h1: vq exited with status 0"), "unknown"),
        (CommandTimeout("the command timed out"), "unknown"),
        (SshUnreachable("cannot reach vq-h1 over SSH"), "did not reach the queue"),
        (Conflict("idempotency key already used"), "refused"),
        (InvalidInput("on h1: --cpus 64 exceeds the host"), "refused"),
    ],
)
def test_only_the_queue_s_own_answer_is_logged_as_a_refusal(error: VqError, said: str) -> None:
    line = not_accepted(error)
    assert said in line and str(error) in line and "left submitting" in line
    assert ("refused" in line) == (said == "refused")


def test_a_changed_payload_is_never_resent(
    loaded: LoadedCampaign, tmp_path: Path, host: MemoryHost
) -> None:
    ctl = controller(loaded, tmp_path, host)
    ctl.run_pass()
    host.finish("000000000001", {"out/energy.txt": "-76.02\n"})
    host.refuse = OSError("host unreachable")
    ctl.run_pass()
    assert states(ctl)["validate"] == "submitting"
    payload = tmp_path / "run" / "payloads" / "validate" / "1" / "in" / "energy.txt"
    payload.write_text("-99.99\n")
    host.refuse = None
    result = ctl.run_pass()
    assert states(ctl)["validate"] == "submitting"
    assert any("no longer matches" in line and "not sent" in line for line in result.problems)
    assert all("validate" not in r.job_name for r in host.requests)


def test_a_missing_output_blocks_consumers(
    loaded: LoadedCampaign, tmp_path: Path, host: MemoryHost
) -> None:
    ctl = controller(loaded, tmp_path, host)
    ctl.run_pass()
    host.finish("000000000001", {"stdout.log": ""})
    result = ctl.run_pass()
    assert ctl.journal.attempts[0].outputs[0].status == "missing"
    assert any("output result missing" in line for line in result.problems)
    assert states(ctl) == {"calculate": "succeeded", "cleanup": "accepted"}
    assert ctl.plan().node("validate").status == "blocked"


def test_an_attempt_that_ran_another_generation_publishes_nothing(
    tmp_path: Path, host: MemoryHost
) -> None:
    data = raw()
    data["nodes"][0].update(runtime_digest="d" * 64, runtime_root="/opt/runtimes/qc")
    (tmp_path / "bound.json").write_text(json.dumps(data))
    ctl = controller(read_campaign(tmp_path / "bound.json"), tmp_path, host)
    ctl.run_pass()
    assert host.requests[0].fields()["runtime_artifact"] == "d" * 64
    assert host.requests[0].fields()["runtime_root"] == "/opt/runtimes/qc"
    host.finish("000000000001", {"out/energy.txt": "-76.02\n"})
    result = ctl.run_pass()  # the host records a program pin but no generation
    assert any("records no runtime generation" in p for p in result.problems)
    # its consumers stay unsubmitted; only the completion edge (cleanup) moves on
    assert states(ctl) == {"calculate": "succeeded", "cleanup": "accepted"}
    assert ctl.journal.attempts[0].outputs == []
    assert not (tmp_path / "run" / "artifacts").exists()
