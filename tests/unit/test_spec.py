"""JobSpec v2 (§3.1, §3.2): round trip, read tolerance, refusal, and the field inventory."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vq.domain.spec import SPEC_VERSION, JobSpec, ProgramRuntimePin, dump_spec, load_spec
from vq.domain.states import JobState
from vq.errors import CorruptSpec, UnsupportedSpecVersion
from vq.store.specs import encode_spec

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "specs"

#: Every top-level field named in §3.2 of the design, group by group.
INVENTORY = {
    # identity and submission
    "spec_version",
    "id",
    "job_name",
    "tags",
    "submitter",
    "workspace_source",
    "submitted_at",
    # payload and captured I/O
    "command",
    "cwd",
    "stdout_path",
    "stderr_path",
    "qvf_artifact_name",
    # resources and admission
    "cpus",
    "scheduler_tasks",
    "mem_mb",
    "wall_time_seconds",
    "priority",
    "not_before",
    # lifecycle and outcome
    "state",
    "started_at",
    "finished_at",
    "exit_code",
    "failure_reason",
    "failure_tail",
    "last_heartbeat_at",
    # local execution, recovery and pause
    "pid",
    "pgid",
    "pid_start_time",
    "workdir",
    "recover_on_reboot",
    "parent_jobid",
    "paused_at",
    "paused_monotonic_at",
    "paused_seconds_total",
    "paused_by",
    # scheduler execution
    "scheduler_target",
    "scheduler_job_id",
    "scheduler_state",
    "scheduler_remote_workspace_cleaned_at",
    "scheduler_exec_host",
    "scheduler_walltime_used",
    "scheduler_walltime_limit",
    "scheduler_queued_reason",
    # dependencies, retries and grouping
    "depends_on",
    "depends_on_any",
    "retry_max",
    "retry_count",
    "array_index",
    "array_total",
    "array_group_id",
    "chain_index",
    "chain_total",
    "chain_group_id",
    "rerun_until_file_exists",
    "rerun_max",
    "rerun_count",
    # runtime and build provenance
    "branch",
    "program",
    "program_runtime_pin",
    "refresh_before",
    "build_env",
    # cleanup and observation
    "clean_workdir_on_terminal",
    "workdir_swept_at",
    "last_status_at",
    "last_fetched_at",
    "archived_at",
    "archive_path",
    # vibe-qc output hints
    "expected_outputs",
    "output_stem",
    "last_output_status",
}

SCHEDULER_FIELDS = [name for name in INVENTORY if name.startswith("scheduler_")]
LOCAL_PID_FIELDS = ["pid", "pgid", "pid_start_time"]
DATETIME_FIELDS = [
    "submitted_at",
    "not_before",
    "started_at",
    "finished_at",
    "last_heartbeat_at",
    "paused_at",
    "scheduler_remote_workspace_cleaned_at",
    "workdir_swept_at",
    "last_status_at",
    "last_fetched_at",
    "archived_at",
]

MINIMAL: dict[str, Any] = {
    "id": "0123456789ab",
    "submitted_at": "2025-01-01T00:00:00Z",
    "command": ["true"],
    "cpus": 1,
}


def minimal(**changes: Any) -> dict[str, Any]:
    data = dict(MINIMAL)
    data.update(changes)
    return data


# --- the inventory ----------------------------------------------------------------------
def test_inventory_has_the_expected_size() -> None:
    assert len(INVENTORY) == 70  # guards the hand-written list itself


@pytest.mark.parametrize("name", sorted(INVENTORY))
def test_every_inventory_field_is_in_the_model(name: str) -> None:
    assert name in JobSpec.model_fields


#: Optional v2 fields added after the §3.2 inventory, each documented in docs/jobspec.md.
ADDITIVE = {
    "array_value",
    "array_max_parallel",
    "retry_backoff_seconds",
    "idempotency_key_hash",
    "idempotency_intent_digest",
    "cpu_affinity",
    "launch_attempt",
    "runtime_generation",
    "scheduler_pack",
    "scheduler_pack_id",
    "scheduler_pack_slot",
    "watchdog_evidence",
    "scheduler_started_at",
}


def test_model_has_no_fields_outside_the_inventory_and_documented_additions() -> None:
    assert set(JobSpec.model_fields) - INVENTORY == ADDITIVE
    documented = (Path(__file__).parent.parent.parent / "docs" / "jobspec.md").read_text()
    for name in ADDITIVE:
        assert f"`{name}`" in documented, name
        assert not JobSpec.model_fields[name].is_required()


def test_packed_element_fields_round_trip_and_default_to_not_packed() -> None:
    assert (JobSpec.model_validate(minimal()).scheduler_pack_id) is None
    packed = load_spec(
        minimal(scheduler_pack="cpu8", scheduler_pack_id="0123456789abcdef", scheduler_pack_slot=3)
    )
    assert load_spec(dump_spec(packed)) == packed
    assert (packed.scheduler_pack, packed.scheduler_pack_slot) == ("cpu8", 3)


@pytest.mark.parametrize(
    "changes",
    [
        {"scheduler_pack_id": "0123456789ABCDEF"},
        {"scheduler_pack_id": "0123456789abcdef\n"},
        {"scheduler_pack_id": "0123"},
        {"scheduler_pack_slot": -1},
        {"scheduler_pack": "-cpu"},
        {"scheduler_pack": "cpu 8"},
    ],
)
def test_malformed_packed_element_fields_are_corrupt(changes: dict[str, Any]) -> None:
    with pytest.raises(CorruptSpec, match="scheduler_pack"):
        load_spec(minimal(**changes))


def test_only_identity_time_command_and_cpus_are_required() -> None:
    required = {name for name, info in JobSpec.model_fields.items() if info.is_required()}
    assert required == {"id", "submitted_at", "command", "cpus"}


def test_fresh_spec_defaults() -> None:
    spec = JobSpec.model_validate(MINIMAL)
    assert spec.spec_version == SPEC_VERSION == 2
    assert spec.state is JobState.PENDING
    assert spec.tags == []
    assert spec.stdout_path == "stdout.log"
    assert spec.stderr_path == "stderr.log"
    assert spec.priority == 0
    assert spec.retry_max == 0
    assert spec.retry_count == 0
    assert spec.rerun_count == 0
    assert spec.paused_seconds_total == 0.0
    assert spec.recover_on_reboot is False
    assert spec.depends_on == []
    assert spec.depends_on_any == []
    assert spec.expected_outputs == []
    for name in SCHEDULER_FIELDS + LOCAL_PID_FIELDS:
        assert getattr(spec, name) is None, name


def test_default_lists_are_not_shared() -> None:
    a = JobSpec.model_validate(MINIMAL)
    b = JobSpec.model_validate(MINIMAL)
    a.tags.append("x")
    a.depends_on.append("0123456789ab")
    assert b.tags == []
    assert b.depends_on == []


# --- round trip -------------------------------------------------------------------------
def full_spec() -> JobSpec:
    t = datetime(2025, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)
    return JobSpec.model_validate(
        {
            **MINIMAL,
            "job_name": "n",
            "tags": ["a", "b"],
            "submitter": "alice",
            "submitted_at": t,
            "command": ["python", "-c", "print('hi ✓')"],
            "cpus": 3,
            "mem_mb": 512,
            "wall_time_seconds": 60,
            "priority": -3,
            "not_before": t + timedelta(minutes=1),
            "state": JobState.SUSPENDED,
            "started_at": t + timedelta(minutes=2),
            "pid": 10,
            "pgid": 10,
            "pid_start_time": 99,
            "paused_at": t + timedelta(minutes=3),
            "paused_monotonic_at": 1234.5678,
            "paused_seconds_total": 0.1,
            "paused_by": "operator",
            "depends_on": ["aaaaaaaaaaaa"],
            "retry_max": 3,
            "retry_count": 2,
            "program_runtime_pin": {"program": "vibe-qc", "enforce_git_sha": True},
            "build_env": {"A": "1"},
            "archived_at": t + timedelta(days=1),
            "expected_outputs": ["out.json"],
        }
    )


def test_round_trip_through_store_encoding() -> None:
    spec = full_spec()
    data = encode_spec(spec)
    assert data.endswith(b"\n")
    back = load_spec(data)
    assert back == spec
    assert encode_spec(back) == data  # stable bytes
    assert isinstance(back.program_runtime_pin, ProgramRuntimePin)
    assert back.program_runtime_pin.enforce_git_sha is True


def test_round_trip_through_dump_spec_dict() -> None:
    spec = full_spec()
    dumped = dump_spec(spec)
    json.dumps(dumped)  # JSON-safe
    assert dumped["state"] == "SUSPENDED"
    assert load_spec(dumped) == spec


_AWARE = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)


@st.composite
def specs(draw: st.DrawFn) -> JobSpec:
    return JobSpec(
        id=draw(st.text("0123456789abcdef", min_size=12, max_size=12)),
        submitted_at=draw(_AWARE),
        command=draw(st.lists(st.text(min_size=1), min_size=1, max_size=4)),
        cpus=draw(st.integers(1, 4096)),
        mem_mb=draw(st.none() | st.integers(1, 10**7)),
        priority=draw(st.integers(-1000, 1000)),
        tags=draw(st.lists(st.text(max_size=8), max_size=3)),
        job_name=draw(st.none() | st.text(max_size=20)),
        state=draw(st.sampled_from(list(JobState))),
        started_at=draw(st.none() | _AWARE),
        exit_code=draw(st.none() | st.integers(-255, 255)),
        failure_tail=draw(st.none() | st.text(max_size=50)),
        paused_seconds_total=draw(st.floats(0, 1e9, allow_nan=False)),
        retry_count=draw(st.integers(0, 100)),
        build_env=draw(st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5))),
    )


@settings(max_examples=150, deadline=None)
@given(specs())
def test_round_trip_property(spec: JobSpec) -> None:
    assert load_spec(encode_spec(spec)) == spec
    assert load_spec(dump_spec(spec)) == spec


# --- read tolerance ---------------------------------------------------------------------
def test_unknown_fields_are_ignored_and_not_preserved() -> None:
    spec = load_spec(json.dumps(minimal(some_future_field={"x": 1}, another=[1, 2])))
    assert spec.id == "0123456789ab"
    dumped = dump_spec(spec)
    assert "some_future_field" not in dumped
    assert "another" not in dumped
    assert b"some_future_field" not in encode_spec(spec)


def test_v1_spec_loads_with_defaults() -> None:
    raw = {
        "id": "a1b2c3d4e5f6",
        "submitted_at": "2023-05-01T10:00:00",
        "command": ["sleep", "1"],
        "cpus": 2,
        "state": "running",
    }
    spec = load_spec(json.dumps(raw))
    assert spec.spec_version == 2
    assert spec.state is JobState.RUNNING
    assert spec.submitted_at == datetime(2023, 5, 1, 10, 0, tzinfo=UTC)
    assert spec.tags == []
    assert spec.retry_max == 0
    assert spec.stdout_path == "stdout.log"
    assert encode_spec(spec).count(b'"spec_version": 2') == 1


@pytest.mark.parametrize("state", ["pending", "completed", "interrupted", "Killed"])
def test_state_names_are_read_in_any_case(state: str) -> None:
    assert load_spec(minimal(state=state)).state is JobState(state.upper())


def test_interrupted_legacy_state_is_readable() -> None:
    spec = load_spec(minimal(state="INTERRUPTED"))
    assert spec.state is JobState.INTERRUPTED
    assert spec.is_terminal


def test_explicit_older_spec_version_is_upgraded_in_memory() -> None:
    assert load_spec(minimal(spec_version=1)).spec_version == 2


@pytest.mark.parametrize("version", [3, 4, 100])
def test_newer_spec_version_refused(version: int) -> None:
    with pytest.raises(UnsupportedSpecVersion) as info:
        load_spec(json.dumps(minimal(spec_version=version)), source="spec x.json")
    err = info.value
    assert isinstance(err, CorruptSpec)
    assert err.exit_code == 7
    assert err.reference == "unsupported-spec-version"
    assert f"spec_version {version}" in err.message
    assert "x.json" in err.message
    assert err.hint is not None


def test_naive_times_become_utc() -> None:
    spec = load_spec(minimal(submitted_at="2024-01-01T00:00:00", started_at="2024-01-01T00:01:00"))
    assert spec.submitted_at.tzinfo is not None
    assert spec.submitted_at.utcoffset() == timedelta(0)
    assert spec.started_at is not None
    assert spec.started_at.utcoffset() == timedelta(0)


def test_every_datetime_field_loads_timezone_aware() -> None:
    naive = "2024-01-01T00:00:00"
    spec = load_spec(minimal(**dict.fromkeys(DATETIME_FIELDS, naive)))
    naive_fields = [name for name in DATETIME_FIELDS if getattr(spec, name).tzinfo is None]
    assert naive_fields == []


# --- refusal ----------------------------------------------------------------------------
CORRUPT: list[tuple[str, bytes | str | dict[str, Any]]] = [
    ("garbage bytes", b"\x00\xff\xfe not json at all"),
    ("invalid utf-8 in a string", b'{"id": "\xff\xfe"}'),
    ("empty file", b""),
    ("truncated JSON", json.dumps(MINIMAL)[:-10]),
    ("JSON array", json.dumps([MINIMAL])),
    ("JSON string", json.dumps("spec")),
    ("JSON null", b"null"),
    ("bad id (uppercase)", json.dumps(minimal(id="0123456789AB"))),
    ("bad id (short)", json.dumps(minimal(id="0123"))),
    ("bad id (path)", json.dumps(minimal(id="../../../etc"))),
    ("empty command", json.dumps(minimal(command=[]))),
    ("empty program", json.dumps(minimal(command=["", "arg"]))),
    ("cpus 0", json.dumps(minimal(cpus=0))),
    ("cpus missing", json.dumps({k: v for k, v in MINIMAL.items() if k != "cpus"})),
    ("submitted_at missing", json.dumps({k: v for k, v in MINIMAL.items() if k != "submitted_at"})),
    ("bad timestamp", json.dumps(minimal(submitted_at="yesterday"))),
    ("unknown state", json.dumps(minimal(state="LOST"))),
    ("negative retry_count", json.dumps(minimal(retry_count=-1))),
    ("string spec_version", json.dumps(minimal(spec_version="2"))),
    ("bool spec_version", json.dumps(minimal(spec_version=True))),
    ("dict input, bad cpus", minimal(cpus=-4)),
]


@pytest.mark.parametrize(("label", "data"), CORRUPT, ids=[c[0] for c in CORRUPT])
def test_corrupt_specs_are_refused(label: str, data: bytes | str | dict[str, Any]) -> None:
    with pytest.raises(CorruptSpec) as info:
        load_spec(data, source="spec q.json")
    err = info.value
    assert type(err) is CorruptSpec, label  # not the newer-version subclass
    assert err.exit_code == 7
    assert err.reference == "corrupt-spec"
    assert "q.json" in err.message


def test_invalid_field_is_named_in_message() -> None:
    with pytest.raises(CorruptSpec, match="cpus"):
        load_spec(json.dumps(minimal(cpus=0)))


def test_id_with_trailing_newline_is_refused() -> None:
    with pytest.raises(CorruptSpec):
        load_spec(json.dumps(minimal(id="0123456789ab\n")))


@given(st.binary(max_size=200))
def test_arbitrary_bytes_load_or_raise_corrupt_spec(data: bytes) -> None:
    try:
        spec = load_spec(data)
    except CorruptSpec:
        return
    assert spec.spec_version == SPEC_VERSION


# --- checked-in fixtures ----------------------------------------------------------------
def read_fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_fixture_v1_running() -> None:
    raw = json.loads(read_fixture("v1_running.json"))
    assert "spec_version" not in raw
    assert raw["state"] == "running"
    spec = load_spec(read_fixture("v1_running.json"), source="v1_running.json")
    assert spec.spec_version == 2
    assert spec.id == "a1b2c3d4e5f6"
    assert spec.state is JobState.RUNNING
    assert spec.command == ["python", "run.py", "--steps", "10"]
    assert spec.cpus == 2
    assert spec.submitted_at == datetime(2023, 5, 1, 10, 0, tzinfo=UTC)
    assert spec.mem_mb is None
    assert spec.pid is None
    assert spec.retry_max == 0


def test_fixture_v2_completed() -> None:
    spec = load_spec(read_fixture("v2_completed.json"))
    assert spec.state is JobState.COMPLETED
    assert spec.is_terminal
    assert spec.exit_code == 0
    assert spec.finished_at == datetime(2025, 3, 1, 8, 30, tzinfo=UTC)
    assert spec.paused_seconds_total == 12.5
    assert spec.depends_on == ["a1b2c3d4e5f6"]
    assert spec.program_runtime_pin is not None
    assert spec.program_runtime_pin.git_sha == "deadbeef"
    assert spec.build_env == {"OMP_NUM_THREADS": "4"}
    dumped = dump_spec(spec)
    assert "a_field_from_a_later_v2_build" not in dumped
    assert "some_future_pin_key" not in dumped["program_runtime_pin"]
    assert load_spec(encode_spec(spec)) == spec


def test_fixture_v3_future_is_refused() -> None:
    with pytest.raises(UnsupportedSpecVersion, match="spec_version 3") as info:
        load_spec(read_fixture("v3_future.json"), source="v3_future.json")
    assert info.value.exit_code == 7


def test_fixture_truncated_is_corrupt() -> None:
    data = read_fixture("truncated.json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(data)  # the fixture really is truncated
    with pytest.raises(CorruptSpec, match="not valid JSON") as info:
        load_spec(data, source="truncated.json")
    assert type(info.value) is CorruptSpec


def test_deeply_nested_json_is_corrupt_spec() -> None:
    with pytest.raises(CorruptSpec):
        load_spec(b"[" * 100_000)
