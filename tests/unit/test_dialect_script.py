"""The batch script as text: golden renderings per dialect and option, refused values.

Running the script is tested in ``test_dialect_script_run.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vq.dialects import SLURM, TORQUE, ProgramHooks, UnsafeSchedulerValue
from vq.errors import InvalidInput

from .dialect_requests import CASES, DIALECTS, request

GOLDEN = Path(__file__).parent.parent / "fixtures" / "dialects" / "golden"
#: dash is the reference; a compute node's /bin/sh may be bash, in POSIX mode.
SHELLS = [shutil.which("dash") or "/bin/sh", *([b] if (b := shutil.which("bash")) else [])]


# --------------------------------------------------------------------------------------
# golden scripts
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_script(dialect: str, case: str) -> None:
    """Set VQ_UPDATE_GOLDEN=1 to rewrite the files after an intended change."""
    rendered = DIALECTS[dialect].render_script(CASES[case])
    path = GOLDEN / f"{dialect}_{case}.sh"
    if os.environ.get("VQ_UPDATE_GOLDEN") == "1":
        path.write_text(rendered, encoding="utf-8")
    assert rendered == path.read_text(encoding="utf-8")
    for shell in SHELLS:
        checked = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
        assert checked.returncode == 0, (shell, checked.stderr)


def test_directive_details() -> None:
    slurm = SLURM.render_script(CASES["basic"]).splitlines()
    assert "#SBATCH --time=0-01:31:00" in slurm  # 5430 s rounded up to whole minutes
    assert "#SBATCH --mem=4096M" in slurm and "#SBATCH --ntasks=2" in slurm
    assert "#SBATCH --partition=debug" in slurm and "#SBATCH --qos=normal" in slurm
    omitted = SLURM.render_script(CASES["mem_omitted"])
    assert "--mem" not in omitted and "#SBATCH --time=0-00:01:00" in omitted
    assert "export VQ_MEM_MB=4096" in omitted  # the job still knows its budget
    torque = TORQUE.render_script(CASES["basic"]).splitlines()
    assert "#PBS -l walltime=01:30:30" in torque and "#PBS -l mem=4096mb" in torque
    assert "#PBS -l nodes=1:ppn=4" in torque and "#PBS -q debug" in torque
    assert "#PBS -A chem" in torque and not any("normal" in line for line in torque)
    assert "-l mem" not in TORQUE.render_script(CASES["mem_omitted"])
    days = SLURM.render_script(request(wall_time_seconds=3 * 86400 + 1))
    assert "#SBATCH --time=3-00:01:00" in days


# --------------------------------------------------------------------------------------
# refused values
# --------------------------------------------------------------------------------------
HOSTILE = [
    ("partition", "debug\n#SBATCH --uid=0"),
    ("partition", "a b"),
    ("partition", "$(id)"),
    ("partition", "`id`"),
    ("partition", "x;y"),
    ("partition", ""),
    ("partition", "dé"),
    ("account", "chem'"),
    ("qos", '"normal"'),
    ("workspace", "/tmp/a b"),
    ("workspace", "relative/path"),
    ("workspace", "/tmp/../etc"),
    ("workspace", "/tmp/%j"),
    ("workspace", "/tmp/x\n#SBATCH --uid=0"),
    ("workspace", "/"),
    ("stdout_path", "../out.log"),
    ("stdout_path", "/etc/out.log"),
    ("stderr_path", "_vq/exit-code"),
    ("stderr_path", "err %j.log"),
    ("node_scratch_dir", "$(id)"),
    ("node_scratch_dir", "/tmp/`x`"),
    ("node_scratch_dir", "relative"),
    ("node_scratch_dir", "${X:-/tmp}"),
    ("node_scratch_dir", "/tmp/../x"),
    ("node_scratch_dir", '/tmp/"x"'),
    ("gnu_time_command", "time"),
    ("gnu_time_command", "/usr/bin/time -v"),
    ("nonce", "a:b"),
    ("nonce", ""),
    ("job_id", "NOTAJOBID123"),
    ("job_id", "0123"),
]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize(("field", "value"), HOSTILE)
def test_hostile_values_are_refused_naming_the_field(dialect: str, field: str, value: str) -> None:
    with pytest.raises(UnsafeSchedulerValue) as caught:
        DIALECTS[dialect].render_script(request(**{field: value}))
    assert caught.value.field == field
    assert isinstance(caught.value, InvalidInput) and caught.value.exit_code == 4
    assert field in caught.value.message and caught.value.hint


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"command": ()}, "command"),
        ({"command": ("echo", "a\x00b")}, "command"),
        ({"command": ("echo", "\udcff")}, "command"),
        ({"cpus": 0}, "cpus"),
        ({"mem_mb": -1}, "mem_mb"),
        ({"wall_time_seconds": 0}, "wall_time_seconds"),
        ({"mem_directive": "sometimes"}, "scheduler_mem_directive"),
        ({"environment": {"PATH": "/x"}}, "environment"),
        ({"environment": {"VQ_JOB_ID": "x"}}, "environment"),
        ({"environment": {"VQ_PROGRAM_EXE": "/driver/bin/orca"}}, "environment"),
        ({"prologue": ("echo \x00",)}, "prologue"),
        (
            {"hooks": ProgramHooks(command_wrapper=("a\x00",))},
            "scheduler_program_hooks.command_wrapper",
        ),
    ],
)
def test_other_refusals(changes: dict[str, object], field: str) -> None:
    with pytest.raises(UnsafeSchedulerValue) as caught:
        SLURM.render_script(request(**changes))
    assert caught.value.field == field


DIRECTIVE_LINE = re.compile(r"#(SBATCH|PBS) [A-Za-z0-9._+,=:/@ -]+")
FREE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=24
) | st.sampled_from(["debug", "/scratch/ok", "logs/out.log", "a\n#SBATCH --uid=0", "%j"])


@settings(max_examples=150, deadline=None)
@given(
    dialect=st.sampled_from(sorted(DIALECTS)),
    field=st.sampled_from(["partition", "account", "qos", "workspace", "stdout_path"]),
    value=FREE_TEXT,
)
def test_any_value_is_refused_or_stays_one_plain_directive(
    dialect: str, field: str, value: str
) -> None:
    baseline = _directive_lines(DIALECTS[dialect].render_script(CASES["basic"]))
    try:
        script = DIALECTS[dialect].render_script(replace(CASES["basic"], **{field: value}))
    except UnsafeSchedulerValue as refused:
        assert refused.field == field
        return
    lines = _directive_lines(script)
    assert len(lines) == len(baseline)
    assert all(DIRECTIVE_LINE.fullmatch(line) for line in lines), lines


def _directive_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith(("#SBATCH", "#PBS"))]


def test_a_torque_queue_is_one_name() -> None:
    SLURM.render_script(request(partition="a,b"))  # Slurm takes a list
    with pytest.raises(UnsafeSchedulerValue) as caught:
        TORQUE.render_script(request(partition="a,b"))
    assert caught.value.field == "partition"
