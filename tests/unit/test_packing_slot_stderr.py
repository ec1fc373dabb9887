"""A packed array's slots keep stderr apart (``<alloc>-%j-<slot>.err``); a ``vq pack``
script keeps each slot's streams combined in its ``.out`` (pure rendering)."""

from __future__ import annotations

import shlex

from vq.packing.lane_batch import Element, batch_script, element_task, next_batch
from vq.packing.roster import Task
from vq.packing.script import render_script, step_argv

from .packing_support import profile

LOGS = "/cluster/logs/sweep"


def _step_lines(script: bytes) -> list[str]:
    return [line.strip() for line in script.decode().splitlines() if "srun " in line]


def test_each_slot_of_a_packed_array_writes_its_own_stderr() -> None:
    pending = [Element(f"{i:012x}", i, 0, ("sh", "-c", "echo out; echo err >&2")) for i in range(3)]
    batch = next_batch("slurm", "g1", pending, profile(), free=10)
    assert batch is not None
    alloc = batch.allocation_id
    lines = _step_lines(batch.script)
    assert len(lines) == 3
    for slot, line in enumerate(lines):
        words = shlex.split(line.split(" <", 1)[0])
        assert f"--output={LOGS}/{alloc}-%j-{slot}.out" in words
        assert f"--error={LOGS}/{alloc}-%j-{slot}.err" in words
        # the script's step is exactly the slot's argv
        task = element_task(pending[slot])
        assert words == step_argv(alloc, slot, task, profile(), separate_stderr=True)
    tasks = [element_task(e) for e in pending]
    assert batch_script(alloc, tasks, profile(), batch.directives) == batch.script


def test_a_pack_script_keeps_each_slots_streams_in_one_log() -> None:
    tasks = [Task(f"t{i}", ("true",)) for i in range(2)]
    script = render_script("0123456789abcdef", tasks, profile())
    assert "--error" not in script.decode()
    for slot, line in enumerate(_step_lines(script)):
        words = shlex.split(line.split(" <", 1)[0])
        assert words == step_argv("0123456789abcdef", slot, tasks[slot], profile())
