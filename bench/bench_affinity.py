"""(r) Two threaded NumPy matmul jobs on a two-core budget, pinned vs unpinned.

Each job multiplies two N×N float64 matrices ``REPEATS`` times with NumPy's BLAS (NumPy
comes from ``scripts/install-bench-deps.sh``, in the venv only). Two ``--cpus 1`` jobs
are submitted together to a daemon with ``--max-cpus 2``; the pair's makespan is the
last ``finished_at`` minus the first ``started_at`` of the two specs. Three modes, run
alternately ``ROUNDS`` times each:

* ``pinned``: ``[daemon] cpu_affinity = true`` (the default): each job on its own core,
  one BLAS thread each (the thread-count defaults);
* ``unpinned``: ``cpu_affinity = false``, one BLAS thread each: the same work, only
  without affinity — the comparison the target is about;
* ``unpinned, 2 threads each``: ``cpu_affinity = false`` and the daemon's environment
  sets the thread variables to 2, i.e. what a threaded code did before the defaults
  existed (four BLAS threads on two cores).

Target: the pinned pair is not slower than the unpinned pair (ratio ≤ 1.0; noise on a
shared machine can move single runs by a few percent, so the median is compared).
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime
from typing import Any

from common import PYTHON, VQ, Figure, Result, StateRoot, Target, run_checked, scale

ROUNDS = 4
SIZE = 1024
REPEATS = 60
TIMEOUT_SECONDS = 600.0
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)

MATMUL = (
    "import numpy as np\n"
    "rng = np.random.default_rng(0)\n"
    "a = rng.random(({n}, {n})); b = rng.random(({n}, {n}))\n"
    "for _ in range({r}):\n"
    "    a = (a @ b) / {n}\n"
    "print(float(a[0, 0]))\n"
)


def _numpy_missing() -> str | None:
    proc = subprocess.run([PYTHON, "-c", "import numpy"], capture_output=True, check=False)
    if proc.returncode == 0:
        return None
    return "numpy is not installed in the venv (scripts/install-bench-deps.sh installs it)"


def _pair_makespan(affinity: bool, threads: int | None) -> float:
    """Seconds from the first start to the last finish of two ``--cpus 1`` matmul jobs."""
    with StateRoot("affinity") as state:
        (state.config / "config.toml").write_text(
            f"[daemon]\ncpu_affinity = {'true' if affinity else 'false'}\n"
        )
        if threads is not None:
            state.env.update({name: str(threads) for name in THREAD_VARIABLES})
        else:
            for name in THREAD_VARIABLES:
                state.env.pop(name, None)
        state.start_daemon(max_cpus=2)
        script = MATMUL.format(n=SIZE, r=max(1, round(REPEATS * scale())))
        jobs = [
            run_checked(
                [VQ, "submit", "--cpus", "1", "--", PYTHON, "-c", script], state.env
            ).stdout.strip()
            for _ in range(2)
        ]
        specs = [_wait_completed(state, job) for job in jobs]
    started = min(datetime.fromisoformat(s["started_at"]) for s in specs)
    finished = max(datetime.fromisoformat(s["finished_at"]) for s in specs)
    return (finished - started).total_seconds()


def _wait_completed(state: StateRoot, job: str) -> dict[str, Any]:
    path = state.root / "queue" / f"{job}.json"
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        spec: dict[str, Any] = json.loads(path.read_text())
        if spec["state"] == "COMPLETED":
            return spec
        if spec["state"] not in ("PENDING", "RUNNING"):
            raise RuntimeError(f"matmul job {job} ended {spec['state']}: {spec['failure_reason']}")
        time.sleep(0.1)
    raise RuntimeError(f"matmul job {job} did not finish within {TIMEOUT_SECONDS:.0f} s")


def run() -> list[Result]:
    missing = _numpy_missing()
    if missing:
        name = "(r) pinned vs unpinned matmul pair"
        return [Result("affinity_matmul", name, None, error=missing)]
    modes = {"pinned": (True, None), "unpinned": (False, None), "oversubscribed": (False, 2)}
    samples: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(ROUNDS):
        for mode, (affinity, threads) in modes.items():
            samples[mode].append(_pair_makespan(affinity, threads))
    return [
        Result(
            "affinity_matmul",
            f"(r) 2 × --cpus 1 NumPy matmul ({SIZE}², 2 cores): pinned vs unpinned",
            Figure("pinned pair makespan", "s", samples["pinned"]),
            Figure("unpinned pair makespan", "s", samples["unpinned"]),
            target=Target("pinned ≤ unpinned", "ratio", 1.0),
            extra={
                "rounds": ROUNDS,
                "size": SIZE,
                "makespans": samples,
                "oversubscribed_note": "cpu_affinity = false, thread variables = 2 each",
            },
        )
    ]


if __name__ == "__main__":
    for result in run():
        print(json.dumps(result.as_dict(), indent=1))
