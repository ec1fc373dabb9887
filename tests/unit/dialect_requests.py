"""The script requests the dialect tests share (golden cases and a base request)."""

from __future__ import annotations

from dataclasses import replace

from vq.dialects import SLURM, TORQUE, ProgramHooks, SchedulerDialect, ScriptRequest

J = "0123456789ab"


def request(**changes: object) -> ScriptRequest:
    base = ScriptRequest(
        job_id=J,
        nonce="n0nce",
        command=("orca", "input file.inp"),
        workspace="/scratch/alice/vq/0123456789ab",
        cpus=4,
        mem_mb=4096,
        wall_time_seconds=5430,
        program="orca",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


CASES: dict[str, ScriptRequest] = {
    "basic": request(scheduler_tasks=2, partition="debug", account="chem", qos="normal"),
    "node_scratch": request(node_scratch_dir="$TMPDIR/vq"),
    "hooks": request(
        prologue=("module load orca/6.0",),
        epilogue=("echo site done",),
        hooks=ProgramHooks(
            prologue=('export ORCA_TMP="$PWD/tmp"',),
            epilogue=("rm -rf tmp",),
            command_wrapper=("/opt/orca/bin/run-orca", "--threads=4"),
        ),
        environment={"VQ_JOB_NAME": "water dimer"},
    ),
    "mem_omitted": request(mem_directive="omit", wall_time_seconds=59),
}
DIALECTS: dict[str, SchedulerDialect] = {"slurm": SLURM, "torque": TORQUE}
