"""The batch script of one packed allocation (pure rendering).

Job level: ``--nodes=1 --ntasks=n --cpus-per-task=C --mem=<n·M>M`` (``--gres=<gres>:<n·G>``
only when the tasks use GPUs), the effective ``--time``, the target's partitions, account,
qos and constraint, ``--job-name=vqp-<alloc> --comment=vq-pack:<alloc>`` and
``--output=<log_root>/<alloc>-%j.out``.

Per task (slot 0..n-1) one background step::

    srun --exclusive --exact --nodes=1 --ntasks=1 --cpus-per-task=C --mem=<M>M
         [--gres=<gres>:<G>] --job-name=vqp-<alloc>-<slot> --chdir=<work_root>/<alloc>/<slot>
         --output=<log_root>/<alloc>-%j-<slot>.out  ARGS...  < <slot>/_vq/stdin

whose exit status becomes the marker ``<work_root>/<alloc>/<slot>/_vq/exit-code`` (written
to a temp name and renamed); then ``wait``. The script exits 0 only when every marker is 0.
Stdin is embedded base64 and decoded byte-exact before any step starts. Never emitted:
job-level ``--exclusive``, ``--overlap``, ``--mem=0``, CUDA device indices, raw flags; a
CPU-only task gets no GRES and no ``--nv``.
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Sequence

from vq.dialects.slurm_alloc import comment, job_name
from vq.packing.profiles import PackingProfile
from vq.packing.roster import Task
from vq.packing.timelimit import format_minutes

__all__ = ["comment", "job_name", "render_script", "sbatch_args", "step_argv", "step_name"]

_STDIN_END = "VQ_STDIN_END"


def step_name(allocation_id: str, slot: int) -> str:
    """The step of one slot: accounting's step rows carry it, so they map to slots."""
    return f"vqp-{allocation_id}-{slot}"


def sbatch_args(allocation_id: str, tasks: int, profile: PackingProfile) -> list[str]:
    """The allocation's directives, exactly as ``#SBATCH`` lines and the plan show them."""
    target, res = profile.target, profile.resources
    args = [
        "--nodes=1",
        f"--ntasks={tasks}",
        f"--cpus-per-task={res.cpus_per_task}",
        f"--mem={tasks * res.memory_mib_per_task}M",
    ]
    if res.gpus_per_task:
        args.append(f"--gres={target.gpu_gres}:{tasks * res.gpus_per_task}")
    args.append(f"--time={format_minutes(res.time_minutes)}")
    args.append(f"--partition={','.join(target.partitions)}")
    for flag, value in (
        ("account", target.account),
        ("qos", target.qos),
        ("constraint", target.constraint),
    ):
        if value is not None:
            args.append(f"--{flag}={value}")
    args += [
        f"--job-name={job_name(allocation_id)}",
        f"--comment={comment(allocation_id)}",
        f"--output={target.log_root}/{allocation_id}-%j.out",
    ]
    return args


def step_argv(
    allocation_id: str,
    slot: int,
    task: Task,
    profile: PackingProfile,
    *,
    separate_stderr: bool = False,
) -> list[str]:
    """The ``srun`` argument vector of one slot (without the stdin redirection)."""
    head, launcher = _step_parts(profile)
    options = _slot_options(allocation_id, slot, profile, separate_stderr=separate_stderr)
    return [*head, *options, *launcher, *task.args]


def _slot_options(
    allocation_id: str, slot: int, profile: PackingProfile, *, separate_stderr: bool = False
) -> list[str]:
    target = profile.target
    options = [
        f"--job-name={step_name(allocation_id, slot)}",
        f"--chdir={target.work_root}/{allocation_id}/{slot}",
        f"--output={target.log_root}/{allocation_id}-%j-{slot}.out",
    ]
    if separate_stderr:
        options.append(f"--error={target.log_root}/{allocation_id}-%j-{slot}.err")
    return options


def _step_parts(profile: PackingProfile) -> tuple[list[str], list[str]]:
    """The slot-independent parts of a step: srun's options, and the image launcher."""
    target, res = profile.target, profile.resources
    argv = [
        "srun",
        "--exclusive",
        "--exact",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={res.cpus_per_task}",
        f"--mem={res.memory_mib_per_task}M",
    ]
    if res.gpus_per_task:
        argv.append(f"--gres={target.gpu_gres}:{res.gpus_per_task}")
    launcher: list[str] = []
    if target.apptainer is not None and target.image is not None:
        launcher += [target.apptainer, "exec"]
        if res.gpus_per_task:
            launcher.append("--nv")
        launcher.append(target.image)
    return argv, launcher


#: What :func:`shlex.quote` leaves unquoted (its own test, compiled once).
_UNSAFE = re.compile(r"[^\w@%+=:,./-]", re.ASCII).search


def _join(args: Sequence[str]) -> str:
    """:func:`shlex.join`, byte for byte, without a call per safe word."""
    return " ".join(a if a and not _UNSAFE(a) else shlex.quote(a) for a in args)


def _stdin_block(path: str, data: bytes) -> list[str]:
    if not data:
        return [f": >{path}"]
    encoded = base64.encodebytes(data).decode().rstrip("\n")
    return [f"base64 -d >{path} <<'{_STDIN_END}'", encoded, _STDIN_END]


def render_script(
    allocation_id: str,
    tasks: Sequence[Task],
    profile: PackingProfile,
    directives: Sequence[str] | None = None,
    *,
    separate_stderr: bool = False,
) -> bytes:
    """The complete batch script (it embeds task arguments and stdin: not for plans).

    ``directives`` are :func:`sbatch_args` of this allocation when the caller has them.
    ``separate_stderr``: each step's stderr goes to ``<log_root>/<alloc>-%j-<slot>.err``
    instead of sharing the slot's ``.out`` (a packed array's elements keep both logs).
    """
    work = f"{profile.target.work_root}/{allocation_id}"
    if directives is None:
        directives = sbatch_args(allocation_id, len(tasks), profile)
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {arg}" for arg in directives]
    lines += [
        f"# vq packed allocation {allocation_id}: {len(tasks)} tasks. Generated; do not edit.",
        "set -u",
        "umask 077",
        f"W={work}",
    ]
    lines.append("mkdir -p " + " ".join(f'"$W/{slot}/_vq"' for slot in range(len(tasks))))
    for slot, task in enumerate(tasks):
        lines.append(f"# slot {slot}: {task.key}")
        lines += _stdin_block(f'"$W/{slot}/_vq/stdin"', task.stdin)
    head, launcher = _step_parts(profile)
    # every slot-independent part quoted once; the slot number (digits) joins its word
    name, chdir, output = _slot_options(allocation_id, 0, profile)[:3]
    step = f"{shlex.join(head)} {name[: -len('0')]}"  # vqp-<16 hex>-: nothing to quote
    chdir_q = shlex.quote(chdir[: -len("0")])
    output_q = shlex.quote(output[: -len("0.out")])
    error_q = shlex.quote("--error=" + output[len("--output=") : -len("0.out")])
    launch_q = f" {shlex.join(launcher)}" if launcher else ""
    for slot, task in enumerate(tasks):
        marker = f'"$W/{slot}/_vq/exit-code'
        error = f" {error_q}{slot}.err" if separate_stderr else ""
        lines.append(
            f"(\n  {step}{slot} {chdir_q}{slot} {output_q}{slot}.out{error}{launch_q} "
            f'{_join(task.args)} <"$W/{slot}/_vq/stdin"\n'
            f'  echo $? >{marker}.tmp" && mv -f {marker}.tmp" {marker}"\n) &'
        )
    lines += [
        "wait",
        "status=0",
        f"for slot in {' '.join(str(slot) for slot in range(len(tasks)))}; do",
        '  [ "$(cat "$W/$slot/_vq/exit-code" 2>/dev/null)" = 0 ] || status=1',
        "done",
        'exit "$status"',
    ]
    return ("\n".join(lines) + "\n").encode()
