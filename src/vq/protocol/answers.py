"""The JSON answers of the RPC methods and the gateway's verbs, as stdlib types.

What the daemon answers on ``daemon.sock`` (the result models of
:mod:`vq.protocol.methods` validate it there) and what the gateway, the CLI and the web
console read back, typed for the readers: ``TypedDict`` only, so that the CLI's fast
paths import no pydantic (``tests/architecture/test_cli_import_cost.py``). The shapes
are the stable ones of docs/json.md; ``tests/contract/test_answer_types.py`` checks the
keys of these types against what the services actually build (a spec dump, a status
view, a list row, each verb's answer).

Reading rule: ``total`` types list every key an answer always carries; ``NotRequired``
marks a key only some answers carry (a paged listing's ``total``, a PENDING job's
``queue_eta``). A type grows with its schema, never shrinks. This module does not
postpone its annotations, so that ``NotRequired`` reaches ``__optional_keys__`` at run
time (the contract tests read it).
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, NotRequired, TypedDict, TypeVar, final

if TYPE_CHECKING:
    from vq.errors import ErrorPayload

__all__ = [
    "RPC_METHODS",
    "AdminStatusAnswer",
    "CapacityAnswer",
    "CapsJSON",
    "DrainAnswer",
    "EmptyAnswer",
    "FinalState",
    "GroupSubmitAnswer",
    "GroupSummary",
    "HealthAnswer",
    "HealthCheck",
    "HoldAnswer",
    "JobOutcomeAnswer",
    "JobRefusal",
    "KillAnswer",
    "LaneChanges",
    "ListAnswer",
    "ListQuery",
    "ListRow",
    "Overage",
    "PauseAnswer",
    "PingAnswer",
    "QuarantinedItem",
    "QueueEta",
    "ReloadAnswer",
    "ReplayAnswer",
    "ReportRow",
    "ResourceUsage",
    "Rpc",
    "RuntimeGenerationJSON",
    "RuntimePinJSON",
    "SchedulerResolveAnswer",
    "SchedulerWarning",
    "SpecJSON",
    "StatusView",
    "SubmitAnswer",
    "SubmitAnswerOne",
    "ThrottleAnswer",
    "ThrottleJSON",
    "UndrainAnswer",
    "WaitChangeAnswer",
    "WatchdogEvidenceJSON",
    "submitted_id",
]


# --- a job's spec ------------------------------------------------------------------------
class RuntimePinJSON(TypedDict):
    """A program runtime pin (``JobSpec.program_runtime_pin``) as JSON."""

    program: str | None
    kind: str | None
    executable: str | None
    python: str | None
    git_dir: str | None
    branch: str | None
    git_sha: str | None
    enforce_git_sha: bool
    expected_import_version: str | None
    import_version: str | None
    resolved_git_sha: str | None
    scheduler_host: str | None
    version: str | None
    artifact_identity: str | None
    target_source: str | None


class RuntimeGenerationJSON(TypedDict):
    """A managed runtime generation (``JobSpec.runtime_generation``) as JSON."""

    root: str
    digest: str


class WatchdogEvidenceJSON(TypedDict):
    """The watchdog's evidence kept on a spec it ended (``JobSpec.watchdog_evidence``):
    the reading that fired and its limit; the keys of other checks are null."""

    rss_mb: float | None
    limit_mb: int | None
    active_seconds: float | None
    limit_seconds: int | None
    cpu_percent: float | None
    window_seconds: float | None
    exit_code: int | None
    source: str | None


class SpecJSON(TypedDict):
    """A job's spec as JSON (``JobSpec.model_dump(mode="json")``): every field, times as
    ISO strings, the state by name. ``vq submit --json`` and ``resubmit`` answer it."""

    spec_version: int
    id: str
    job_name: str | None
    tags: list[str]
    submitter: str | None
    workspace_source: str | None
    submitted_at: str
    command: list[str]
    cwd: str | None
    stdout_path: str
    stderr_path: str
    qvf_artifact_name: str | None
    cpus: int
    scheduler_tasks: int | None
    mem_mb: int | None
    wall_time_seconds: int | None
    priority: int
    not_before: str | None
    state: str
    started_at: str | None
    finished_at: str | None
    exit_code: int | None
    failure_reason: str | None
    failure_tail: str | None
    last_heartbeat_at: str | None
    watchdog_evidence: WatchdogEvidenceJSON | None
    pid: int | None
    pgid: int | None
    pid_start_time: int | None
    cpu_affinity: list[int] | None
    workdir: str | None
    launch_attempt: str | None
    recover_on_reboot: bool
    parent_jobid: str | None
    paused_at: str | None
    paused_monotonic_at: float | None
    paused_seconds_total: float
    paused_by: str | None
    scheduler_target: str | None
    scheduler_job_id: str | None
    scheduler_state: str | None
    scheduler_remote_workspace_cleaned_at: str | None
    scheduler_exec_host: str | None
    scheduler_walltime_used: str | None
    scheduler_walltime_limit: str | None
    scheduler_queued_reason: str | None
    scheduler_started_at: str | None
    scheduler_pack: str | None
    scheduler_pack_id: str | None
    scheduler_pack_slot: int | None
    depends_on: list[str]
    depends_on_any: list[str]
    retry_max: int
    retry_count: int
    array_index: int | None
    array_total: int | None
    array_group_id: str | None
    chain_index: int | None
    chain_total: int | None
    chain_group_id: str | None
    rerun_until_file_exists: str | None
    rerun_max: int | None
    rerun_count: int
    array_value: str | None
    array_max_parallel: int | None
    retry_backoff_seconds: int | None
    idempotency_key_hash: str | None
    idempotency_intent_digest: str | None
    branch: str | None
    program: str | None
    program_runtime_pin: RuntimePinJSON | None
    runtime_generation: RuntimeGenerationJSON | None
    refresh_before: bool
    build_env: dict[str, str] | None
    clean_workdir_on_terminal: bool
    workdir_swept_at: str | None
    last_status_at: str | None
    last_fetched_at: str | None
    archived_at: str | None
    archive_path: str | None
    expected_outputs: list[str]
    output_stem: str | None
    last_output_status: str | None


# --- derived views -----------------------------------------------------------------------
class Overage(TypedDict):
    """One configured cap a PENDING job's request exceeds."""

    resource: str
    requested: int
    capacity: int


class QueueEta(TypedDict):
    """A PENDING job's estimated start (``queue_eta``, :mod:`vq.services.queue_eta`)."""

    eta_seconds: float | None
    basis: str
    median_run_seconds: float | None
    jobs_ahead: int | None
    slots: int | None


class ResourceUsage(TypedDict):
    """What an ended job's receipt says of its peak memory and CPU time."""

    source: str
    peak_rss_mb: float | None
    cpu_seconds: float | None
    user_cpu_seconds: float | None
    system_cpu_seconds: float | None
    wall_seconds: float | None


class SchedulerWarning(TypedDict):
    """``scheduler_warning``: a lane without accounting may have gone blind to the job."""

    code: str
    message: str
    hint: str


class StatusView(SpecJSON):
    """``status`` and ``vq status --json``: the spec plus what is derived from it."""

    workspace: str
    pending_over_capacity: bool | None
    configured_capacity_overages: list[Overage]
    pending_reason: str | None
    elapsed_seconds: float | None
    active_seconds: float | None
    #: a lane job's cluster phase while RUNNING/SUSPENDED (``vq.domain.lane_phase``),
    #: the STATE text views show for it, and its lane's scheduler (``slurm``, ``torque``)
    phase: str | None
    phase_label: str | None
    scheduler_dialect: str | None
    #: an ended job only
    resource_usage: NotRequired[ResourceUsage | None]
    #: a PENDING job only
    queue_eta: NotRequired[QueueEta]
    #: a scheduler lane job only
    scheduler_warning: NotRequired[SchedulerWarning | None]


class ListRow(TypedDict):
    """One job's compact row of ``list`` (``vq list --json``'s ``jobs``)."""

    id: str
    job_name: str | None
    state: str
    command: list[str]
    tags: list[str]
    cpus: int
    cpu_affinity: list[int] | None
    mem_mb: int | None
    wall_time_seconds: int | None
    priority: int
    submitted_at: str
    started_at: str | None
    finished_at: str | None
    exit_code: int | None
    failure_reason: str | None
    retry_count: int
    array_group_id: str | None
    array_index: int | None
    array_value: str | None
    chain_group_id: str | None
    chain_index: int | None
    parent_jobid: str | None
    pending_over_capacity: bool | None
    elapsed_seconds: float | None
    scheduler_target: str | None
    scheduler_state: str | None
    submitter: str | None
    #: a lane job's cluster phase while RUNNING/SUSPENDED and the STATE text views show
    #: for it (``vq.domain.lane_phase``); the scheduler's reason for a waiting one
    phase: str | None
    phase_label: str | None
    scheduler_queued_reason: str | None


class ReportRow(ListRow):
    """A list row plus what the usage report and the ETA need (pauses, ``not_before``)."""

    paused_seconds_total: float
    paused_at: str | None
    not_before: str | None
    scheduler_walltime_used: str | None


class QuarantinedItem(TypedDict):
    """A spec file that cannot be read (``list``'s ``quarantined``)."""

    name: str
    path: str
    reason: str
    reference: str


class GroupSummary(TypedDict):
    """An array's or chain's elements counted by state, and one human line."""

    group_id: str
    total: int
    counts: dict[str, int]
    summary: str


class ListQuery(TypedDict, total=False):
    """``list``'s parameters (:class:`vq.protocol.methods.ListParams`): the filters, the
    paging and ordering of :mod:`vq.services.listing`, and how fresh the daemon's view of
    other writers' changes must be."""

    states: list[str]
    tags: list[str]
    name: str | None
    since: str | None
    group: str | None
    sort: str | None
    table_sort: str | None
    table_dir: str | None
    offset: int | None
    limit: int | None
    count_only: bool | None
    max_age: float | None


class ListAnswer(TypedDict):
    """``list``: the rows, the unreadable specs, every state's count; paging totals
    (``vq list --group G --json`` adds the group's summary)."""

    jobs: list[ListRow]
    quarantined: list[QuarantinedItem]
    counts: dict[str, int]
    total: NotRequired[int]
    total_jobs: NotRequired[int]
    group: NotRequired[GroupSummary]


class WaitChangeAnswer(TypedDict):
    """``wait_change`` (and ``GET .../wait``): the state now and whether it changed."""

    id: str
    state: str
    changed: NotRequired[bool]
    timed_out: NotRequired[bool]
    job: NotRequired[StatusView]
    abandoned: NotRequired[bool]


class FinalState(TypedDict):
    """How a job ended (``vq wait``)."""

    id: str
    state: str
    exit_code: int | None
    failure_reason: str | None


# --- job control -------------------------------------------------------------------------
class KillAnswer(TypedDict):
    """``kill`` (``vq kill --json``'s item)."""

    id: str
    previous_state: str
    state: str
    already_killed: bool
    signaled: bool


class PauseAnswer(TypedDict):
    """``pause`` and ``resume`` (``vq pause|resume --json``'s item)."""

    id: str
    state: str
    changed: bool
    signaled: bool


JobOutcomeAnswer = KillAnswer | PauseAnswer


class JobRefusal(TypedDict):
    """A bulk verb's item for a job it could not act on (``vq pause --tag ... --json``)."""

    id: str
    error: "ErrorPayload"


@final
class SubmitAnswerOne(SpecJSON):
    """``submit`` of one job: its spec plus the capacity warnings."""

    capacity_warnings: list[str]
    #: a repeat of an idempotent submission (the original job answers)
    idempotent_replay: NotRequired[bool]


@final
class ReplayAnswer(TypedDict):
    """``submit`` repeating an idempotent submission whose job was deleted since."""

    id: str | None
    state: None
    idempotent_replay: Literal[True]
    capacity_warnings: list[str]


@final
class GroupSubmitAnswer(TypedDict):
    """``submit`` of an array or a chain: the group id and every member's spec."""

    array_group_id: NotRequired[str]
    chain_group_id: NotRequired[str]
    jobs: list[SpecJSON]
    capacity_warnings: list[str]


SubmitAnswer = SubmitAnswerOne | ReplayAnswer | GroupSubmitAnswer


def submitted_id(answer: SubmitAnswer) -> str | None:
    """The job id a one-job ``submit`` answers (None for an array or a chain, and for a
    replay whose original job is gone without an id)."""
    if "jobs" in answer:
        return None
    return answer["id"]


class SchedulerResolveAnswer(TypedDict):
    """``scheduler_resolve``: the decision applied to a lane job (or its allocation)."""

    id: str
    scheduler_job_id: str | None
    lane: str
    scheduler_pack_id: NotRequired[str | None]
    elements: NotRequired[list[str] | None]


class HoldAnswer(TypedDict):
    """``hold`` (a user's submit socket): why the daemon holds the job, or null."""

    reason: str | None


# --- queue control -----------------------------------------------------------------------
class CapsJSON(TypedDict):
    """Admission caps (``Caps`` as JSON): null is unlimited or unknown."""

    max_jobs: int | None
    max_cpus: int | None
    max_mem_mb: int | None
    default_job_mem_mb: int | None


class ThrottleJSON(TypedDict):
    """A throttle in force (``throttle.json``)."""

    max_jobs: int | None
    max_cpus: int | None
    expires_at: str | None
    set_at: str | None


class DrainAnswer(TypedDict):
    """``drain``: the drain now in force (``drain.json``)."""

    mode: str
    reject_submits: bool
    reason: str | None
    set_at: str | None


class UndrainAnswer(TypedDict):
    """``undrain``: no drain; which pauses were undone."""

    mode: Literal["none"]
    resumed_paused_by: str | None


class ThrottleAnswer(TypedDict):
    """``throttle``: the throttle in force (null once cleared) and the caps it leaves."""

    throttle: ThrottleJSON | None
    effective_caps: CapsJSON


class CapacityAnswer(TypedDict):
    """``capacity``: configured caps, effective caps, reserved usage."""

    configured: CapsJSON
    effective: CapsJSON
    reserved: dict[str, int]


class AdminStatusAnswer(TypedDict):
    """``admin_status``: drain, throttle, configuration health and dispatch holds."""

    drain: DrainAnswer
    throttle: ThrottleJSON | None
    config_error: str | None
    config_missing: list[str]
    configured_caps: CapsJSON
    effective_caps: CapsJSON
    holding_dispatch: bool
    memory_pressure_hold: bool
    dispatch_hold: NotRequired[str | None]
    storage_hold: NotRequired[dict[str, str] | None]


class LaneChanges(TypedDict):
    """The scheduler lanes a reload added, changed and removed."""

    added: list[str]
    changed: list[str]
    removed: list[str]


class ReloadAnswer(TypedDict):
    """``reload``: what the configuration reload changed and applied."""

    changed: list[str]
    applied: list[str]
    needs_restart: list[str]
    caps: CapsJSON
    lanes: NotRequired[LaneChanges]


# --- the daemon --------------------------------------------------------------------------
class PingAnswer(TypedDict):
    """``ping``: who answers, since when, with which caps and methods."""

    version: str
    pid: int
    uptime_seconds: float
    started_at: str
    state_root: str
    methods: list[str]
    provenance: dict[str, str | None]
    cgroup_mode: str
    cgroup_reason: str
    cpu_affinity: bool
    dispatch_hold: str | None
    storage_hold: dict[str, str] | None
    root_single_user: bool
    caps: CapsJSON
    effective_caps: CapsJSON


class HealthCheck(TypedDict):
    """One check of ``health``."""

    name: str
    ok: bool
    detail: str


class HealthAnswer(TypedDict):
    """``health``: whether the daemon is doing its job, check by check."""

    ok: bool
    checked_at: str
    checks: list[HealthCheck]


class EmptyAnswer(TypedDict):
    """An answer without fields (``wake``)."""


# --- the methods, each with its answer type ----------------------------------------------
AnswerT_co = TypeVar("AnswerT_co", covariant=True)


@dataclass(frozen=True)
class Rpc(Generic[AnswerT_co]):
    """One RPC method by name, carrying the type of its answer: the gateway's
    ``call(rpc.STATUS, ...)`` is a :class:`StatusView` (or None with no daemon)."""

    name: str


PING = Rpc[PingAnswer]("ping")
WAKE = Rpc[EmptyAnswer]("wake")
SUBMIT = Rpc[SubmitAnswer]("submit")
STATUS = Rpc[StatusView]("status")
WAIT_CHANGE = Rpc[WaitChangeAnswer]("wait_change")
LIST = Rpc[ListAnswer]("list")
KILL = Rpc[KillAnswer]("kill")
PAUSE = Rpc[PauseAnswer]("pause")
RESUME = Rpc[PauseAnswer]("resume")
RESUBMIT = Rpc[SpecJSON]("resubmit")
SCHEDULER_RESOLVE = Rpc[SchedulerResolveAnswer]("scheduler_resolve")
RELOAD = Rpc[ReloadAnswer]("reload")
DRAIN = Rpc[DrainAnswer]("drain")
UNDRAIN = Rpc[UndrainAnswer]("undrain")
THROTTLE = Rpc[ThrottleAnswer]("throttle")
CAPACITY = Rpc[CapacityAnswer]("capacity")
HEALTH = Rpc[HealthAnswer]("health")
ADMIN_STATUS = Rpc[AdminStatusAnswer]("admin_status")

#: Every method of ``daemon.sock`` (the keys of ``vq.protocol.methods.CONTRACTS``; a
#: contract test keeps the two in step).
RPC_METHODS: tuple[Rpc[object], ...] = (
    PING,
    WAKE,
    SUBMIT,
    STATUS,
    WAIT_CHANGE,
    LIST,
    KILL,
    PAUSE,
    RESUME,
    RESUBMIT,
    SCHEDULER_RESOLVE,
    RELOAD,
    DRAIN,
    UNDRAIN,
    THROTTLE,
    CAPACITY,
    HEALTH,
    ADMIN_STATUS,
)
