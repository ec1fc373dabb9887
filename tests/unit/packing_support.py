"""Profiles and inputs shared by the packing unit tests."""

from __future__ import annotations

from typing import Any

from vq.packing.planner import PlanInputs, TaskView, View
from vq.packing.profiles import PackingProfile
from vq.packing.roster import Attempt, Task


def profile(
    name: str = "cpu", *, target: dict[str, Any] | None = None, **resources: Any
) -> PackingProfile:
    base_target: dict[str, Any] = {
        "host": "cluster-a",
        "partitions": ["normal"],
        "work_root": "/cluster/work/sweep",
        "log_root": "/cluster/logs/sweep",
        "max_tasks_per_allocation": 8,
        "max_cpus_per_allocation": 16,
        "max_memory_mib_per_allocation": 16384,
        "max_gpus_per_allocation": 0,
        "max_time_limit": "1-00:00:00",
        "max_allocations_per_submit": 64,
        "max_script_bytes": 1 << 20,
    }
    base_target.update(target or {})
    base_resources: dict[str, Any] = {
        "cpus_per_task": 1,
        "memory_mib_per_task": 512,
        "gpus_per_task": 0,
        "time_limit": "00:10:30",
    }
    base_resources.update(resources)
    return PackingProfile.model_validate(
        {"name": name, "target": base_target, "resources": base_resources}
    )


def gpu_profile() -> PackingProfile:
    return profile(
        "gpu",
        target={
            "partitions": ["gpu", "gpu-long"],
            "account": "chem",
            "qos": "normal",
            "constraint": "a100&ib",
            "gpu_gres": "gpu",
            "max_gpus_per_allocation": 4,
            "max_cpus_per_allocation": 64,
            "max_memory_mib_per_allocation": 262144,
            "apptainer": "/usr/bin/apptainer",
            "image": "/cluster/images/chem.sif",
        },
        cpus_per_task=8,
        memory_mib_per_task=32768,
        gpus_per_task=1,
        time_limit="12:00:00",
    )


def tasks(count: int) -> list[Task]:
    return [
        Task(f"t{n:03d}", ("run", "--case", str(n)), f"in {n}\n".encode()) for n in range(count)
    ]


def inputs(
    roster: list[Task],
    prof: PackingProfile,
    *,
    attempts: list[Attempt] | None = None,
    views: dict[str, TaskView] | None = None,
    revision: int = 1,
    **choices: Any,
) -> PlanInputs:
    view = View(
        revision=revision,
        observed_at=None,
        tasks={task.key: (views or {}).get(task.key, TaskView(task.key)) for task in roster},
    )
    return PlanInputs(
        pack="sweep",
        pack_id="ab" * 16,
        revision=revision,
        sealed=False,
        roster=roster,
        attempts=attempts or [],
        view=view,
        profile=prof,
        **choices,
    )
