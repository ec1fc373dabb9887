"""A packed array's workspace reaches the cluster: ``vq submit cluster SOURCE --array …
--pack tb`` stages each element's workspace into its slot's directory
``<work_root>/<alloc>/<slot>/`` (without the driver's ``_vq`` records) and the batch
script beside them, in the one SSH call that runs ``sbatch``.

Real daemon, real CLI, the testbed's Slurm 22.05 over real sshd (the lane and profile of
``test_pack_lane_slurm.py``). Needs root (the testbed); skipped without it and FAILS
under ``CI=true``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Vq
from tests.system.slurm_lane import slurm_testbed  # noqa: F401 - the fixture
from tests.system.test_pack_lane_slurm import (  # the lane's profile and helpers
    _all_terminal,
    _configure,
    remote_root,  # noqa: F401 - the fixture
)
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(300)


def test_each_element_runs_in_its_staged_workspace(
    vq: Vq,
    tmp_path: Path,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,  # noqa: F811
) -> None:
    _configure(vq, slurm_testbed, remote_root)
    source = tmp_path / "inputs"
    (source / "data").mkdir(parents=True)
    (source / "input.txt").write_text("shared input\n")
    (source / "data" / "table.csv").write_text("a,b\n1,2\n")
    vq.start_daemon()
    show = 'cat input.txt data/table.csv; echo "$VQ_ARRAY_INDEX" >made.txt'
    done = vq.run(
        "submit", "cluster", str(source), "--json", "--array", "0-2", "--pack", "tb", "--",
        "sh", "-c", show,
    )  # fmt: skip
    jobs = [job["id"] for job in json.loads(done.stdout)["jobs"]]
    specs = _all_terminal(vq, jobs)
    assert [(s["state"], s["exit_code"]) for s in specs] == [("COMPLETED", 0)] * 3
    for index, spec in enumerate(specs):
        log = (vq.root / "jobs" / spec["id"] / "stdout.log").read_text()
        assert log == "shared input\na,b\n1,2\n"
        slot = (
            Path(remote_root)
            / "work"
            / spec["scheduler_pack_id"]
            / str(spec["scheduler_pack_slot"])
        )
        assert (slot / "made.txt").read_text() == f"{index}\n"  # it ran in its own slot
        assert (slot / "data" / "table.csv").read_text() == "a,b\n1,2\n"
        # the slot's _vq is the batch script's alone: no driver records were staged
        assert sorted(p.name for p in (slot / "_vq").iterdir()) == ["exit-code", "stdin"]
    staged = Path(remote_root) / "work" / specs[0]["scheduler_pack_id"] / "_vq" / "job.sh"
    assert staged.read_bytes().startswith(b"#!/bin/bash\n")
