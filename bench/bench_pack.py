"""Packed Slurm sweeps: (v) packed vs one lane job per task, (w) step start skew, (x) planning.

(x) runs in process: :func:`vq.packing.planner.plan_document` over 10,000 one-CPU tasks
(8 per allocation, every script rendered), after one warm-up; no comparison, a target on
the wall time, with the process's CPU time and the 1-minute load beside it.

(v) and (w) need root and the testbed's Slurm (``scripts/testbed/up.sh`` with
``VQ_TESTBED_SLURM=1``); they run on a private Slurm cluster beside it
(:mod:`tests.private_slurm`: its own slurmctld, slurmd and sshd; the shared testbed's
2-CPU node is never reconfigured) and drive the real ``vq`` CLI against its login host
as user ``vqtest``.

(v) N ``true`` tasks (``VQ_BENCH_SCALE`` × 200, at least 16) as one pack — ``vq pack open``,
``plan``, ``submit``, done when every slot's exit marker is written — against N lane jobs
(one ``vq submit cluster --array 0-N -- true`` through one daemon, then one sbatch per
element by the lane; done when every spec is terminal), in alternating rounds (packed,
then lane; 3 of each at scale 1, at least 2), medians compared. The pack holds 8 one-CPU
tasks per allocation: 25 sbatch calls against 200 at scale 1, both counted from ``sacct``
(a job submitted twice counts twice). A third side, the floor, sends the same kind of
pack's scripts (planned by ``vq pack plan --show-scripts`` beforehand, untimed) with plain
``sbatch`` on this machine, no vq and no SSH, until every marker exists: what Slurm itself
needs for the steps the packed side asks for. Its own row compares it with the lane side
(the best ratio any packer could reach on this cluster), and ``extra`` of that row has
the packed side over the floor. The three sides rotate which goes first.

The model is a cluster with more free capacity than one allocation: the private node
advertises N CPUs (``config_overrides``; ``true`` uses none), so every task of either
side can run at once and the comparison is of sbatch calls, SSH round trips and
scheduling decisions, not of a full node. (On an 8-CPU node each 8-slot allocation fills
it, the allocations run one after another as the one-CPU jobs run 8 at a time, and the
two sides take about as long.) ``extra`` splits each side's time: until the last
``vq pack submit`` / ``vq submit`` returned (the packed side also per CLI call: open, plan,
submit), and what ``sacct`` saw in the last round (first submit to last end, submit
spread, queue wait).

(w) one allocation of 8 one-CPU slots, each writing its start time; the skew is the
latest start minus the earliest, over 3 runs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import VQ, Figure, Result, Target, child_env, scaled

REPO = Path(__file__).resolve().parents[1]
SSH_CONFIG = Path(os.environ.get("VQ_TESTBED_DIR", "/var/lib/vq-testbed")) / "ssh" / "config"
#: One-CPU tasks per allocation: the private cluster's node has 8 CPUs.
PER = 8
#: (v)'s sides, rotated each round so that each goes first in turn.
SIDES = ("packed", "lane", "floor")


def planning() -> list[Result]:
    from vq.packing.planner import PlanInputs, TaskView, View, plan_document
    from vq.packing.profiles import PackingProfile
    from vq.packing.roster import Task

    tasks = [Task(f"task-{n}", ("true",)) for n in range(10_000)]
    profile = PackingProfile.model_validate(
        {
            "name": "bench",
            "target": _target("cluster", "/scratch/bench", 8)
            | {"max_allocations_per_submit": 2000},
            "resources": _resources(),
        }
    )
    view = View(revision=1, observed_at=None, tasks={t.key: TaskView(t.key) for t in tasks})
    inputs = PlanInputs(
        pack="bench",
        pack_id="0" * 32,
        revision=1,
        sealed=True,
        roster=tasks,
        attempts=[],
        view=view,
        profile=profile,
    )
    samples, cpu = [], []
    for run in range(scaled(7, minimum=3) + 1):
        start, start_cpu = time.perf_counter(), time.process_time()
        document, _ = plan_document(inputs)
        if run:
            samples.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    assert document["totals"]["allocations"] == 1250
    return [
        Result(
            "pack_plan_10k",
            "(x) plan 10,000 tasks, 8 per allocation (in process, scripts rendered)",
            Figure("plan_document", "s", samples),
            target=Target("< 0.2 s", "value", 0.2, strict=True),
            # the process's own CPU time: what other processes on the machine do not add
            extra={"cpu_s_median": sorted(cpu)[len(cpu) // 2], "load_1min": os.getloadavg()[0]},
        )
    ]


def _target(host: str, root: str, per: int, partition: str = "debug") -> dict[str, Any]:
    return {
        "host": host,
        "partitions": [partition],
        "work_root": f"{root}/work",
        "log_root": f"{root}/logs",
        "max_tasks_per_allocation": per,
        "max_cpus_per_allocation": per,
        "max_memory_mib_per_allocation": 128 * per,
        "max_gpus_per_allocation": 0,
        "max_time_limit": "00:10:00",
        "max_allocations_per_submit": 1000,
        "max_script_bytes": 1 << 20,
    }


def _resources() -> dict[str, Any]:
    return {
        "cpus_per_task": 1,
        "memory_mib_per_task": 128,
        "gpus_per_task": 0,
        "time_limit": "00:05:00",
    }


def _toml(value: Any) -> str:
    return json.dumps(value)


def _config(path: Path, root: str, per: int, cluster: Any) -> None:
    lines = [
        'default_packing = "bench"',
        "[hosts.cluster]",
        f"ssh = {_toml(cluster.host)}",
        f"ssh_options = {_toml(['-F', str(cluster.ssh_config)])}",
        'scheduler_dialect = "slurm"',
        f"scratch_root = {_toml(root + '/scratch')}",
        f"partition = {_toml(cluster.partition)}",
        "poll_interval = 1",
        "scheduler_rpc_per_minute = 600",
        "scheduler_copy_back_delays = [1, 1, 1]",
        "max_scheduler_jobs = 1000",
        "[packing.bench.target]",
        *(
            f"{key} = {_toml(value)}"
            for key, value in _target("cluster", root, per, cluster.partition).items()
        ),
        "[packing.bench.resources]",
        *(f"{key} = {_toml(value)}" for key, value in _resources().items()),
    ]
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.toml").write_text("\n".join(lines) + "\n")


def _vq(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [VQ, *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"vq {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _wait(predicate: Any, timeout: float, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for Slurm")
        time.sleep(interval)


class _Bench:
    def __init__(self, per: int, cluster: Any) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="vqbp-", dir="/tmp"))
        os.chmod(self.base, 0o777)  # the login user writes its work and logs here
        self.root = str(self.base / "remote")
        self.env = child_env(
            {"VQ_STATE_DIR": str(self.base / "state"), "VQ_CONFIG_DIR": str(self.base / "cfg")}
        )
        self.env["VQ_ALLOW_ROOT"] = "1"
        _config(self.base / "cfg", self.root, per, cluster)
        #: each pack's CLI phases (s): open, plan, submit (every sbatch answered)
        self.phases: dict[str, dict[str, float]] = {}

    def pack(self, name: str, commands: list[list[str]]) -> list[dict[str, Any]]:
        """Open, plan and submit a pack; its accepted allocations."""
        tasks = self.base / f"{name}.jsonl"
        tasks.write_text(
            "".join(
                json.dumps({"key": f"t{n}", "args": argv, "stdin_file": None}) + "\n"
                for n, argv in enumerate(commands)
            )
        )
        started = time.perf_counter()
        _vq(self.env, "pack", "open", name, str(tasks))
        opened = time.perf_counter()
        _vq(self.env, "pack", "plan", name, "--output", str(self.base / f"{name}.plan.json"))
        planned = time.perf_counter()
        out = _vq(self.env, "pack", "submit", name, str(self.base / f"{name}.plan.json"), "--json")
        self.phases[name] = {
            "open": opened - started,
            "plan": planned - opened,
            "submit": time.perf_counter() - planned,
        }
        allocations: list[dict[str, Any]] = json.loads(out)["allocations"]
        return allocations

    def scripts(
        self, name: str, commands: list[list[str]]
    ) -> tuple[list[dict[str, Any]], list[Path]]:
        """Open and plan a pack without submitting it: its allocations and their scripts,
        exactly as ``vq pack submit`` would send them (``plan --show-scripts``)."""
        tasks = self.base / f"{name}.jsonl"
        tasks.write_text(
            "".join(
                json.dumps({"key": f"t{n}", "args": argv, "stdin_file": None}) + "\n"
                for n, argv in enumerate(commands)
            )
        )
        _vq(self.env, "pack", "open", name, str(tasks))
        plan_path = self.base / f"{name}.plan.json"
        shown = _vq(self.env, "pack", "plan", name, "--output", str(plan_path), "--show-scripts")
        shown = shown.split(f"plan {plan_path}:", 1)[0]
        allocations: list[dict[str, Any]] = json.loads(plan_path.read_text())["allocations"]
        paths = []
        for allocation in allocations:
            alloc = allocation["allocation_id"]
            head = f"### allocation {alloc}\n"
            body = shown.split(head, 1)[1].split("### allocation ", 1)[0]
            path = self.base / f"{name}-{alloc}.sh"
            path.write_text(body)
            paths.append(path)
        return allocations, paths

    def markers(self, alloc: str, slots: int) -> list[Path]:
        work = Path(self.root) / "work" / alloc
        return [work / str(slot) / "_vq" / "exit-code" for slot in range(slots)]

    def close(self) -> None:
        subprocess.run([VQ, "daemon", "stop"], env=self.env, capture_output=True, check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def _skew(bench: _Bench, per: int) -> Result:
    skews = []
    for run in range(3):
        command = ["sh", "-c", "date +%s.%N >started; sleep 1"]
        (allocation,) = bench.pack(f"skew{run}", [command] * per)
        markers = bench.markers(allocation["allocation_id"], per)
        _wait(lambda markers=markers: all(m.exists() for m in markers), 120)
        starts = [float((m.parent.parent / "started").read_text()) for m in markers]
        skews.append(max(starts) - min(starts))
    return Result(
        "pack_step_skew",
        f"(w) step start skew in one {per}-slot allocation (node CPUs, at most 8)",
        Figure(f"latest − earliest step start ({per} slots)", "s", skews),
        target=Target("≤ 1 s", "value", 1.0),
    )


def _sacct(cluster: Any, since: str) -> list[dict[str, str]]:
    """This private cluster's jobs (allocations only) submitted since ``since``.

    The accounting cluster name is shared by every private cluster; the job ids of this
    one start at its ``FirstJobId``, so ids below it are another start's."""
    first = next(
        int(line.split("=", 1)[1])
        for line in cluster.conf.read_text().splitlines()
        if line.startswith("FirstJobId=")
    )
    fields = ("JobID", "JobName", "Submit", "Start", "End", "State")
    done = subprocess.run(
        ["sacct", "-a", "-X", "-n", "-P", "-S", since, "-o", ",".join(fields)],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = [dict(zip(fields, line.split("|"), strict=True)) for line in done.stdout.splitlines()]
    return [row for row in rows if row["JobID"].isdigit() and int(row["JobID"]) >= first]


def _settled_sacct(cluster: Any, since: str, expected: int) -> list[dict[str, str]]:
    """:func:`_sacct` once every job it lists has ended and the count holds still.

    slurmctld reports to slurmdbd asynchronously; ``expected`` is a floor to wait for,
    not the answer (a resubmitted job shows up as a second row)."""
    previous: list[dict[str, str]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = _sacct(cluster, since)
        ended = all(row["End"] not in ("", "Unknown") for row in rows)
        if ended and len(rows) >= expected and len(rows) == len(previous):
            return rows
        previous = rows
        time.sleep(3)
    raise RuntimeError(f"sacct did not settle: {len(previous)} jobs, {expected} expected")


def _seconds(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


def _span(rows: list[dict[str, str]]) -> dict[str, float]:
    """What Slurm saw of one side's jobs: first submit to last end, and the queue wait."""
    submits = [_seconds(row["Submit"]) for row in rows]
    waits = sorted(_seconds(row["Start"]) - _seconds(row["Submit"]) for row in rows)
    return {
        "slurm_first_submit_to_last_end_s": max(_seconds(r["End"]) for r in rows) - min(submits),
        "slurm_submit_spread_s": max(submits) - min(submits),
        "slurm_queue_wait_median_s": waits[len(waits) // 2],
        "slurm_queue_wait_max_s": waits[-1],
    }


def _packed_vs_lane(bench: _Bench, per: int, cluster: Any) -> tuple[Result, Result]:
    count = _count()
    rounds = scaled(3, minimum=2)
    _vq(bench.env, "daemon", "start")
    queue = bench.base / "state" / "queue"
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    load_before = os.getloadavg()[0]
    packed: list[float] = []
    lane: list[float] = []
    packed_submit: list[float] = []  # until `vq pack submit` returned: every sbatch done
    lane_submit: list[float] = []  # until `vq submit --array` returned (sbatch still to come)
    names: dict[str, str] = {}  # Slurm job name → "packed<run>" / "lane<run>"
    order: list[str] = []  # which side went first, per round
    floor: list[float] = []  # the same scripts with plain local sbatch: no vq at all
    for run in range(rounds):
        # paired and rotating: round 0 runs the packed sweep first, round 1 the lane jobs,
        # round 2 the floor, and so on, so no side always meets another's leftovers
        sides = SIDES[run % 3 :] + SIDES[: run % 3]
        order.append(sides[0])
        for which in sides:
            if which == "packed":
                packed.append(_packed_round(bench, run, count, packed_submit, names))
            elif which == "lane":
                lane.append(_lane_round(bench, run, count, queue, lane_submit, names))
            else:
                floor.append(_floor_round(bench, run, count, cluster, names))
    load_after = os.getloadavg()[0]
    rows = _settled_sacct(cluster, since, expected=len(names))
    side: dict[str, list[dict[str, str]]] = {}
    for row in rows:  # a job name sacct lists twice was submitted twice: both count
        side.setdefault(names.get(row["JobName"], "other"), []).append(row)
    sbatch = {key: len(value) for key, value in sorted(side.items())}
    last = rounds - 1
    floor_median = statistics.median(floor)
    lane_median = statistics.median(lane)
    floor_row = Result(
        "pack_floor",
        f"(v) Slurm's own floor: the same {sbatch.get('floor0', 0)} allocation scripts "
        "sent with plain local `sbatch` (no vq, no SSH), against the lane jobs",
        Figure("plain sbatch of the packed scripts", "s", floor),
        Figure("vq submit cluster (one lane job per task)", "s", lane),
        extra={"packed_over_floor": statistics.median(packed) / floor_median},
    )
    main = Result(
        "pack_vs_lane",
        f"(v) {count} `true` tasks: packed {per} per allocation vs one lane job each "
        f"(private node advertising {cluster.cpus} CPUs: room for every task at once; "
        f"{rounds} alternating rounds)",
        Figure(f"vq pack ({sbatch.get('packed0', 0)} sbatch calls per round)", "s", packed),
        Figure(f"vq submit cluster ({sbatch.get('lane0', 0)} sbatch calls per round)", "s", lane),
        Target("≤ 0.3× lane jobs", "ratio", 0.3),
        extra={
            "tasks": count,
            "node_cpus": cluster.cpus,
            "sbatch_by_round_sacct": sbatch,
            "packed_submit_s": packed_submit,
            "packed_phases_s": [bench.phases[f"swarm{run}"] for run in range(rounds)],
            "lane_submit_s": lane_submit,
            "packed_last_round": _span(side.get(f"packed{last}", [])),
            "lane_last_round": _span(side.get(f"lane{last}", [])),
            "load_1min_before_after": [load_before, load_after],
            "first_side_by_round": order,
            "floor_s": floor,
            "floor_over_lane": floor_median / lane_median,
            "floor_last_round": _span(side.get(f"floor{last}", [])),
        },
    )
    return main, floor_row


def _packed_round(
    bench: _Bench, run: int, count: int, submits: list[float], names: dict[str, str]
) -> float:
    """One packed sweep: from ``vq pack open`` until every slot's exit marker exists."""
    start = time.perf_counter()
    bench.pack(f"swarm{run}", [["true"]] * count)
    submits.append(time.perf_counter() - start)
    plan = json.loads((bench.base / f"swarm{run}.plan.json").read_text())
    markers = [
        marker
        for allocation in plan["allocations"]
        for marker in bench.markers(allocation["allocation_id"], allocation["tasks"])
    ]
    _wait(lambda: all(m.exists() for m in markers), 900, interval=0.2)
    took = time.perf_counter() - start
    names |= {f"vqp-{a['allocation_id']}": f"packed{run}" for a in plan["allocations"]}
    return took


def _floor_round(bench: _Bench, run: int, count: int, cluster: Any, names: dict[str, str]) -> float:
    """Slurm alone: a pack's scripts, planned by vq beforehand (untimed), sent with plain
    ``sbatch`` on this machine; from the first ``sbatch`` until every slot's marker exists.
    The packed side can go no faster than this on the same cluster: every step's
    ``srun``, its step creation and its ``slurmstepd`` are the same."""
    allocations, scripts = bench.scripts(f"floor{run}", [["true"]] * count)
    Path(bench.root, "logs").mkdir(parents=True, exist_ok=True)
    markers = [
        marker
        for allocation in allocations
        for marker in bench.markers(allocation["allocation_id"], allocation["tasks"])
    ]
    start = time.perf_counter()
    for script in scripts:
        subprocess.run(
            ["sbatch", "--parsable", str(script)],
            env=cluster.env,
            capture_output=True,
            timeout=60,
            check=True,
        )
    _wait(lambda: all(m.exists() for m in markers), 900, interval=0.2)
    took = time.perf_counter() - start
    names |= {f"vqp-{a['allocation_id']}": f"floor{run}" for a in allocations}
    return took


def _lane_round(
    bench: _Bench,
    run: int,
    count: int,
    queue: Path,
    submits: list[float],
    names: dict[str, str],
) -> float:
    """The same tasks as lane jobs: from ``vq submit --array`` until every spec is terminal."""
    start = time.perf_counter()
    # The lane side at its best: one `vq submit --array` (one CLI call), then one
    # sbatch per element by the lane, as a user would submit unpacked tasks.
    ids = _vq(bench.env, "submit", "cluster", "--array", f"0-{count - 1}", "--", "true").split()
    submits.append(time.perf_counter() - start)

    def all_done() -> bool:
        states = [json.loads((queue / f"{i}.json").read_text())["state"] for i in ids]
        return all(state in ("COMPLETED", "FAILED", "KILLED") for state in states)

    _wait(all_done, 1800, interval=0.2)
    took = time.perf_counter() - start
    names |= {f"vq-{i}": f"lane{run}" for i in ids}
    return took


def _count() -> int:
    """(v)'s task count: 200 at scale 1."""
    return scaled(200, minimum=16)


def slurm() -> list[Result]:
    names = {
        "pack_step_skew": "(w) step start skew in one allocation",
        "pack_vs_lane": "(v) packed tasks vs one lane job each",
        "pack_floor": "(v) Slurm's own floor: the packed scripts with plain sbatch",
    }
    if os.geteuid() != 0 or shutil.which("sbatch") is None or not SSH_CONFIG.exists():
        why = "needs root and the testbed's Slurm (VQ_TESTBED_SLURM=1 scripts/testbed/up.sh)"
        return [Result(key, name, None, error=why) for key, name in names.items()]
    sys.path.insert(0, str(REPO))
    from tests.private_slurm import ClusterUnavailable, private_cluster

    try:
        # room for every task of (v) at once, on either side: `true` uses no CPU, and the
        # comparison is of sbatch calls and scheduling, not of a full node
        cpus = max(PER, _count())
        with private_cluster(cpus=cpus, memory_mib=256 * cpus) as cluster:
            bench = _Bench(PER, cluster)
            try:
                return [_skew(bench, PER), *_packed_vs_lane(bench, PER, cluster)]
            finally:
                bench.close()
    except ClusterUnavailable as exc:
        return [Result(key, name, None, error=str(exc)) for key, name in names.items()]


def run() -> list[Result]:
    return planning() + slurm()
