"""A named Python payload needs a launcher on the cluster (§4.3): the lane's trusted
``command_wrapper`` for the program, or an interpreter in the command itself;
:func:`launcher_refusal` says why a job has none (the lane then fails its dispatch).
:func:`pin_refusal`: a runtime pin resolved for another scheduler target is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from vq.config.hosts import HostSettings, LaneSettings
from vq.domain.spec import JobSpec, ProgramRuntimePin
from vq.executors.scheduler.outcome import (
    launcher_refusal,
    pin_refusal,
    python_payload,
    shebang_names_python,
    staged_script_path,
)


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


@pytest.mark.parametrize(
    "entry", ["run.py", "./run.py", "tools/fit.py", "/opt/fit/run.py", "app.pyz"]
)
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


@pytest.mark.parametrize(
    "head",
    [
        b"#!/usr/bin/python3\nprint(1)\n",
        b"#!/opt/fit/bin/python3.11 -u\n",
        b"#! /usr/bin/python\n",
        b"#!/usr/bin/env python3\n",
        b"#!/usr/bin/env -S python3 -u\n",
        b"#!/usr/bin/env PYTHONHASHSEED=0 python\n",
    ],
)
def test_a_staged_script_whose_shebang_runs_python_needs_a_launcher(head: bytes) -> None:
    assert shebang_names_python(head)
    reason = launcher_refusal(_spec(["./fit", "--steps", "3"]), _lane(), head)
    assert reason is not None and "the Python script './fit'" in reason
    assert "#! line runs python" in reason
    wrapped = _lane(fit={"command_wrapper": ["/opt/fit/bin/python"]})
    assert launcher_refusal(_spec(["./fit"]), wrapped, head) is None


@pytest.mark.parametrize(
    "head",
    [
        b"#!/bin/sh\nexec python3 run.py\n",
        b"#!/usr/bin/env bash\n",
        b"#!/usr/bin/env\n",
        b"#!/usr/bin/pythonista\n",
        b"print('no shebang')\n",
        b"#!/usr/bin/python3",  # no end of line: not a line the kernel runs
        b"#!" + b" " * 300 + b"/usr/bin/python3\n",  # past the kernel's limit
        b"",
    ],
)
def test_other_scripts_are_not_python_payloads(head: bytes) -> None:
    assert not shebang_names_python(head)
    assert launcher_refusal(_spec(["./run"]), _lane(), head) is None


def test_a_python_zip_application_needs_a_launcher() -> None:
    reason = launcher_refusal(_spec(["tools/fit.pyz", "x"]), _lane())
    assert reason is not None and "the Python zip application 'tools/fit.pyz'" in reason
    assert python_payload(["python3", "fit.pyz"], None) is None


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        ("run", "run"),
        ("./tools/fit", "tools/fit"),
        ("tools//./fit", "tools/fit"),
        ("/opt/fit/run", None),
        ("../run", None),
        ("tools/../../run", None),
        ("tools/", None),
        (".", None),
    ],
)
def test_only_a_path_inside_the_workspace_is_read(first: str, expected: str | None) -> None:
    assert staged_script_path([first, "arg"]) == expected
    assert staged_script_path([]) is None
