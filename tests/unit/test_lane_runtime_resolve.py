"""The resolution order of a lane job's managed runtime (§3.4), pure: an explicitly bound
generation, then an immutable wrapper in argv, then the lane's program registry, then
its last verified deployment record; the first that applies decides, one that applies
but fails refuses, and with none the submit is refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from vq.config.hosts import HostSettings, LaneProgramSettings
from vq.config.programs import VenvProgram
from vq.errors import InvalidInput
from vq.services.lane_runtime import LaneRuntime, is_managed, resolve, wrapper_generation
from vq.services.lane_runtime_probe import ProbedRuntime, TargetUnavailable, parse_probe
from vq.services.runtime_deployments import DeploymentRecord, UnreadableRecord

DIGEST = "ab" * 32
OTHER = "cd" * 32
SHA = "1f" * 20
ENTRY = LaneProgramSettings(python="/opt/fit/bin/python", git_dir="/opt/fit/src")
PROBED = ProbedRuntime(SHA, "python 3.11.2")
RECORD = DeploymentRecord(
    lane="cluster",
    program="fit",
    root="/shared/rt",
    digest=DIGEST,
    version="2.1.0",
    git_sha=SHA,
    deployed_at="2026-12-04T01:00:00+00:00",
    verified_at="2026-12-04T01:00:00+00:00",
)


class Calls:
    """The record and probe ports, counting their calls."""

    def __init__(
        self,
        record: DeploymentRecord | Exception | None = None,
        probed: ProbedRuntime | Exception = PROBED,
    ) -> None:
        self.records = 0
        self.probes: list[LaneProgramSettings] = []
        self._record, self._probed = record, probed

    def record(self) -> DeploymentRecord | None:
        self.records += 1
        if isinstance(self._record, Exception):
            raise self._record
        return self._record

    def probe(self, entry: LaneProgramSettings) -> ProbedRuntime:
        self.probes.append(entry)
        if isinstance(self._probed, Exception):
            raise self._probed
        return self._probed


def _resolve(
    calls: Calls,
    command: list[str] | None = None,
    *,
    bound: tuple[str, str] | None = None,
    registered: LaneProgramSettings | None = None,
    expected_sha: str | None = None,
) -> LaneRuntime:
    record: Callable[[], DeploymentRecord | None] = calls.record
    return resolve(
        "fit",
        "cluster",
        command or ["run"],
        bound=bound,
        registered=registered,
        record=record,
        probe=calls.probe,
        expected_sha=expected_sha,
    )


def test_a_bound_generation_comes_first_and_asks_the_lane_nothing() -> None:
    calls = Calls(record=RECORD)
    got = _resolve(calls, bound=("/opt/rt", DIGEST), registered=ENTRY)
    assert got.generation == {"root": "/opt/rt", "digest": DIGEST}
    assert (got.pin.scheduler_host, got.pin.artifact_identity) == ("cluster", DIGEST)
    assert got.pin.target_source == "bound" and calls.probes == []
    # the record of that very generation labels it with its version and commit
    assert (got.pin.version, got.pin.git_sha) == ("2.1.0", SHA)


def test_an_immutable_wrapper_in_argv_beats_the_registry_and_the_record() -> None:
    calls = Calls(record=RECORD)
    python = f"/cluster/rt/generations/{OTHER}/payload/bin/python"
    got = _resolve(calls, [python, "run.py"], registered=ENTRY)
    assert got.pin.target_source == "argv_wrapper" and calls.probes == []
    assert got.generation == {"root": "/cluster/rt", "digest": OTHER}
    assert (got.pin.artifact_identity, got.pin.executable) == (OTHER, python)
    assert got.pin.version is None and got.pin.git_sha is None  # the record is of another
    labelled = _resolve(Calls(record=RECORD), [f"/x/generations/{DIGEST}/payload/run"])
    assert (labelled.pin.version, labelled.pin.git_sha) == ("2.1.0", SHA)


@pytest.mark.parametrize(
    "first",
    [
        f"generations/{DIGEST}/payload/bin/python",  # relative
        f"/rt/generations/{DIGEST[:12]}/payload/bin/python",  # not a digest
        f"/rt/generations/{DIGEST}/payload/",  # no file
        f"/rt/generations/{DIGEST}/bin/python",  # outside the payload
        f"/rt/../etc/generations/{DIGEST}/payload/x",  # a parent step
        f"/generations/{DIGEST}/payload/x",  # no root
        "/opt/fit/bin/python",
    ],
)
def test_what_is_not_an_immutable_wrapper(first: str) -> None:
    assert wrapper_generation([first]) is None
    assert wrapper_generation([]) is None


def test_the_registry_is_resolved_over_the_probe_and_records_the_target_identity() -> None:
    calls = Calls(record=RECORD)
    got = _resolve(calls, registered=ENTRY)
    assert calls.probes == [ENTRY] and calls.records == 0  # the record is not reached
    pin = got.pin
    assert got.generation is None and pin.target_source == "target_registry"
    assert (pin.scheduler_host, pin.executable, pin.git_dir) == (
        "cluster",
        "/opt/fit/bin/python",
        "/opt/fit/src",
    )
    assert (pin.git_sha, pin.version) == (SHA, "python 3.11.2")
    # provenance only: a later commit may run, so it is not claimed as what ran
    assert pin.resolved_git_sha is None and not pin.enforce_git_sha


def test_an_unresolvable_registry_entry_refuses_and_never_falls_back_to_the_record() -> None:
    calls = Calls(record=RECORD, probed=TargetUnavailable("its python /x is missing there"))
    with pytest.raises(InvalidInput) as caught:
        _resolve(calls, registered=ENTRY)
    assert "cannot be resolved on scheduler lane 'cluster': its python /x" in caught.value.message
    assert "[hosts.cluster.scheduler_programs.fit]" in (caught.value.hint or "")
    assert calls.records == 0


def test_the_configured_expected_commit_is_enforced() -> None:
    entry = ENTRY.model_copy(update={"expected_git_sha": "dead"})
    with pytest.raises(InvalidInput, match="not the configured expected_git_sha dead"):
        _resolve(Calls(), registered=entry)
    pinned = _resolve(Calls(), registered=ENTRY.model_copy(update={"expected_git_sha": "1f1f"}))
    assert pinned.pin.enforce_git_sha and pinned.pin.resolved_git_sha == SHA


def test_the_last_verified_deployment_record_is_the_last_source() -> None:
    got = _resolve(Calls(record=RECORD))
    assert got.pin.target_source == "deployment_record"
    assert got.generation == {"root": "/shared/rt", "digest": DIGEST}
    assert (got.pin.artifact_identity, got.pin.version, got.pin.git_sha) == (DIGEST, "2.1.0", SHA)
    assert got.pin.executable == f"/shared/rt/generations/{DIGEST}/payload"


def test_an_unusable_record_or_none_at_all_refuses() -> None:
    with pytest.raises(InvalidInput, match="deployment record is unusable: it is torn"):
        _resolve(Calls(record=UnreadableRecord("it is torn")))
    with pytest.raises(InvalidInput) as caught:
        _resolve(Calls(record=None))
    assert "cannot be resolved here: the driver's own checkout is not the cluster's" in (
        caught.value.message
    )
    hint = caught.value.hint or ""
    assert "scheduler_programs.fit" in hint and "--lane cluster --program fit" in hint


def test_expected_sha_is_checked_against_the_target_commit() -> None:
    enforced = _resolve(Calls(), registered=ENTRY, expected_sha="1F1F").pin
    assert enforced.enforce_git_sha and enforced.resolved_git_sha == SHA
    with pytest.raises(InvalidInput, match=r"is at commit 1f1f.*not the expected beef"):
        _resolve(Calls(), registered=ENTRY, expected_sha="beef")
    unlabelled = DeploymentRecord(**{**RECORD.__dict__, "git_sha": None})
    with pytest.raises(InvalidInput, match="cannot be checked for scheduler lane 'cluster'"):
        _resolve(Calls(record=unlabelled), expected_sha="beef")


def test_managed_means_a_driver_venv_or_a_lane_registry_entry() -> None:
    lane = HostSettings.model_validate(
        {
            "ssh": "login",
            "scheduler_dialect": "slurm",
            "scratch_root": "/scratch",
            "scheduler_programs": {"fit": {"python": "/p", "git_dir": "/g"}},
        }
    ).lane("cluster")
    venv = VenvProgram(kind="venv", python="/usr/bin/python3", git_dir="/src")
    assert is_managed({}, "fit", lane) and not is_managed({}, "other", lane)
    assert is_managed({"other": venv}, "other", None) and not is_managed({}, "fit", None)


@pytest.mark.parametrize(
    ("rc", "out", "why"),
    [
        (0, b"python=missing\n", "its python /opt/fit/bin/python is not an executable"),
        (0, b"git_dir=missing\n", "its checkout /opt/fit/src is not a directory"),
        (0, b"git_sha=unreadable\nversion=python 3.11.2\n", "the commit of /opt/fit/src"),
        (0, b"git_sha=" + SHA.encode() + b"\nversion=unreadable\n", "the version of /opt"),
        (255, b"", "gave no answer (exit code 255)"),
        (0, b"garbage\n", "gave no answer"),
    ],
)
def test_a_probe_answer_that_names_no_identity_is_unavailable(
    rc: int, out: bytes, why: str
) -> None:
    with pytest.raises(TargetUnavailable, match=why.replace("(", r"\(").replace(")", r"\)")):
        parse_probe(ENTRY, rc, out)


def test_a_probe_answer() -> None:
    answer = b"git_sha=" + SHA.upper().encode() + b"\nversion=2.0.9\n"
    assert parse_probe(ENTRY, 0, answer) == ProbedRuntime(SHA, "2.0.9")
