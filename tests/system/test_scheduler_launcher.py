"""A named Python payload on the real Slurm lane (§4.3): with no launcher its dispatch
fails before anything reaches Slurm; with the program's trusted ``command_wrapper`` it
runs under that interpreter. Needs root (the testbed), like test_scheduler_slurm."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Vq
from tests.system.slurm_lane import (
    sacct_ids,
    scratch,  # noqa: F401 - the fixture
    slurm_lane_keys,
    slurm_testbed,  # noqa: F401 - the fixture
    toml_table,
    write_config,
)
from tests.system.test_scheduler_slurm import _terminal
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(240)

PROGRAM = 'kind = "binary"\npath = "/bin/true"\n'


def _start(vq: Vq, testbed: SshTestbed, root: str, wrapper: list[str] | None) -> None:
    tables = [
        toml_table("hosts.cluster", slurm_lane_keys(testbed, root)),
        f"[programs.fit]\n{PROGRAM}",
    ]
    if wrapper is not None:
        tables.append(
            toml_table("hosts.cluster.scheduler_program_hooks.fit", {"command_wrapper": wrapper})
        )
    write_config(vq, *tables)
    vq.start_daemon()


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "inputs"
    source.mkdir()
    (source / "run.py").write_text("import sys\nprint('ran under', sys.version_info[0])\n")
    return source


def test_a_named_python_file_without_a_launcher_fails_dispatch_and_never_reaches_slurm(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    scratch: str,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    _start(vq, slurm_testbed, scratch, None)
    job = vq.submit("cluster", "--program", "fit", str(_source(tmp_path)), "--", "run.py")
    done = _terminal(vq, job)
    assert done["state"] == "FAILED", done
    assert "no launcher" in done["failure_reason"], done["failure_reason"]
    assert done.get("scheduler_job_id") is None
    assert sacct_ids(slurm_testbed, f"vq-{job}") == []


def test_the_programs_command_wrapper_launches_it(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    scratch: str,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    _start(vq, slurm_testbed, scratch, ["/usr/bin/python3"])
    job = vq.submit("cluster", "--program", "fit", str(_source(tmp_path)), "--", "run.py")
    done = _terminal(vq, job)
    assert (done["state"], done["exit_code"]) == ("COMPLETED", 0), done
    assert (vq.root / "jobs" / job / "stdout.log").read_text() == "ran under 3\n"


def test_a_staged_script_whose_shebang_runs_python_needs_a_launcher_too(
    vq: Vq,
    slurm_testbed: SshTestbed,  # noqa: F811 - the fixture
    scratch: str,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    _start(vq, slurm_testbed, scratch, None)
    source = tmp_path / "inputs"
    source.mkdir()
    (source / "fit").write_text("#!/usr/bin/env python3\nprint('ran')\n")
    (source / "fit").chmod(0o755)
    job = vq.submit("cluster", "--program", "fit", str(source), "--", "./fit")
    done = _terminal(vq, job)
    assert done["state"] == "FAILED", done
    assert "the Python script './fit' (its #! line runs python)" in done["failure_reason"]
    assert done.get("scheduler_job_id") is None
    assert sacct_ids(slurm_testbed, f"vq-{job}") == []
