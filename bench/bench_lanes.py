"""Slurm lanes (a)–(d) against the testbed's Slurm 22.05 over its loopback sshd.

* lanes (a) RPCs per round: tracked held Slurm jobs (1,000 at scale 1) adopted by a real
  daemon from RUNNING specs. Every lanes row logs in as the testbed's ``vqbench``
  (``ssh -l vqbench vq-local``), an account nothing else uses, so the per-user sections of ``sdiag``
  (controller RPCs) and ``sacctmgr show stats`` (slurmdbd RPCs) hold only the benchmark's
  own traffic. Before the daemon starts, the lane's status call and one ``sacct`` are each
  run a few times as that user to learn what one call costs (``squeue``: REQUEST_FED_INFO
  + REQUEST_PARTITION_INFO + REQUEST_JOB_USER_INFO, one of them job-info); the window's
  per-user deltas divided by the rounds and by that cost give status calls (one job-info
  RPC each) and ``sacct`` calls per round. Rounds are counted as the distinct
  ``last_ok_at`` values the lane host's health record takes.
* lanes (b) round wall time: ``LaneRemote.status`` (the round's one ``squeue``: the
  login's jobs with ``--me`` for several ids, ``--jobs=ID`` for one) over a multiplexed
  SshRunner for every tracked id vs for one.
* lanes (c) submit cost, paired rounds (the order alternates): PENDING lane jobs written
  by the CLI with no daemon; from the daemon's first answer until every spec has its
  ``scheduler_job_id`` (claim, tar stage, intent, ``sbatch``, per job), vs ``sbatch
  --parsable --hold --wrap true`` run one at a time over the same kind of multiplexed
  connection. Each side's sample is one round's mean per job.
* lanes (d) ``true`` end to end, paired runs (the order alternates): ``vq submit cluster
  -- true`` until the spec is COMPLETED (poll_interval 1 s), minus one round, vs
  ``sbatch --wrap true`` then ``squeue`` every second over a multiplexed connection
  until the job is gone or ended.

Each row records the 1-minute load average before and after. Needs root (the testbed).
Slurm jobs are named ``vqbench-*``; at the end they are cancelled and the benchmark waits
(up to the controller's ``MinJobAge`` plus its purge interval) until the controller has
dropped their records, so the login's later ``squeue --me`` rounds (every lane test's) do
not carry a thousand cancelled jobs. Accounting keeps them; nothing is purged from it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import REPO, VQ, Figure, Result, StateRoot, Target, run_checked, scaled

TB = Path(os.environ.get("VQ_TESTBED_DIR", "/var/lib/vq-testbed"))
SSH_CONFIG = TB / "ssh" / "config"
#: The testbed's login for these rows: the loopback sshd as user ``vqbench``
#: (scripts/testbed/users.sh), whom nothing else uses, so Slurm's per-user RPC counters hold
#: only the benchmark's traffic. The user is named with ``-l`` rather than through the
#: shared client config's ``vq-bench`` entry, which an older checkout's up.sh rewrites away.
LOGIN = "vq-local"
BENCH_USER = os.environ.get("VQ_TESTBED_BENCH_USER", "vqbench")
SSH_OPTIONS = ("-F", str(SSH_CONFIG), "-l", BENCH_USER)
POLL = 1.0


def _lane_config(state: StateRoot, scratch: str, **extra: Any) -> None:
    keys: dict[str, Any] = {
        "ssh": LOGIN,
        "ssh_options": list(SSH_OPTIONS),
        "scheduler_dialect": "slurm",
        "scratch_root": scratch,
        "partition": "debug",
        "poll_interval": POLL,
        "scheduler_rpc_per_minute": 6000,
        "scheduler_copy_back_delays": [1, 1, 1],
        "max_scheduler_jobs": 10000,
        **extra,
    }
    lines = ["[hosts.cluster]", *(f"{k} = {json.dumps(v)}" for k, v in keys.items())]
    (state.config / "config.toml").write_text("\n".join(lines) + "\n")


@contextmanager
def _runner() -> Iterator[Any]:
    from vq.transport.ssh import SshRunner

    control = Path(tempfile.mkdtemp(prefix="vqcm-", dir="/tmp"))
    runner = SshRunner(LOGIN, ssh_options=SSH_OPTIONS, control_dir=control)
    try:
        yield runner
    finally:
        runner.close()
        shutil.rmtree(control, ignore_errors=True)


@contextmanager
def _scratch(runner: Any) -> Iterator[str]:
    root = f"/tmp/vqbench-lane-{os.urandom(4).hex()}"
    runner.run(["mkdir", "-p", root]).check("mkdir")
    try:
        yield root
    finally:
        _cancel_named(runner)
        runner.run(["rm", "-rf", root])


#: The Slurm job names the benchmark's own (non-vq) jobs carry.
BENCH_NAMES = ("vqbench-held", "vqbench-raw")


def _cancel_named(runner: Any) -> None:
    """Cancel the login's jobs named in :data:`BENCH_NAMES` (``scancel --name`` takes
    one name: a comma list matches nothing)."""
    for name in BENCH_NAMES:
        runner.run(["scancel", f"--name={name}"])


def _min_job_age() -> float:
    """The controller's ``MinJobAge`` in seconds (300 when unreadable)."""
    shown = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, check=False
    ).stdout
    match = re.search(r"^MinJobAge\s*=\s*(\d+)", shown, re.MULTILINE)
    return float(match.group(1)) if match else 300.0


def _left_in_controller(runner: Any) -> int:
    """How many of the benchmark's named jobs the controller still holds a record of."""
    shown = runner.run(
        ["squeue", "--me", "--noheader", "--states=all", f"--name={','.join(BENCH_NAMES)}"],
        deadline_s=60,
    )
    shown.check("squeue")
    return len([line for line in shown.stdout.decode().splitlines() if line.strip()])


def purge_wait() -> dict[str, float]:
    """Cancel every job the benchmark named and wait until the controller has dropped
    them: a cancelled job stays in ``squeue --states=all`` for ``MinJobAge`` and is then
    purged by the controller's periodic sweep (about a minute apart). Accounting is not
    touched. Returns how long it took and how many records were left at the end."""
    start = time.monotonic()
    deadline = start + _min_job_age() + 180
    with _runner() as runner:
        _cancel_named(runner)
        left = _left_in_controller(runner)
        while left and time.monotonic() < deadline:
            time.sleep(5)
            left = _left_in_controller(runner)
    return {"cleanup_seconds": time.monotonic() - start, "records_left": float(left)}


def _load() -> float:
    return os.getloadavg()[0]


def _ratios(vq: list[float], raw: list[float]) -> list[float]:
    """Each paired round's vq / raw, in round order (how steady the median ratio is)."""
    return [round(a / b, 3) for a, b in zip(vq, raw, strict=True) if b]


def _user_count(text: str, user: str) -> int:
    """``user``'s RPC count in the "statistics by user" section of ``sdiag`` or
    ``sacctmgr show stats`` (0 before the user's first RPC)."""
    section = text[text.find("statistics by user") :]
    match = re.search(rf"^\s*{re.escape(user)}\s+\(\s*\d+\)\s+count:(\d+)", section, re.M)
    return int(match.group(1)) if match else 0


def _user_rpcs() -> tuple[int, int]:
    """The bench user's RPCs so far: to slurmctld (``sdiag``) and to slurmdbd."""
    sdiag = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    stats = subprocess.run(
        ["sacctmgr", "show", "stats"], capture_output=True, text=True, check=True
    ).stdout
    return _user_count(sdiag, BENCH_USER), _user_count(stats, BENCH_USER)


def _cost_per_call(call: Callable[[], object], which: int, times: int = 3) -> float:
    """How many of the bench user's RPCs (``which``: 0 controller, 1 slurmdbd) one
    ``call`` costs, over ``times`` calls (nothing else runs as that user meanwhile)."""
    before = _user_rpcs()[which]
    for _ in range(times):
        call()
    return (_user_rpcs()[which] - before) / times


def _held_jobs(runner: Any, n: int) -> list[str]:
    script = (
        'i=0; while [ "$i" -lt "$1" ]; do '
        "sbatch --parsable --hold -J vqbench-held -o /dev/null --wrap true || exit 1; "
        "i=$((i + 1)); done"
    )
    result = runner.run(["sh", "-c", script, "sh", str(n)], deadline_s=60 + n)
    result.check("sbatch --hold")
    return [line.strip() for line in result.stdout.decode().splitlines() if line.strip()]


def _forge_tracked(state: StateRoot, slurm_ids: list[str], scratch: str) -> list[str]:
    """RUNNING lane specs holding ``slurm_ids`` (as after a restart), written in-process."""
    from vq.domain.spec import JobSpec
    from vq.domain.states import JobState
    from vq.store.specs import encode_spec

    paths = state.paths
    paths.ensure()
    start = datetime.now(UTC) - timedelta(minutes=5)
    ids = []
    for number, slurm_id in enumerate(slurm_ids):
        job_id = os.urandom(6).hex()
        spec = JobSpec(
            id=job_id,
            submitted_at=start,
            command=["true"],
            cwd=str(paths.workspace(job_id)),
            cpus=1,
        )
        spec.state = JobState.RUNNING
        spec.started_at = start + timedelta(milliseconds=number)
        spec.workdir = f"{scratch}/.vibeqc-cluster/jobs/{job_id}"
        spec.scheduler_target = "cluster"
        spec.scheduler_job_id = slurm_id
        spec.scheduler_state = "held"
        paths.workspace(job_id).mkdir(parents=True, exist_ok=True)
        spec_path = paths.spec(job_id)
        spec_path.write_bytes(encode_spec(spec))
        spec_path.with_name(spec_path.name + ".lock").touch()
        ids.append(job_id)
    os.sync()
    return ids


def _round_stamp(state: StateRoot) -> str | None:
    """The lane host's ``last_ok_at``: the daemon records it once per successful round
    (an unchanged job's spec is not rewritten each round, so its heartbeat cannot count
    rounds)."""
    try:
        data = json.loads((state.root / "hosts" / "cluster.json").read_text())
    except (OSError, ValueError):
        return None
    value = data.get("last_ok_at")
    return str(value) if value else None


def _next_round(state: StateRoot, after: str | None, deadline: float) -> str:
    while True:
        stamp = _round_stamp(state)
        if stamp is not None and stamp != after:
            return stamp
        assert time.monotonic() < deadline, "the daemon stopped completing rounds"
        time.sleep(0.02)


def _rpc_window(
    state: StateRoot, seconds: float, opened: Callable[[], object] | None = None
) -> dict[str, float]:
    """The bench user's RPC deltas over whole rounds: the window opens right after one
    round's stamp changes and closes right after a later one's does, ``seconds`` or more
    later, so it holds exactly the rounds whose stamps it saw change. ``opened`` runs
    once the window is open (as root: its own RPCs are not the bench user's)."""
    deadline = time.monotonic() + seconds + 120
    stamp = _next_round(state, _round_stamp(state), deadline)
    before = _user_rpcs()
    if opened is not None:
        opened()
    end = time.monotonic() + seconds
    rounds = 0
    while True:
        stamp = _next_round(state, stamp, deadline)
        rounds += 1
        if time.monotonic() >= end:
            break
    after = _user_rpcs()
    return {
        "rounds": float(rounds),
        "controller_rpcs": float(after[0] - before[0]),
        "slurmdbd_rpcs": float(after[1] - before[1]),
    }


def _heartbeat(state: StateRoot, job_id: str) -> str | None:
    try:
        data = json.loads(state.paths.spec(job_id).read_text())
    except (OSError, ValueError):
        return None
    value = data.get("last_heartbeat_at")
    return str(value) if value else None


def held_rounds() -> list[Result]:
    """lanes (a) and (b)."""
    n = scaled(1000, minimum=50)
    key_a, name_a = "lanes_rpcs_per_round", f"lanes (a) {n} tracked held jobs: RPCs per round"
    key_b, name_b = "lanes_round_wall", f"lanes (b) status round wall time: {n} jobs vs 1"
    with _runner() as runner, _scratch(runner) as scratch, StateRoot("lanes-held") as state:
        slurm_ids = _held_jobs(runner, n)
        assert len(slurm_ids) == n, f"{len(slurm_ids)} of {n} held jobs submitted"
        # (b) first, on the same ids: the round's one squeue, n ids vs 1.
        from vq.config.hosts import HostSettings
        from vq.dialects import dialect_for
        from vq.executors.scheduler.remote import LaneRemote

        lane = HostSettings.model_validate(
            {
                "ssh": LOGIN,
                "ssh_options": list(SSH_OPTIONS),
                "scheduler_dialect": "slurm",
                "scratch_root": scratch,
            }
        ).lane("cluster")
        assert lane is not None
        remote = LaneRemote(lane, runner, dialect_for("slurm"))
        many: list[float] = []
        one: list[float] = []
        for _ in range(scaled(10, minimum=5)):
            for ids, out in ((slurm_ids, many), (slurm_ids[:1], one)):
                start = time.perf_counter()
                report = remote.status(ids)
                out.append((time.perf_counter() - start) * 1000)
                assert len(getattr(report, "observed", {})) == len(ids), report
        round_b = Result(
            key_b,
            name_b,
            Figure(f"one squeue round over {n} ids (SshRunner, muxed)", "ms", many),
            Figure("the same round over 1 id", "ms", one),
            Target("≤ 3× the 1-job round", "ratio", 3.0),
        )
        # (a) what one status call and one sacct cost the bench user, then a daemon that
        # adopts every held job and polls them.
        status_cost = _cost_per_call(lambda: remote.status(slurm_ids), 0)
        sacct = ["sacct", "--parsable2", "--noheader", "-j", slurm_ids[0]]
        sacct_cost = _cost_per_call(lambda: runner.run(sacct).check("sacct"), 1)
        assert status_cost >= 1 and sacct_cost >= 1, (status_cost, sacct_cost)
        _lane_config(state, scratch, poll_interval=2)
        tracked = _forge_tracked(state, slurm_ids, scratch)
        load_before = _load()
        state.start_daemon()
        probe = tracked[0]
        deadline = time.monotonic() + 60 + n / 10
        while _heartbeat(state, probe) is None:
            assert time.monotonic() < deadline, "the daemon never polled the tracked jobs"
            time.sleep(0.05)
        # The window opens and closes on a round stamp change, so it holds whole rounds.
        windows: list[dict[str, float]] = []
        for _ in range(scaled(3, minimum=2)):
            windows.append(_rpc_window(state, scaled(20, minimum=10)))
        # One more window in which jobs end: once it is open, root (not the bench user,
        # so the RPC is not counted) cancels a few held jobs; the rounds that see them
        # ended also ask accounting.
        ending = slurm_ids[: max(2, n // 100)]
        endings = _rpc_window(
            state,
            scaled(20, minimum=10),
            lambda: subprocess.run(["scancel", *ending], check=True),
        )
        per_round = [w["controller_rpcs"] / w["rounds"] / status_cost for w in windows]
        sacct_per_round = [w["slurmdbd_rpcs"] / w["rounds"] / sacct_cost for w in windows]
        ending_sacct = endings["slurmdbd_rpcs"] / endings["rounds"] / sacct_cost
        ending_status = endings["controller_rpcs"] / endings["rounds"] / status_cost
        polled = sum(1 for job_id in tracked if _heartbeat(state, job_id) is not None)
        round_a = Result(
            key_a,
            name_a,
            Figure(
                f"status calls (1 job-info RPC each) per round, user {BENCH_USER} (sdiag)",
                "count",
                per_round,
            ),
            None,
            Target("≤ 1 job-info RPC per round", "value", 1.0),
            extra={
                "windows": windows,
                "controller_rpcs_per_status_call": status_cost,
                "slurmdbd_rpcs_per_sacct_call": sacct_cost,
                "sacct_calls_per_round": sacct_per_round,
                "window_with_endings": {
                    **endings,
                    "jobs_cancelled": len(ending),
                    "status_calls_per_round": ending_status,
                    "sacct_calls_per_round": ending_sacct,
                },
                "tracked_jobs_polled": polled,
                "tracked_jobs": n,
                "loadavg_1min": [load_before, _load()],
            },
        )
        round_a.vq.note = (  # type: ignore[union-attr]
            f"sacct calls per round {max(sacct_per_round):.2f} (max of {len(windows)}); "
            f"with {len(ending)} jobs ending: {ending_status:.2f} status + "
            f"{ending_sacct:.2f} sacct calls per round; {polled}/{n} jobs polled"
        )
        state.stop_daemon()
    return [round_a, round_b]


def _wait_specs(state: StateRoot, ids: list[str], done: Callable[[dict[str, Any]], bool]) -> None:
    pending = list(ids)
    deadline = time.monotonic() + 120 + 5 * len(ids)
    while pending:
        assert time.monotonic() < deadline, f"{len(pending)} jobs never got there"
        try:
            data = json.loads(state.paths.spec(pending[0]).read_text())
        except (OSError, ValueError):
            data = {}
        if done(data):
            pending.pop(0)
        else:
            time.sleep(0.02)


def _vq_submit_round(runner: Any, scratch: str, k: int) -> tuple[float, float]:
    """One vq round of lanes (c): ``k`` PENDING specs, then a daemon; per-job ms from its
    first answer until every spec has a Slurm id, and the daemon's start in ms."""
    with StateRoot("lanes-submit") as state:
        _lane_config(state, scratch)
        ids = [
            run_checked([VQ, "submit", "cluster", "--", "true"], state.env).stdout.strip()
            for _ in range(k)
        ]
        start = time.perf_counter()
        state.start_daemon()
        answered = time.perf_counter()
        _wait_specs(state, ids, lambda d: bool(d.get("scheduler_job_id")))
        per_job = (time.perf_counter() - answered) * 1000 / k
        _wait_specs(state, ids, lambda d: d.get("state") == "COMPLETED")
        state.stop_daemon()
    return per_job, (answered - start) * 1000


def _raw_submit_round(runner: Any, k: int) -> float:
    """One raw round of lanes (c): ``k`` held ``sbatch`` calls one at a time over the
    muxed connection; per-job ms. The held jobs are cancelled after the timing."""
    total = 0.0
    for _ in range(k):
        t0 = time.perf_counter()
        runner.run(
            ["sbatch", "--parsable", "--hold", "-J", "vqbench-held", "--wrap", "true"]
        ).check("sbatch")
        total += time.perf_counter() - t0
    runner.run(["scancel", "--name=vqbench-held"])
    return total * 1000 / k


def submit_cost() -> list[Result]:
    """lanes (c), in paired rounds whose order alternates."""
    k = scaled(20, minimum=10)
    rounds = scaled(4, minimum=2)
    key, name = "lanes_submit_cost", f"lanes (c) per-job submit cost, {rounds}×{k} jobs"
    vq_ms: list[float] = []
    raw_ms: list[float] = []
    starts: list[float] = []
    load_before = _load()
    with _runner() as runner, _scratch(runner) as scratch:
        for number in range(rounds):
            for side in ("vq", "raw") if number % 2 == 0 else ("raw", "vq"):
                if side == "vq":
                    per_job, started = _vq_submit_round(runner, scratch, k)
                    vq_ms.append(per_job)
                    starts.append(started)
                else:
                    raw_ms.append(_raw_submit_round(runner, k))
    return [
        Result(
            key,
            name,
            Figure("claim → stage → intent → sbatch, per job (daemon, round mean)", "ms", vq_ms),
            Figure(
                f"ssh -l {BENCH_USER} {LOGIN} sbatch --hold --wrap true, muxed (round mean)",
                "ms",
                raw_ms,
            ),
            Target("≤ 1.5× muxed sbatch", "ratio", 1.5),
            extra={
                "daemon_start_ms": starts,
                "paired_rounds": rounds,
                "round_ratios": _ratios(vq_ms, raw_ms),
                "loadavg_1min": [load_before, _load()],
            },
        )
    ]


def _raw_true(runner: Any) -> float:
    start = time.perf_counter()
    result = runner.run(["sbatch", "--parsable", "-J", "vqbench-raw", "--wrap", "true"])
    result.check("sbatch")
    slurm_id = result.stdout.decode().strip()
    while True:
        state = runner.run(["squeue", "--noheader", "-j", slurm_id, "-o", "%T"])
        text = state.stdout.decode().strip()
        if text in ("", "COMPLETED", "FAILED", "CANCELLED"):
            return time.perf_counter() - start
        time.sleep(POLL)


def true_end_to_end() -> list[Result]:
    """lanes (d)."""
    runs = scaled(6, minimum=3)
    key, name = "lanes_true_e2e", f"lanes (d) `true` end to end, {runs} runs"
    vq_times: list[float] = []
    raw_times: list[float] = []
    load_before = _load()
    with _runner() as runner, _scratch(runner) as scratch, StateRoot("lanes-e2e") as state:
        _lane_config(state, scratch)
        state.start_daemon()
        for number in range(runs):
            for side in ("vq", "raw") if number % 2 == 0 else ("raw", "vq"):
                if side == "raw":
                    raw_times.append(_raw_true(runner))
                    continue
                start = time.perf_counter()
                argv = [VQ, "submit", "cluster", "--", "true"]
                job = run_checked(argv, state.env).stdout.strip()
                _wait_specs(state, [job], lambda d: d.get("state") == "COMPLETED")
                vq_times.append(time.perf_counter() - start - POLL)
        state.stop_daemon()
    return [
        Result(
            key,
            name,
            Figure("vq submit cluster -- true → COMPLETED, minus one round (1 s)", "s", vq_times),
            Figure("sbatch --wrap true, then squeue every 1 s until ended", "s", raw_times),
            Target("≤ 1.2× raw + one round", "ratio", 1.2),
            extra={
                "paired_runs": runs,
                "run_ratios": _ratios(vq_times, raw_times),
                "loadavg_1min": [load_before, _load()],
            },
        )
    ]


def run() -> list[Result]:
    # (a)–(b) last: the thousand held jobs they cancel are then the only records the
    # controller has to purge before the benchmark returns.
    groups: list[tuple[str, str, Callable[[], list[Result]]]] = [
        ("lanes_submit_cost", "lanes (c)", submit_cost),
        ("lanes_true_e2e", "lanes (d)", true_end_to_end),
        ("lanes_rpcs_per_round", "lanes (a)–(b)", held_rounds),
    ]
    if os.geteuid() != 0:
        return [
            Result(k, n, None, error="needs the testbed, which needs root") for k, n, _ in groups
        ]
    up = subprocess.run(
        [str(REPO / "scripts" / "testbed" / "up.sh")], capture_output=True, text=True, check=False
    )
    if up.returncode != 0 or "VQ_TESTBED_SLURM=1" not in (TB / "env.sh").read_text():
        return [Result(k, n, None, error="the testbed's Slurm is not up") for k, n, _ in groups]
    only = os.environ.get("VQ_BENCH_LANES", "")  # e.g. "c,d": measure only those rows
    results: list[Result] = []
    try:
        for key, name, measure in groups:
            if only and not any(f"({part.strip()})" in name for part in only.split(",")):
                continue
            try:
                results += measure()
            except Exception as exc:  # one failed measurement must not hide the others
                results.append(Result(key, name, None, error=f"{type(exc).__name__}: {exc}"))
    finally:
        cleanup = purge_wait()
    for result in results:
        result.extra.update(cleanup)
    return results
