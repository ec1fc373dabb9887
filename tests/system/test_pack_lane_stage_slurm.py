"""A packed array's workspace goes to the cluster and comes back: ``vq submit cluster
SOURCE --array … --pack tb`` stages each element's workspace into its slot's directory
``<work_root>/<alloc>/<slot>/`` (without the driver's ``_vq`` records) and the batch
script beside them, in the one SSH call that runs ``sbatch``; what an element writes in
its slot comes back into its own workspace (``vq fetch`` gives it), and a slot whose
files the archive rules refuse ends ``artifacts_unavailable`` with its exit code kept.

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
)
from tests.testbed import SshTestbed

pytestmark = pytest.mark.timeout(300)


def test_each_element_runs_in_its_staged_workspace(
    vq: Vq,
    tmp_path: Path,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,
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


def test_what_each_element_writes_in_its_slot_comes_back_to_its_workspace(
    vq: Vq,
    tmp_path: Path,
    slurm_testbed: SshTestbed,  # noqa: F811
    remote_root: str,
) -> None:
    _configure(vq, slurm_testbed, remote_root)
    source = tmp_path / "inputs"
    source.mkdir()
    (source / "input.txt").write_text("shared input\n")
    vq.start_daemon()
    # element 2 leaves a link out of its workspace (refused on the way back) and exits 3
    write = (
        'mkdir -p out/deep && echo "result $VQ_ARRAY_INDEX" >out/deep/result.txt; '
        'echo "element $VQ_ARRAY_INDEX"; echo "note $VQ_ARRAY_INDEX" >&2; '
        '[ "$VQ_ARRAY_INDEX" != 2 ] || { ln -s /etc/passwd leak; exit 3; }'
    )
    done = vq.run(
        "submit", "cluster", str(source), "--json", "--array", "0-3", "--pack", "tb", "--",
        "sh", "-c", write,
    )  # fmt: skip
    jobs = [job["id"] for job in json.loads(done.stdout)["jobs"]]
    specs = _all_terminal(vq, jobs)
    assert [(s["state"], s["exit_code"]) for s in specs] == [
        ("COMPLETED", 0),
        ("COMPLETED", 0),
        ("FAILED", 3),  # its exit code is kept although its files could not come back
        ("COMPLETED", 0),
    ]
    assert [s["scheduler_state"] for s in specs] == [
        "ended",
        "ended",
        "artifacts_unavailable",
        "ended",
    ]
    for index, spec in enumerate(specs):
        workspace = vq.root / "jobs" / spec["id"]
        if index == 2:
            assert not (workspace / "out").exists()
            assert not (workspace / "leak").is_symlink()
            continue
        assert (workspace / "out" / "deep" / "result.txt").read_text() == f"result {index}\n"
        assert (workspace / "input.txt").read_text() == "shared input\n"
        assert (workspace / "stdout.log").read_text() == f"element {index}\n"
        assert (workspace / "stderr.log").read_text() == f"note {index}\n"
        # the slot's own stdin and exit marker stay on the cluster
        assert not (workspace / "_vq" / "stdin").exists()
        assert not (workspace / "_vq" / "exit-code").exists()
        fetched = tmp_path / f"fetched-{index}"
        vq.run("fetch", spec["id"], str(fetched), "--json")
        assert (fetched / "out" / "deep" / "result.txt").read_text() == f"result {index}\n"
