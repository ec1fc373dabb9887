"""Submission (§4.2): validate, materialize workspaces, write PENDING specs.

The spec write is the acceptance boundary: once :func:`submit` returns, the job is
durable. The ``submitted`` event is appended afterwards, best-effort. On any failure
before the spec write the new workspaces are removed, so a refused submit leaves nothing.

Arrays (``--array``/``--array-from``) and chains (``--chain``) are independent specs
written as one batch (one directory sync for all of them) and acknowledged together.
Chain segments run one after another in the *first* segment's workspace, so restart
files written by one segment are there for the next.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from vq._fs import fsync_dir
from vq.domain.admission import capacity_overages
from vq.domain.environment import BASE_DAEMON, CapturedEnvironment
from vq.domain.events import make_event
from vq.domain.ids import is_job_id, new_job_id
from vq.domain.spec import JobSpec, SpecFields
from vq.errors import ConfigError, InvalidInput, NotFound, storage_error
from vq.packing.cases.array_submit import packed_fields
from vq.protocol.answers import GroupSubmitAnswer, ReplayAnswer, SubmitAnswer, SubmitAnswerOne
from vq.protocol.messages import SubmitParams
from vq.services.context import ServiceContext
from vq.services.control import check_submits_allowed
from vq.services.idempotency import KeyedSubmit, submit_keyed
from vq.services.query import spec_json
from vq.store.environment import write_environment
from vq.store.events import append_event
from vq.store.group_commit import commit_group
from vq.store.workspace import detect_source_kind, materialize

__all__ = ["SubmitResult", "group_payload", "result_payload", "submit", "submit_payload"]


@dataclass
class SubmitResult:
    specs: list[JobSpec]
    capacity_warnings: list[str] = field(default_factory=list)
    group_id: str | None = None
    group_kind: str | None = None  # "array" | "chain"
    replayed: bool = False  # an idempotent repeat of an earlier submit
    replay_id: str | None = None  # the original job's id (its spec may have been deleted)

    @property
    def spec(self) -> JobSpec:
        return self.specs[0]


def apply_profile(ctx: ServiceContext, params: SubmitParams) -> SubmitParams:
    """Fill the fields the submitter did not give from ``[profile.NAME]`` (§9.2)."""
    if params.profile is None:
        return params
    profile = ctx.profiles.get(params.profile)
    if profile is None:
        if ctx.config_error is not None:
            raise ConfigError(
                f"the configuration is invalid, so profile {params.profile!r} cannot be "
                f"read: {ctx.config_error}",
                hint="fix that line (`vq config check FILE` checks it); the daemon keeps "
                "its last good configuration and holds dispatch until then",
            )
        known = ", ".join(sorted(ctx.profiles)) or "none are configured"
        raise NotFound(
            f"unknown profile {params.profile!r}",
            hint=f"`vq profiles` lists them ({known}); a running daemon reads profiles "
            "added since it started on `vq daemon reload`",
        )
    data = params.model_dump(exclude_unset=True)
    for name, value in profile.model_dump(exclude_none=True).items():
        if name not in params.model_fields_set:
            data[name] = value
    return SubmitParams.model_validate(data)


def _program_fields(ctx: ServiceContext, params: SubmitParams) -> SpecFields:
    """``program`` and its runtime snapshot (§3.4); refuses an unknown name or a bad pin.
    A lane job naming a managed runtime is pinned to its target (:mod:`.lane_runtime`),
    and bound to the generation that identity names, if any."""
    if params.program is None:
        return {}
    from vq.services.lane_runtime import is_managed

    target = params.scheduler_target
    lane = ctx.lanes.get(target) if target is not None else None
    if target is not None and is_managed(ctx.programs, params.program, lane):
        return _lane_program_fields(ctx, params, target, lane)
    from vq.services.programs import submit_pin  # runs git/python: only when asked

    pin = submit_pin(ctx.programs, params.program, expected_sha=params.expected_sha)
    return {"program": params.program, "program_runtime_pin": pin.model_dump()}


def _lane_program_fields(
    ctx: ServiceContext, params: SubmitParams, target: str, lane: Any
) -> SpecFields:
    """The fields of a lane job naming a managed runtime (:func:`.lane_runtime.resolve`)."""
    from vq.services.lane_runtime import resolve
    from vq.services.lane_runtime_probe import probe_lane_program, ssh_runner_for
    from vq.services.runtime_deployments import read_record

    name = params.program or ""
    bound = None
    if params.runtime_root is not None and params.runtime_artifact is not None:
        bound = (params.runtime_root, params.runtime_artifact)
    runner_for = ctx.lane_runner or ssh_runner_for
    resolved = resolve(
        name,
        target,
        list(params.command),
        bound=bound,
        registered=lane.programs.get(name) if lane is not None else None,
        record=lambda: read_record(ctx.paths, target, name),
        probe=lambda entry: probe_lane_program(runner_for(lane), lane, entry),
        expected_sha=params.expected_sha,
    )
    fields: SpecFields = {"program": name, "program_runtime_pin": resolved.pin.model_dump()}
    if resolved.generation is not None:
        if params.scheduler_pack is not None:
            raise InvalidInput(
                f"program {name!r} resolved to runtime generation "
                f"{resolved.generation['digest'][:12]} on lane {target!r}, and a packed "
                "array cannot be bound to a runtime generation yet",
                hint=f"register the program on the lane ([hosts.{target}.scheduler_programs."
                f"{name}]) or submit without --pack",
            )
        fields["runtime_generation"] = resolved.generation
    return fields


def _warnings(ctx: ServiceContext, params: SubmitParams) -> list[str]:
    """Overages of the advertised base caps (none when they are unknown), and in
    multi-user mode of the owner's CPU quota, which a local job can then never fit.

    A scheduler lane job is none of this workstation's business: it runs on the
    cluster, so this host's caps and quota never hold it and are never warned about
    (a lane's own ``max_scheduler_jobs`` bounds how many are in the cluster's queue at
    once, which no single request can exceed)."""
    if params.scheduler_target is not None:
        return []
    warnings = [
        f"requested {o.resource} {o.requested} exceeds the configured cap {o.capacity}; "
        "the job stays PENDING until the caps change"
        for o in (
            capacity_overages(params.cpus, params.mem_mb, ctx.base_caps)
            if ctx.base_caps is not None
            else ()
        )
    ]
    quota = ctx.owner_quota
    limit = quota.max_concurrent_cpus if quota is not None else None
    if limit is not None and params.cpus > limit:
        warnings.append(
            f"requested cpus {params.cpus} exceeds your max_concurrent_cpus quota {limit}; "
            "it can never start under this quota, and the job stays PENDING until the "
            "quota changes"
        )
    return warnings


def _dependencies(ctx: ServiceContext, params: SubmitParams) -> tuple[list[str], list[str]]:
    """Deduplicated, validated predecessor lists; an unknown id refuses the submit.

    An id that names no job but an array or chain group stands for every element of
    that group, in index order (``--after GROUP``): the dependent waits for all of them,
    and a failed element fails it as a failed predecessor does."""
    groups = _GroupMembers(ctx)
    after = list(dict.fromkeys(j for given in params.depends_on for j in groups.expand(given)))
    after_any = [
        j
        for j in dict.fromkeys(j for given in params.depends_on_any for j in groups.expand(given))
        if j not in after
    ]
    return after, after_any


class _GroupMembers:
    """Expands a dependency id: a job id as itself, a group id as its elements (the
    queue is scanned once, and only when an id names no job)."""

    def __init__(self, ctx: ServiceContext) -> None:
        self._ctx = ctx
        self._groups: dict[str, list[str]] | None = None

    def expand(self, given: str) -> list[str]:
        if is_job_id(given) and self._ctx.store.exists(given):
            return [given]
        members = self._all().get(given, []) if is_job_id(given) else []
        if not members:
            raise NotFound(
                f"dependency {given!r} is not a job in this queue, nor an array or chain group",
                hint="`vq list` shows the job and group ids; dependencies must be submitted first",
            )
        return members

    def _all(self) -> dict[str, list[str]]:
        if self._groups is None:
            keyed: dict[str, list[tuple[int, str]]] = {}
            for spec in self._ctx.store.scan().specs.values():
                if spec.array_group_id:
                    keyed.setdefault(spec.array_group_id, []).append(
                        (spec.array_index or 0, spec.id)
                    )
                if spec.chain_group_id:
                    keyed.setdefault(spec.chain_group_id, []).append(
                        (spec.chain_index or 0, spec.id)
                    )
            self._groups = {g: [i for _, i in sorted(m)] for g, m in keyed.items()}
        return self._groups


def _new_id(ctx: ServiceContext, reserved: set[str]) -> str:
    paths = ctx.paths
    job_id = new_job_id(
        ctx.random_bytes,
        lambda c: c in reserved or ctx.store.exists(c) or paths.workspace(c).exists(),
    )
    reserved.add(job_id)
    return job_id


def _base_fields(ctx: ServiceContext, params: SubmitParams) -> SpecFields:
    return {
        "job_name": params.job_name,
        "submitter": params.submitter,
        "tags": params.tags,
        "workspace_source": params.source_label or params.source,
        "command": params.command,
        "cpus": params.cpus,
        "mem_mb": params.mem_mb,
        "wall_time_seconds": params.wall_time_seconds,
        "priority": params.priority,
        "not_before": params.not_before,
        "retry_max": params.retry_max,
        "retry_backoff_seconds": params.retry_backoff_seconds,
        "rerun_until_file_exists": params.rerun_until_file_exists,
        "rerun_max": (
            params.rerun_max or 10 if params.rerun_until_file_exists is not None else None
        ),
        "clean_workdir_on_terminal": params.clean_workdir_on_terminal,
        "recover_on_reboot": params.recover_on_reboot or ctx.default_recover_on_reboot,
        "scheduler_target": params.scheduler_target,
        "runtime_generation": _runtime_generation(params),
    }


def _runtime_generation(params: SubmitParams) -> dict[str, str] | None:
    """The generation the job is bound to, refused unless it verifies here. A scheduler
    lane's root lives on the cluster: only its form is checked here, its job script
    verifies it on the compute node."""
    if params.runtime_root is None or params.runtime_artifact is None:
        return None
    from vq.services.runtime_generations import generation_problem, root_problem

    problem = root_problem(params.runtime_root)
    if problem is None and params.scheduler_target is None:
        problem = generation_problem(params.runtime_root, params.runtime_artifact)
    if problem is not None:
        raise InvalidInput(
            f"the runtime generation is not usable: {problem}",
            hint="deploy it with `vq runtime deploy DIR --root ROOT` and name the digest it prints",
        )
    return {"root": params.runtime_root, "digest": params.runtime_artifact}


def _plan(
    ctx: ServiceContext, params: SubmitParams
) -> tuple[list[SpecFields], str | None, str | None]:
    """The field sets of every spec to create, the group id and the group kind."""
    after, after_any = _dependencies(ctx, params)
    reserved: set[str] = set()
    now = ctx.now()
    base = _base_fields(ctx, params)
    base["submitted_at"], base["depends_on"], base["depends_on_any"] = now, after, after_any
    if params.chain is None and params.array is None and params.array_values is None:
        job_id = _new_id(ctx, reserved)
        cwd = params.cwd or str(ctx.paths.workspace(job_id))
        return [{**base, "id": job_id, "cwd": cwd}], None, None
    group_id = _new_id(ctx, reserved)  # never a job id, but drawn from the same space
    plans: list[SpecFields] = []
    if params.chain is not None:
        ids = [_new_id(ctx, reserved) for _ in range(params.chain)]
        cwd = params.cwd or str(ctx.paths.workspace(ids[0]))
        for index, job_id in enumerate(ids):
            plans.append(
                {
                    **base,
                    "id": job_id,
                    "cwd": cwd,
                    "depends_on": after if index == 0 else [ids[index - 1]],
                    "depends_on_any": after_any if index == 0 else [],
                    "chain_index": index,
                    "chain_total": params.chain,
                    "chain_group_id": group_id,
                }
            )
        return plans, group_id, "chain"
    if params.array_values is not None:
        elements: list[tuple[int, str | None]] = list(enumerate(params.array_values))
    else:
        elements = [(index, None) for index in params.array or []]
    for index, value in elements:
        job_id = _new_id(ctx, reserved)
        plans.append(
            {
                **base,
                "id": job_id,
                "cwd": params.cwd or str(ctx.paths.workspace(job_id)),
                "array_index": index,
                "array_total": len(elements),
                "array_group_id": group_id,
                "array_value": value,
                "array_max_parallel": params.max_parallel,
            }
        )
    return plans, group_id, "array"


def _write(
    ctx: ServiceContext, params: SubmitParams, plans: list[SpecFields], extra: SpecFields
) -> list[JobSpec]:
    """Materialize every workspace, then write every spec; all or nothing."""
    source = None if params.source is None else Path(params.source)
    captured = None
    if params.environment is not None:
        captured = CapturedEnvironment.from_json(params.environment)
        if params.scheduler_target is not None and captured.base != BASE_DAEMON:
            raise InvalidInput(
                "a scheduler lane job cannot take the submitting shell's whole environment",
                hint="name the variables it needs: --export NAME[,NAME…] or --env NAME=value",
            )
    ctx.paths.ensure()
    created: list[Path] = []
    specs: list[JobSpec] = []
    try:
        for index, plan in enumerate(plans):
            workspace = ctx.paths.workspace(plan["id"])
            # A chain's later segments run in the first one's workspace: only it gets SOURCE.
            own_source = source if params.chain is None or index == 0 else None
            materialize(own_source, workspace, sync_parent=len(plans) == 1)
            created.append(workspace)
            write_environment(ctx.paths, plan["id"], captured)
            specs.append(JobSpec.model_validate({**plan, **extra}))
        # Every file fsynced (concurrently: the filesystem folds the flushes into a few
        # journal commits), the queue directory once; all durable before the answer.
        created_specs = commit_group(
            ctx.store,
            [partial(_create, ctx, spec) for spec in specs],
        )
        failed = next((r for r in created_specs if isinstance(r, BaseException)), None)
        if failed is not None:
            raise failed
        if len(specs) > 1:
            fsync_dir(ctx.paths.jobs_dir)
    except BaseException as exc:
        for spec in specs:
            if ctx.store.exists(spec.id):
                ctx.store.path(spec.id).unlink()
        for workspace in created:
            shutil.rmtree(workspace, ignore_errors=True)
        full = storage_error(exc, ctx.paths.root)
        if full is not None:  # copying the source or creating a directory
            raise full from exc
        raise
    for spec in specs:
        append_event(
            ctx.paths,
            make_event(
                "submitted",
                spec.id,
                spec.submitted_at,
                state=spec.state.value,
                command=spec.command,
                source=spec.workspace_source,
                depends_on=spec.depends_on or None,
                array_group_id=spec.array_group_id,
                chain_group_id=spec.chain_group_id,
            ),
        )
    return specs


def _create(ctx: ServiceContext, spec: JobSpec, sync_dir: bool) -> None:
    ctx.store.create(spec, sync_dir=sync_dir)


def submit(ctx: ServiceContext, params: SubmitParams) -> SubmitResult:
    """Accept a job (or an array or chain). Raises and writes nothing on bad input."""
    check_submits_allowed(ctx.paths)
    params = apply_profile(ctx, params)
    if params.source is not None:
        # Validate the source before anything reads it (the idempotency digest does): a
        # special file is refused here instead of being read forever.
        detect_source_kind(Path(params.source))
    if params.array_values is not None and not params.array_values:
        raise InvalidInput("--array-from gave no parameter lines")
    packed = packed_fields(ctx, params)
    warnings = _warnings(ctx, params)
    program = _program_fields(ctx, params)
    if params.idempotency_key is not None:
        keyed: KeyedSubmit = submit_keyed(
            ctx,
            params,
            lambda extra: _write(ctx, params, _plan(ctx, params)[0], {**extra, **program})[0],
        )
        specs = [keyed.spec] if keyed.spec is not None else []
        return SubmitResult(specs, warnings, replayed=keyed.replayed, replay_id=keyed.job_id)
    plans, group_id, kind = _plan(ctx, params)
    for plan in plans:
        plan.update(packed)  # the profile decides a packed element's resources
    specs = _write(ctx, params, plans, program)
    return SubmitResult(specs, warnings, group_id, kind)


def submit_payload(result: SubmitResult) -> SubmitAnswerOne | ReplayAnswer:
    """The ``vq submit --json`` object of one job: the spec plus ``capacity_warnings``."""
    if not result.specs:  # an idempotent repeat whose original job was deleted since
        return {
            "id": result.replay_id,
            "state": None,
            "idempotent_replay": True,
            "capacity_warnings": result.capacity_warnings,
        }
    payload: SubmitAnswerOne = {
        **spec_json(result.spec),  # type: ignore[typeddict-item]  # a spec has no such key
        "capacity_warnings": result.capacity_warnings,
    }
    if result.replayed:
        payload["idempotent_replay"] = True
    return payload


def result_payload(result: SubmitResult) -> SubmitAnswer:
    """What ``vq submit --json`` prints (and the ``submit`` RPC returns)."""
    return group_payload(result) if result.group_id is not None else submit_payload(result)


def group_payload(result: SubmitResult) -> GroupSubmitAnswer:
    """``--json`` of an array or chain: the group id and every spec in index order."""
    group_id, jobs, warnings = result.group_id or "", result.specs, result.capacity_warnings
    if result.group_kind == "array":
        return {
            "array_group_id": group_id,
            "jobs": [spec_json(spec) for spec in jobs],
            "capacity_warnings": warnings,
        }
    return {
        "chain_group_id": group_id,
        "jobs": [spec_json(spec) for spec in jobs],
        "capacity_warnings": warnings,
    }
