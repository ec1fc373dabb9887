"""JobSpec v2: the versioned, mutable on-disk lifecycle record of one job (§3.1, §3.2).

Read tolerance (§1.2 item 7): unknown fields are ignored, fields missing from older
versions take their defaults, and a ``spec_version`` newer than :data:`SPEC_VERSION` is
refused with :class:`~vq.errors.UnsupportedSpecVersion`. Rewriting a spec emits the
current model, so ignored unknown fields are not preserved.

The model carries the *whole* §3.2 field inventory so later features add behaviour, not
schema. Scheduler fields stay ``None`` on the local path and the local PID fields stay
``None`` on the scheduler path (§1.2 item 1).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from vq.domain.states import JobState
from vq.domain.validation_words import JSON_WORDS, first_problem
from vq.errors import CorruptSpec, UnsupportedSpecVersion

__all__ = [
    "SPEC_VERSION",
    "JobSpec",
    "ProgramRuntimePin",
    "RuntimeGeneration",
    "SpecFields",
    "WatchdogEvidence",
    "dump_spec",
    "load_spec",
    "utcnow",
]

#: The schema version this build writes. Readers refuse anything newer.
SPEC_VERSION = 2

JOB_ID_RE = re.compile(r"[0-9a-f]{12}")


def utcnow() -> datetime:
    """The current time as an aware UTC datetime (the only clock format in specs)."""
    return datetime.now(UTC)


class SpecFields(TypedDict, total=False):
    """The :class:`JobSpec` field values a submission decides, by field name, before
    the spec validates them (:mod:`vq.services.submit` builds them)."""

    id: str
    cwd: str
    job_name: str | None
    submitter: str | None
    tags: list[str]
    workspace_source: str | None
    command: list[str]
    cpus: int
    mem_mb: int | None
    wall_time_seconds: int | None
    priority: int
    not_before: datetime | None
    retry_max: int
    retry_backoff_seconds: int | None
    rerun_until_file_exists: str | None
    rerun_max: int | None
    clean_workdir_on_terminal: bool
    recover_on_reboot: bool
    scheduler_target: str | None
    scheduler_pack: str | None
    runtime_generation: dict[str, str] | None
    program: str
    #: the pin as :meth:`ProgramRuntimePin.model_dump` gives it
    program_runtime_pin: dict[str, Any]
    submitted_at: datetime
    depends_on: list[str]
    depends_on_any: list[str]
    chain_index: int
    chain_total: int
    chain_group_id: str
    array_index: int
    array_total: int
    array_group_id: str
    array_value: str | None
    array_max_parallel: int | None
    idempotency_key_hash: str
    idempotency_intent_digest: str | None


class RuntimeGeneration(BaseModel):
    """The runtime generation a job is bound to (``vq submit --runtime-root ROOT
    --runtime-artifact DIGEST``): ``ROOT/generations/DIGEST/payload`` is what it runs."""

    model_config = ConfigDict(extra="ignore")

    root: str
    digest: str


class ProgramRuntimePin(BaseModel):
    """Runtime identity captured at submit and completed at dispatch (§3.4)."""

    model_config = ConfigDict(extra="ignore")

    program: str | None = None
    kind: str | None = None
    executable: str | None = None
    python: str | None = None
    git_dir: str | None = None
    branch: str | None = None
    git_sha: str | None = None
    enforce_git_sha: bool = False
    expected_import_version: str | None = None
    import_version: str | None = None
    resolved_git_sha: str | None = None
    scheduler_host: str | None = None
    version: str | None = None
    #: a lane job's target identity: the digest of the runtime generation it is bound to
    artifact_identity: str | None = None
    #: where a lane job's identity was resolved (§3.4): ``bound``, ``argv_wrapper``,
    #: ``target_registry`` or ``deployment_record``
    target_source: str | None = None


class WatchdogEvidence(BaseModel):
    """What the watchdog's verdict saw (:class:`vq.domain.watchdog.Evidence`), kept on
    the spec when it ends the job: the reading that fired and its limit (``rss_mb`` over
    ``limit_mb`` for a memory kill, ``active_seconds`` over ``limit_seconds`` for wall
    time, ``cpu_percent`` over ``window_seconds`` for starvation), or for a kernel OOM
    kill its ``exit_code`` and ``source``. The reading was taken at ``finished_at``."""

    model_config = ConfigDict(extra="ignore")

    rss_mb: float | None = None
    limit_mb: int | None = None
    active_seconds: float | None = None
    limit_seconds: int | None = None
    cpu_percent: float | None = None
    window_seconds: float | None = None
    exit_code: int | None = None
    source: str | None = None


class JobSpec(BaseModel):
    """One job. Field groups follow §3.2; see ``docs/jobspec.md`` for each field."""

    model_config = ConfigDict(extra="ignore", frozen=False)

    # --- identity and submission -------------------------------------------------------
    #: strict (a JSON integer only), as :func:`load_spec` has always required: its one-pass
    #: path may then trust a version the model accepted
    spec_version: StrictInt = SPEC_VERSION
    id: str
    job_name: str | None = None
    tags: list[str] = Field(default_factory=list)
    submitter: str | None = None
    workspace_source: str | None = None
    submitted_at: datetime

    # --- payload and captured I/O ------------------------------------------------------
    command: list[str]
    cwd: str | None = None
    stdout_path: str = "stdout.log"
    stderr_path: str = "stderr.log"
    qvf_artifact_name: str | None = None

    # --- resources and admission -------------------------------------------------------
    cpus: int = Field(ge=1)
    scheduler_tasks: int | None = Field(default=None, ge=1)
    mem_mb: int | None = Field(default=None, ge=1)
    wall_time_seconds: int | None = Field(default=None, ge=1)
    priority: int = 0
    not_before: datetime | None = None

    # --- lifecycle and outcome ---------------------------------------------------------
    state: JobState = JobState.PENDING
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    failure_reason: str | None = None
    failure_tail: str | None = None
    last_heartbeat_at: datetime | None = None
    #: additive: the watchdog's evidence when its verdict ended the job (else None)
    watchdog_evidence: WatchdogEvidence | None = None

    # --- local execution, recovery and pause -------------------------------------------
    pid: int | None = None
    pgid: int | None = None
    pid_start_time: int | None = None
    #: The cores this attempt is pinned to (chosen at dispatch, applied by the collector
    #: with ``sched_setaffinity``); None when affinity is off or the job never ran here.
    cpu_affinity: list[int] | None = None
    workdir: str | None = None
    #: The current attempt's token, set by the claim: its launch writes the start record
    #: ``_vq/started.<token>`` before the command starts (the never-started proof).
    launch_attempt: str | None = None
    recover_on_reboot: bool = False
    parent_jobid: str | None = None
    paused_at: datetime | None = None
    paused_monotonic_at: float | None = None
    paused_seconds_total: float = 0.0
    paused_by: str | None = None

    # --- scheduler execution -----------------------------------------------------------
    scheduler_target: str | None = None
    scheduler_job_id: str | None = None
    scheduler_state: str | None = None
    scheduler_remote_workspace_cleaned_at: datetime | None = None
    scheduler_exec_host: str | None = None
    scheduler_walltime_used: str | None = None
    scheduler_walltime_limit: str | None = None
    scheduler_queued_reason: str | None = None
    #: Additive v2: when the cluster started the current attempt (a lane records it from
    #: the scheduler's elapsed time when it first sees the job run; a packed element from
    #: its allocation's first observed run); None while queued or unknown. A lane job's
    #: elapsed time counts from here, not from ``started_at`` (vq's claim).
    scheduler_started_at: datetime | None = None
    # Additive v2 fields of packed array elements (absent: not packed):
    #: the ``[packing.NAME]`` profile the element's array is packed with (``--pack``)
    scheduler_pack: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    #: the current attempt's allocation identity (16 hex digits, ``vqp-<id>``), set with
    #: the intent before ``sbatch``; None before the element joins an allocation
    scheduler_pack_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{16}$")
    #: the element's slot in that allocation (0-based)
    scheduler_pack_slot: int | None = Field(default=None, ge=0)

    # --- dependencies, retries and grouping --------------------------------------------
    depends_on: list[str] = Field(default_factory=list)
    depends_on_any: list[str] = Field(default_factory=list)
    retry_max: int = Field(default=0, ge=0)
    retry_count: int = Field(default=0, ge=0)
    array_index: int | None = None
    array_total: int | None = None
    array_group_id: str | None = None
    chain_index: int | None = None
    chain_total: int | None = None
    chain_group_id: str | None = None
    rerun_until_file_exists: str | None = None
    rerun_max: int | None = None
    rerun_count: int = 0
    # Additive v2 fields (absent from older specs; defaults keep their meaning):
    #: the array element's parameter line from ``--array-from`` (exported VQ_ARRAY_VALUE)
    array_value: str | None = None
    #: at most this many elements of the job's array run at once (``--max-parallel``)
    array_max_parallel: int | None = Field(default=None, ge=1)
    #: base of the exponential retry backoff in seconds (default 30)
    retry_backoff_seconds: int | None = Field(default=None, ge=1)
    #: sha256 of the ``--idempotency-key`` this job was submitted with (§4.8)
    idempotency_key_hash: str | None = None
    #: digest of the canonical submit intent bound to that key
    idempotency_intent_digest: str | None = None

    # --- runtime and build provenance --------------------------------------------------
    branch: str | None = None
    program: str | None = None
    program_runtime_pin: ProgramRuntimePin | None = None
    #: the runtime generation the job is bound to (verified at submit and dispatch)
    runtime_generation: RuntimeGeneration | None = None
    refresh_before: bool = False
    build_env: dict[str, str] | None = None

    # --- cleanup and observation -------------------------------------------------------
    clean_workdir_on_terminal: bool = False
    workdir_swept_at: datetime | None = None
    last_status_at: datetime | None = None
    last_fetched_at: datetime | None = None
    archived_at: datetime | None = None
    archive_path: str | None = None

    # --- vibe-qc output hints ----------------------------------------------------------
    expected_outputs: list[str] = Field(default_factory=list)
    output_stem: str | None = None
    last_output_status: str | None = None

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        if not JOB_ID_RE.fullmatch(value):
            raise ValueError("job id must be 12 lowercase hex characters")
        return value

    @field_validator("command")
    @classmethod
    def _non_empty_command(cls, value: list[str]) -> list[str]:
        if not value or not value[0]:
            raise ValueError("command must name a program")
        return value

    @field_validator("state", mode="before")
    @classmethod
    def _state_any_case(cls, value: Any) -> Any:
        # Version 1 writers stored lowercase state names.
        return value.upper() if isinstance(value, str) else value

    @field_validator(
        "submitted_at",
        "not_before",
        "started_at",
        "finished_at",
        "paused_at",
        "last_heartbeat_at",
        "scheduler_remote_workspace_cleaned_at",
        "workdir_swept_at",
        "last_status_at",
        "last_fetched_at",
        "archived_at",
        mode="after",
    )
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal


def load_spec(data: bytes | str | dict[str, Any], *, source: str = "spec") -> JobSpec:
    """Parse a spec from raw JSON (or an already-decoded dict).

    Raises :class:`UnsupportedSpecVersion` for a newer ``spec_version`` and
    :class:`CorruptSpec` for anything unparseable or invalid. Never returns a partial spec.

    Raw JSON is first validated in one pass (:func:`_load_plain`, about a third faster: a
    scan parses every spec file); whatever that pass does not accept outright goes
    through :func:`_load_checked`, which decides and words every refusal, so both give
    the same spec or the same error (``tests/unit/test_spec_load_paths.py``).
    """
    if not isinstance(data, dict):
        spec = _load_plain(data)
        if spec is not None:
            return spec
    return _load_checked(data, source)


def _load_plain(data: bytes | str) -> JobSpec | None:
    """The spec of an ordinary current file, or None for anything else.

    None when pydantic's JSON validation refuses ``data`` (invalid JSON, a UTF-8 BOM or
    a lone surrogate it does not take, an invalid field), when it has no top-level
    ``spec_version`` (a version 1 file may carry ``version`` instead) or a newer one.
    """
    try:
        spec = JobSpec.model_validate_json(data)
    except (ValueError, RecursionError):  # ValidationError is a ValueError
        return None
    if "spec_version" not in spec.model_fields_set or spec.spec_version > SPEC_VERSION:
        return None
    spec.spec_version = SPEC_VERSION
    return spec


def _load_checked(data: bytes | str | dict[str, Any], source: str) -> JobSpec:
    """:func:`load_spec` step by step: decode, check the version, then validate."""
    if isinstance(data, dict):
        raw: Any = data
    else:
        try:
            raw = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise CorruptSpec(
                f"{source} is not valid JSON ({exc})",
                hint="the file is kept as it is; inspect it, or move it out of the queue",
            ) from exc
    if not isinstance(raw, dict):
        raise CorruptSpec(f"{source} is not a JSON object", hint="inspect the file")
    version = raw.get("spec_version", raw.get("version", 1))
    if not isinstance(version, int) or isinstance(version, bool):
        raise CorruptSpec(f"{source} has a non-integer spec_version {version!r}")
    if version > SPEC_VERSION:
        raise UnsupportedSpecVersion(
            f"{source} has spec_version {version}; this vq reads up to {SPEC_VERSION}",
            hint="upgrade vq to read it; the file is left untouched",
        )
    try:
        spec = JobSpec.model_validate(raw)
    except ValidationError as exc:
        where, message = first_problem(exc, "spec", JSON_WORDS)
        raise CorruptSpec(
            f"{source} is invalid: {where}: {message}",
            hint="the file is kept as it is; inspect it, or move it out of the queue",
        ) from exc
    spec.spec_version = SPEC_VERSION
    return spec


def dump_spec(spec: JobSpec) -> dict[str, Any]:
    """The JSON-safe dict written to disk and returned by ``--json``."""
    return spec.model_dump(mode="json")
