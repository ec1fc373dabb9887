"""Whether an array may be submitted packed, and the resources its elements carry (pure)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from vq.errors import InvalidInput
from vq.packing.lane_submit import LaneFacts, PackRequest, check_pack_submission

from .packing_support import profile

PROFILES = {"cpu": profile("cpu", cpus_per_task=2, memory_mib_per_task=1024, time_limit="00:10:30")}
LANES = {
    "cluster-a": LaneFacts("slurm", "sacct"),
    "torque-b": LaneFacts("torque", "sacct"),
    "quiet": LaneFacts("slurm", "none"),
}
REQUEST = PackRequest("cpu", "cluster-a", ("python", "run.py"), array=True)


def test_the_profile_decides_each_elements_resources() -> None:
    packed = check_pack_submission(REQUEST, PROFILES, LANES)
    assert packed.profile is PROFILES["cpu"]
    # 10 min 30 s is rounded up to whole minutes once, as in the allocation's script
    assert (packed.cpus, packed.mem_mb, packed.wall_time_seconds) == (2, 1024, 660)
    same = replace(REQUEST, cpus=2, mem_mb=1024, wall_time_seconds=660)
    assert check_pack_submission(same, PROFILES, LANES) == packed


@pytest.mark.parametrize(
    ("changes", "complaint", "hint"),
    [
        ({"array": False}, "packs the elements of an array", "--array"),
        ({"chain": True}, "cannot be combined with --chain", "drop one"),
        ({"rerun_until": True}, "--rerun-until-file-exists", "drop one"),
        ({"profile": "gpu"}, "no packing profile 'gpu' \\(defined: cpu\\)", "packing.NAME"),
        ({"lane": None}, "needs the Slurm lane", "vq submit cluster-a --array"),
        ({"lane": "nowhere"}, "not a configured Slurm lane", "scheduler_dialect"),
        ({"lane": "torque-b"}, "not a configured Slurm lane", "scheduler_dialect"),
        ({"lane": "quiet"}, "targets lane 'cluster-a', not 'quiet'", "submit to cluster-a"),
        ({"cpus": 1}, "--cpus 1 differs .* \\(2\\)", "packing.cpu.resources"),
        ({"mem_mb": 2048}, "--mem-mb 2048 differs", "drop --mem-mb"),
        ({"wall_time_seconds": 630}, "--wall-time 630 differs .* \\(660\\)", "drop --wall-time"),
        ({"command": ()}, "cannot run in a packed slot", "after `--`"),
        ({"command": ("-x",)}, "cannot run in a packed slot: args\\[0\\]", "after `--`"),
        ({"command": ("a\x00b",)}, "NUL", "after `--`"),
        ({"command": ("FOO=1", "run")}, "contains '='", "without '='"),
    ],
)
def test_each_refusal_says_what_and_how(changes: dict[str, Any], complaint: str, hint: str) -> None:
    with pytest.raises(InvalidInput, match=complaint) as raised:
        check_pack_submission(replace(REQUEST, **changes), PROFILES, LANES)
    assert raised.value.hint is not None and hint in raised.value.hint


def test_a_lane_without_accounting_is_refused_even_when_targeted() -> None:
    quiet = {"cpu": profile("cpu", target={"host": "quiet"})}
    with pytest.raises(InvalidInput, match="keeps no accounting") as raised:
        check_pack_submission(replace(REQUEST, lane="quiet"), quiet, LANES)
    assert raised.value.hint is not None and 'scheduler_accounting = "sacct"' in raised.value.hint
