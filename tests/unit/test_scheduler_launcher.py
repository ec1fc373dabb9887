"""A named Python payload needs a launcher on the cluster (§4.3): the lane's trusted
``command_wrapper`` for the program, or an interpreter in the command itself;
:func:`launcher_refusal` says why a job has none (the lane then fails its dispatch).
:func:`pin_refusal`: a runtime pin resolved for another scheduler target is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from vq.domain.spec import JobSpec, ProgramRuntimePin
from vq.executors.scheduler.outcome import launcher_refusal, pin_refusal
from vq.hosts_config import HostSettings, LaneSettings


def _lane(**hooks: Any) -> LaneSettings:
    lane = HostSettings.model_validate(
        {
            "ssh": "login",
            "scheduler_dialect": "slurm",
            "scratch_root": "/scratch",
            "scheduler_program_hooks": hooks,
        }
    ).lane("cluster")
    assert lane is not None
    return lane


def _spec(command: list[str], program: str | None = "fit") -> JobSpec:
    return JobSpec(
        id="a1b2c3d4e5f6",
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        command=command,
        cwd="/tmp/ws",
        cpus=1,
        program=program,
        scheduler_target="cluster",
    )


@pytest.mark.parametrize("entry", ["run.py", "./run.py", "tools/fit.py", "/opt/fit/run.py"])
def test_a_named_python_file_with_no_launcher_is_refused(entry: str) -> None:
    reason = launcher_refusal(_spec([entry, "--steps", "3"]), _lane())
    assert reason is not None
    assert repr(entry) in reason and "'fit'" in reason
    assert "[hosts.cluster.scheduler_program_hooks.fit] command_wrapper" in reason


def test_a_hook_table_without_a_wrapper_is_no_launcher() -> None:
    lane = _lane(fit={"prologue": ["module load fit"]})
    assert launcher_refusal(_spec(["run.py"]), lane) is not None


def test_the_programs_command_wrapper_is_the_launcher() -> None:
    lane = _lane(fit={"command_wrapper": ["/opt/fit/bin/python"]})
    assert launcher_refusal(_spec(["run.py"]), lane) is None


def test_another_programs_wrapper_does_not_count() -> None:
    lane = _lane(other={"command_wrapper": ["/opt/other/bin/python"]})
    assert launcher_refusal(_spec(["run.py"]), lane) is not None


@pytest.mark.parametrize(
    "command",
    [["python3", "run.py"], ["/opt/fit/bin/python", "run.py"], ["sh", "run.sh"], ["true"]],
)
def test_a_command_that_names_its_interpreter_or_is_not_python_passes(
    command: list[str],
) -> None:
    assert launcher_refusal(_spec(command), _lane()) is None


def test_a_job_without_a_program_is_not_a_named_payload() -> None:
    assert launcher_refusal(_spec(["run.py"], program=None), _lane()) is None


def _pinned(host: str | None) -> JobSpec:
    spec = _spec(["true"])
    spec.program_runtime_pin = ProgramRuntimePin(program="fit", scheduler_host=host)
    return spec


def test_a_pin_for_another_target_is_refused_and_one_for_this_lane_passes() -> None:
    reason = pin_refusal(_pinned("other-cluster"), _lane())
    assert reason is not None and "'other-cluster'" in reason and "lane cluster" in reason
    assert pin_refusal(_pinned("cluster"), _lane()) is None
    assert pin_refusal(_pinned(None), _lane()) is None  # not a target pin: not checked here
    assert pin_refusal(_spec(["true"]), _lane()) is None
