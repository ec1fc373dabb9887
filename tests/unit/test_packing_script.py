"""The packed batch script: golden files, and what it must never contain."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.packing_support import gpu_profile, profile
from vq.packing.roster import Task
from vq.packing.script import render_script

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "packing"
ALLOC = "0123456789abcdef"

CPU_TASKS = [
    Task("t0", ("true",)),
    Task("t1", ("sh", "-c", "exit 3"), b"line one\n\x00\xff binary\n"),
    Task("t2", ("python3", "it's a $HOME `test`", "--flag=a b"), b"x" * 100),
]
GPU_TASKS = [Task("g0", ("train", "--seed", "7"), b'{"seed": 7}\n'), Task("g1", ("train",))]


def _check(name: str, script: bytes) -> None:
    path = GOLDEN / name
    if os.environ.get("VQ_UPDATE_GOLDEN") == "1":
        path.write_bytes(script)
    assert script == path.read_bytes(), f"{name} changed; VQ_UPDATE_GOLDEN=1 rewrites it"


@pytest.mark.parametrize(
    ("name", "prof", "roster"),
    [("cpu-3.sh", profile(), CPU_TASKS), ("gpu-apptainer-2.sh", gpu_profile(), GPU_TASKS)],
)
def test_golden(name: str, prof: object, roster: list[Task]) -> None:
    script = render_script(ALLOC, roster, prof)  # type: ignore[arg-type]
    _check(name, script)


def test_cpu_script_has_no_gpu_or_forbidden_flags() -> None:
    text = render_script(ALLOC, CPU_TASKS, profile()).decode()
    for forbidden in ("--gres", "--nv", "--overlap", "--mem=0", "CUDA_VISIBLE_DEVICES"):
        assert forbidden not in text
    assert "#SBATCH --exclusive" not in text
    assert text.count("srun --exclusive --exact --nodes=1 --ntasks=1") == 3
    assert text.count(") &") == 3 and "\nwait\n" in text


def test_gpu_steps_get_their_own_gres_and_nv() -> None:
    text = render_script(ALLOC, GPU_TASKS, gpu_profile()).decode()
    assert "#SBATCH --gres=gpu:2\n" in text
    assert text.count("--gres=gpu:1 ") == 2
    assert text.count("/usr/bin/apptainer exec --nv /cluster/images/chem.sif") == 2


def test_the_script_reproduces_stdin_and_args_exactly(tmp_path: Path) -> None:
    """Run the rendered script with a stand-in ``srun`` that runs its command locally."""
    import shutil
    import subprocess

    prof = profile(target={"work_root": str(tmp_path / "work"), "log_root": str(tmp_path)})
    script = render_script(ALLOC, CPU_TASKS, prof)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    # A stand-in for srun: skip its options, run the command with the step's stdin.
    srun.write_text(
        "#!/bin/bash\n"
        'while [[ "$1" == --* ]]; do\n'
        '  case "$1" in --chdir=*) cd "${1#--chdir=}";; esac; shift\n'
        "done\n"
        'for a in "$@"; do printf "%s\\n" "$a" >>args; done\n'
        "cat >stdin.copy\n"
        'exec "$@" </dev/null\n'
    )
    srun.chmod(0o755)
    (tmp_path / "job.sh").write_bytes(script)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    proc = subprocess.run(
        ["bash", str(tmp_path / "job.sh")], env=env, capture_output=True, timeout=30, check=False
    )
    assert proc.returncode == 1, proc.stderr  # slot 1 exits 3 (python3 gets a missing file)
    work = tmp_path / "work" / ALLOC
    assert (work / "0" / "_vq" / "exit-code").read_text() == "0\n"
    assert (work / "1" / "_vq" / "exit-code").read_text() == "3\n"
    for slot, task in enumerate(CPU_TASKS):
        assert (work / str(slot) / "stdin.copy").read_bytes() == task.stdin
        assert (work / str(slot) / "args").read_text().splitlines() == list(task.args)
    shutil.rmtree(tmp_path / "work")
