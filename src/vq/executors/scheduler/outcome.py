"""Pure rules of a scheduler lane: how a scheduler job's end becomes a vq outcome, the
per-host token bucket, the batch-script request built from a spec and its lane, and the
dispatch refusals of a named Python payload with no launcher and of a runtime pin made
for another target.

No I/O here: the lane (``lane.py``) feeds these with what the worker observed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from vq.config.hosts import LaneSettings
from vq.dialects import ProgramHooks, ScriptRequest
from vq.domain.spec import JobSpec
from vq.domain.states import JobState

__all__ = [
    "SHEBANG_LIMIT",
    "Ending",
    "TokenBucket",
    "ending",
    "enforced_commit",
    "launcher_refusal",
    "pin_refusal",
    "python_payload",
    "script_request",
    "shebang_names_python",
    "staged_script_path",
    "unreached_retry",
]


@dataclass(frozen=True)
class Ending:
    """A scheduler job's end. ``state`` None: the exit code decides (retries apply)."""

    state: JobState | None
    exit_code: int | None
    reason: str | None


def ending(marker: int | None, abnormal: JobState | None, raw_state: str) -> Ending:
    """The outcome of an ended scheduler job (§4.4, §4.5).

    OUT_OF_MEMORY and TIMEOUT/DEADLINE win even over a marker of 0 (the scheduler cut
    the job short); otherwise the exit marker is the return code; with no marker, a job
    the scheduler ended is ABORTED_BY_QUEUE."""
    if abnormal in (JobState.OOM_KILLED, JobState.TIME_EXCEEDED):
        return Ending(abnormal, marker, f"the scheduler ended the job as {raw_state}")
    if marker is not None:
        return Ending(None, marker, None)
    return Ending(
        JobState.ABORTED_BY_QUEUE,
        None,
        f"the scheduler job ended ({raw_state or 'gone'}) without writing an exit marker",
    )


def unreached_retry(lane: LaneSettings, tries: int, detail: str) -> tuple[float, str]:
    """After the ``tries``-th submit that could not reach the controller (nothing was
    submitted): the delay before the next (``poll_interval`` doubled per try, at most
    ``backoff_seconds``) and the reason shown while the job waits for it."""
    delay = min(lane.backoff_seconds, lane.poll_interval * 2 ** min(max(tries, 1) - 1, 16))
    return delay, f"the scheduler could not be reached ({detail}); submitting again"


class TokenBucket:
    """``per_minute`` tokens a minute, at most ``per_minute`` saved up."""

    def __init__(self, per_minute: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._rate = per_minute / 60.0
        self._capacity = float(per_minute)
        self._tokens = float(per_minute)
        self._monotonic = monotonic
        self._at = monotonic()

    def _refill(self) -> None:
        now = self._monotonic()
        self._tokens = min(self._capacity, self._tokens + (now - self._at) * self._rate)
        self._at = now

    def take(self, count: int = 1) -> bool:
        """Spend ``count`` tokens if there are that many."""
        self._refill()
        if self._tokens + 1e-9 < count:
            return False
        self._tokens -= count
        return True

    def wait_seconds(self, count: int = 1) -> float:
        """How long until ``count`` tokens are there."""
        self._refill()
        return max(0.0, (count - self._tokens) / self._rate)


def pin_refusal(spec: JobSpec, lane: LaneSettings) -> str | None:
    """Why ``spec``'s runtime pin forbids dispatch to ``lane`` (a pin resolved for another
    scheduler target), or None. The pin is deliberately not checked against the driver's
    own checkout: the target's runtime is the authority (§3.4)."""
    pin = spec.program_runtime_pin
    if pin is None or pin.scheduler_host is None or pin.scheduler_host == lane.name:
        return None
    return (
        f"program {spec.program!r} was pinned to the runtime of scheduler target "
        f"{pin.scheduler_host!r}, not lane {lane.name}"
    )


#: The longest ``#!`` line read from a staged script (the kernel reads at most 256 bytes).
SHEBANG_LIMIT = 256
_PYTHON_NAME = re.compile(r"python[0-9.]*")


def shebang_names_python(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) opens with a ``#!`` line that runs Python:
    ``#!/usr/bin/python3``, ``#!/opt/env/bin/python3.11 -u``, ``#!/usr/bin/env python3``
    or ``#!/usr/bin/env -S python3 -u``. A line not ended within :data:`SHEBANG_LIMIT`
    bytes is no ``#!`` line the kernel would run."""
    if not head.startswith(b"#!"):
        return False
    line, newline, _ = head[:SHEBANG_LIMIT].partition(b"\n")
    if not newline:
        return False
    words = line[2:].decode("utf-8", "replace").split()
    if not words:
        return False
    interpreter = words[0].rsplit("/", 1)[-1]
    if interpreter == "env":
        named = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        interpreter = named[0].rsplit("/", 1)[-1] if named else ""
    return _PYTHON_NAME.fullmatch(interpreter) is not None


def staged_script_path(command: list[str]) -> str | None:
    """The workspace-relative path of the command's first word when it could be a file
    staged with the workspace (relative, no ``..``, not a directory), else None: what
    :func:`launcher_refusal` reads the ``#!`` line of."""
    if not command:
        return None
    first = command[0]
    parts = [part for part in first.split("/") if part not in ("", ".")]
    if first.startswith("/") or not parts or ".." in parts or first.endswith("/"):
        return None
    return "/".join(parts)


def python_payload(command: list[str], head: bytes | None) -> str | None:
    """What makes ``command`` a Python payload, or None: its first word is a Python file
    (``.py``) or zip application (``.pyz``), or ``head`` (the first bytes of the staged
    file it names) opens with a ``#!`` line that runs Python."""
    if not command:
        return None
    if command[0].endswith((".py", ".pyz")):
        kind = "zip application" if command[0].endswith(".pyz") else "file"
        return f"the Python {kind} {command[0]!r}"
    if head is not None and shebang_names_python(head):
        return f"the Python script {command[0]!r} (its #! line runs python)"
    return None


def launcher_refusal(spec: JobSpec, lane: LaneSettings, head: bytes | None = None) -> str | None:
    """Why ``spec`` cannot be dispatched to ``lane`` for want of a launcher, or None.

    A job that names a program (``--program``) and whose command starts with a Python
    payload (:func:`python_payload`: ``run.py``, ``./tools/fit.py``, ``app.pyz``, or a
    staged script whose ``#!`` line runs python; ``head`` is that file's first bytes,
    None when it is not a staged regular file) needs something on the cluster to choose
    that program's interpreter: the lane's trusted
    ``[hosts.LANE.scheduler_program_hooks.PROGRAM] command_wrapper``, or an interpreter
    the command itself names (``python3 run.py``). Without either the file would run under
    whatever its ``#!`` line finds on the compute node, not the program's runtime, so the
    job fails at dispatch instead (§4.3). A command that starts with anything else, or a
    job with no program, is not a Python payload here."""
    if spec.program is None or not spec.command:
        return None
    payload = python_payload(spec.command, head)
    if payload is None:
        return None
    hooks = lane.program_hooks.get(spec.program)
    if hooks is not None and hooks.command_wrapper:
        return None
    return (
        f"the command starts with {payload} of program "
        f"{spec.program!r}, and lane {lane.name} has no launcher for it: set "
        f"[hosts.{lane.name}.scheduler_program_hooks.{spec.program}] command_wrapper to "
        "the program's interpreter on the cluster, or name the interpreter in the command"
    )


def enforced_commit(spec: JobSpec) -> tuple[str, str] | None:
    """``(git_dir, commit)`` of an enforced pin resolved from the lane's program registry
    (``expected_git_sha`` configured or ``--expected-sha``): the node checks it before the
    command. A pin that is only provenance is not checked."""
    pin = spec.program_runtime_pin
    if (
        pin is None
        or pin.target_source != "target_registry"
        or not pin.enforce_git_sha
        or pin.git_dir is None
        or pin.git_sha is None
    ):
        return None
    return pin.git_dir, pin.git_sha


def script_request(
    spec: JobSpec, lane: LaneSettings, nonce: str, forwarded: Mapping[str, str] | None = None
) -> ScriptRequest:
    """The batch script's request for ``spec`` on ``lane`` (paths on the cluster).

    ``forwarded`` are the variables the submit named (``--export NAME``/``--env``, the
    API's ``env``): the script's ``user_environment``."""
    hooks = None
    if spec.program is not None and spec.program in lane.program_hooks:
        table = lane.program_hooks[spec.program]
        hooks = ProgramHooks(
            tuple(table.prologue), tuple(table.epilogue), tuple(table.command_wrapper)
        )
    environment: dict[str, str] = {}
    if spec.job_name:
        environment["VQ_JOB_NAME"] = spec.job_name
    if spec.array_index is not None:
        environment["VQ_ARRAY_INDEX"] = str(spec.array_index)
        environment["VQ_ARRAY_TOTAL"] = str(spec.array_total)
        if spec.array_value is not None:
            environment["VQ_ARRAY_VALUE"] = spec.array_value
    bound = spec.runtime_generation
    return ScriptRequest(
        runtime_generation=None if bound is None else (bound.root, bound.digest),
        runtime_commit=enforced_commit(spec),
        job_id=spec.id,
        nonce=nonce,
        command=tuple(spec.command),
        workspace=lane.remote_workspace(spec.id),
        cpus=spec.cpus,
        stdout_path=spec.stdout_path,
        stderr_path=spec.stderr_path,
        scheduler_tasks=spec.scheduler_tasks,
        mem_mb=spec.mem_mb,
        wall_time_seconds=spec.wall_time_seconds,
        program=spec.program,
        partition=lane.partition,
        account=lane.account,
        qos=lane.qos,
        mem_directive=lane.mem_directive,
        gnu_time_command=lane.gnu_time_command,
        node_scratch_dir=lane.node_scratch_dir,
        prologue=lane.prologue,
        epilogue=lane.epilogue,
        hooks=hooks,
        environment=environment,
        user_environment=dict(forwarded or {}),
    )
