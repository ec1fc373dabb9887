"""The runtime identity of a scheduler-lane job that names a managed-runtime program
(§3.4): the target's runtime is authoritative, never a same-named checkout on the driver.

A program is managed on a lane when the driver registers it as ``venv`` or the lane
registers it (``[hosts.LANE.scheduler_programs.PROG]``). Its identity is resolved for the
target in this order; the first source that applies decides, and a source that applies
but cannot be resolved refuses the submit (it never falls through to an older one):

0. **bound**: ``--runtime-root ROOT --runtime-artifact DIGEST``, the submitter's explicit
   choice of a runtime generation;
1. **argv_wrapper**: an immutable wrapper already in the submitted argv: the command's
   first word is a file inside a runtime generation's payload,
   ``ROOT/generations/<64 hex digest>/payload/…`` (what ``vq runtime deploy`` makes). A
   generation is content-addressed and never rewritten, so its digest names exactly
   what runs; the job is bound to it and the compute node verifies it before the
   command starts (the job script's generation check);
2. **target_registry**: the lane's own registry entry: its interpreter and checkout on
   the cluster, resolved at submit over the lane's SSH runner to a commit and a version
   (:mod:`.lane_runtime_probe`). The commit is provenance; with ``expected_git_sha`` or
   ``--expected-sha`` it is enforced: refused at submit when it differs, and checked
   again by the job script on the node (exit 126, command not started, when the
   checkout moved), so only then is it also ``resolved_git_sha``;
3. **deployment_record**: the lane's last verified deployment of the program
   (:mod:`.runtime_deployments`); the job is bound to that generation.

With none the submit is refused before any spec exists: vq never downgrades the request
to the driver's own checkout. The pin records the lane (``scheduler_host``), the
identity (``artifact_identity``: a generation's digest; ``executable``: the wrapper or
registered interpreter), ``version``, ``git_sha`` and where it came from
(``target_source``). The lane refuses at dispatch a pin made for another target
(:func:`vq.executors.scheduler.outcome.pin_refusal`). Everything but the probe's SSH call
(:func:`resolve`'s ``probe``) is pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vq.config.hosts import LaneProgramSettings, LaneSettings
from vq.config.programs import VenvProgram
from vq.domain.spec import ProgramRuntimePin
from vq.errors import InvalidInput

from .lane_runtime_probe import ProbedRuntime, TargetUnavailable
from .runtime_deployments import DeploymentRecord, UnreadableRecord

__all__ = ["LaneRuntime", "is_managed", "resolve", "wrapper_generation"]

_WRAPPER = re.compile(r"(/[^\x00-\x1f\x7f]*?)/generations/([0-9a-f]{64})/payload/[^/].*")


@dataclass(frozen=True)
class LaneRuntime:
    """A resolved lane identity: the pin, and the generation the job is bound to."""

    pin: ProgramRuntimePin
    generation: dict[str, str] | None = None


def is_managed(programs: Mapping[str, Any], name: str, lane: LaneSettings | None) -> bool:
    """Whether ``name`` is a managed runtime for ``lane``: a driver ``venv`` program, or
    one the lane registers."""
    return isinstance(programs.get(name), VenvProgram) or (
        lane is not None and name in lane.programs
    )


def wrapper_generation(command: list[str]) -> tuple[str, str] | None:
    """``(root, digest)`` when the command's first word is a file inside a runtime
    generation's payload (an immutable wrapper), else None."""
    if not command:
        return None
    match = _WRAPPER.fullmatch(command[0])
    if match is None or ".." in command[0].split("/") or match.group(1) == "":
        return None
    return match.group(1), match.group(2)


def _refused(message: str, hint: str) -> InvalidInput:
    return InvalidInput(message, hint=hint)


def _generation_pin(
    name: str,
    target: str,
    source: str,
    root: str,
    digest: str,
    executable: str,
    record: DeploymentRecord | None,
) -> LaneRuntime:
    """A pin on generation ``digest``; version and commit from ``record`` when it
    records that very generation."""
    same = record is not None and record.digest == digest
    pin = ProgramRuntimePin(
        program=name,
        kind="venv",
        scheduler_host=target,
        artifact_identity=digest,
        executable=executable,
        version=record.version if same and record is not None else None,
        git_sha=record.git_sha if same and record is not None else None,
        target_source=source,
    )
    return LaneRuntime(pin, {"root": root, "digest": digest})


def _check_expected(runtime: LaneRuntime, target: str, expected_sha: str | None) -> LaneRuntime:
    if expected_sha is None:
        return runtime
    sha = runtime.pin.git_sha
    if sha is None:
        raise _refused(
            f"--expected-sha cannot be checked for scheduler lane {target!r}: the runtime "
            f"it resolved to ({runtime.pin.target_source}) records no commit",
            hint="register the program's checkout on the lane ([hosts.LANE."
            "scheduler_programs.PROG]) or deploy from a git checkout; the digest is the "
            "identity otherwise",
        )
    if not sha.lower().startswith(expected_sha.lower()):
        raise _refused(
            f"program {runtime.pin.program!r} on scheduler lane {target!r} is at commit "
            f"{sha}, not the expected {expected_sha}",
            hint="update the lane's runtime, or submit without --expected-sha",
        )
    update: dict[str, object] = {"enforce_git_sha": True}
    if runtime.pin.target_source == "target_registry":
        update["resolved_git_sha"] = sha  # the node refuses any other commit
    return LaneRuntime(runtime.pin.model_copy(update=update), runtime.generation)


def resolve(
    name: str,
    target: str,
    command: list[str],
    *,
    bound: tuple[str, str] | None,
    registered: LaneProgramSettings | None,
    record: Callable[[], DeploymentRecord | None],
    probe: Callable[[LaneProgramSettings], ProbedRuntime],
    expected_sha: str | None = None,
) -> LaneRuntime:
    """The identity of managed program ``name`` on lane ``target`` (module docstring),
    or InvalidInput. ``record`` reads the lane's deployment record (it may raise
    :class:`UnreadableRecord`), ``probe`` resolves a registry entry over SSH (it may
    raise :class:`TargetUnavailable`); each is called only when its source is reached."""
    return _check_expected(
        _resolve(name, target, command, bound, registered, record, probe), target, expected_sha
    )


def _resolve(
    name: str,
    target: str,
    command: list[str],
    bound: tuple[str, str] | None,
    registered: LaneProgramSettings | None,
    record: Callable[[], DeploymentRecord | None],
    probe: Callable[[LaneProgramSettings], ProbedRuntime],
) -> LaneRuntime:
    if bound is not None:
        root, digest = bound
        payload = f"{root.rstrip('/')}/generations/{digest}/payload"
        return _generation_pin(name, target, "bound", root, digest, payload, _quiet(record))
    wrapper = wrapper_generation(command)
    if wrapper is not None:
        root, digest = wrapper
        known = _quiet(record)
        return _generation_pin(name, target, "argv_wrapper", root, digest, command[0], known)
    if registered is not None:
        try:
            found = probe(registered)
        except TargetUnavailable as exc:
            raise _refused(
                f"program {name!r} cannot be resolved on scheduler lane {target!r}: {exc.reason}",
                hint=f"fix [hosts.{target}.scheduler_programs.{name}] or the install it "
                "names; nothing was queued",
            ) from None
        expected = registered.expected_git_sha
        if expected is not None and not found.git_sha.startswith(expected.lower()):
            raise _refused(
                f"program {name!r} on scheduler lane {target!r} is at commit "
                f"{found.git_sha}, not the configured expected_git_sha {expected}",
                hint=f"update the checkout {registered.git_dir} on the cluster, or the "
                "configured expected_git_sha",
            )
        pin = ProgramRuntimePin(
            program=name,
            kind="venv",
            scheduler_host=target,
            executable=registered.python,
            python=registered.python,
            git_dir=registered.git_dir,
            git_sha=found.git_sha,
            # what runs only when the node enforces it (else a later commit may run)
            resolved_git_sha=found.git_sha if expected is not None else None,
            version=found.version,
            import_version=found.version if registered.import_check else None,
            enforce_git_sha=expected is not None,
            target_source="target_registry",
        )
        return LaneRuntime(pin)
    try:
        deployed = record()
    except UnreadableRecord as exc:
        raise _refused(
            f"program {name!r} cannot be resolved on scheduler lane {target!r}: its "
            f"deployment record is unusable: {exc}",
            hint=f"deploy it again: `vq runtime deploy DIR --root ROOT --lane {target} "
            f"--program {name}`",
        ) from None
    if deployed is not None:
        payload = f"{deployed.root.rstrip('/')}/generations/{deployed.digest}/payload"
        return _generation_pin(
            name, target, "deployment_record", deployed.root, deployed.digest, payload, deployed
        )
    raise _refused(
        f"program {name!r} is a managed runtime, and its runtime on scheduler lane "
        f"{target!r} cannot be resolved here: the driver's own checkout is not the "
        "cluster's, and the lane has no registry entry or verified deployment for it",
        hint=f"register it on the lane ([hosts.{target}.scheduler_programs.{name}] python, "
        f"git_dir), deploy it (`vq runtime deploy DIR --root ROOT --lane {target} "
        f"--program {name}`), or bind a generation (--runtime-root ROOT --runtime-artifact "
        "DIGEST)",
    )


def _quiet(record: Callable[[], DeploymentRecord | None]) -> DeploymentRecord | None:
    """The deployment record when it is readable (only to label a generation the job
    names itself with its version and commit), else None."""
    try:
        return record()
    except UnreadableRecord:
        return None
