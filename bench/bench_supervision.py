"""(f) start-up recovery with live groups, (g) watchdog CPU, (h) ``vq top --json`` latency.

All three share one state root, set up once (not timed):

* 9,950 COMPLETED specs written straight to the store, non-durably, as in (d);
* a daemon started with ``--max-jobs 50 --max-cpus 64`` and 50 ``sleep 600`` jobs
  submitted through ``Client.call("submit", ...)``, waited for until every spec records
  its ``pgid``. Then the daemon is SIGKILLed: its fork server exits by itself on EOF of
  its control socket, the collectors (own sessions) and their sleeps keep running.

(f) The clock runs from invoking ``vq daemon start --json --max-jobs 50 --max-cpus 64``
until it returns (it returns once the daemon answers a ping). The phases inside come from
the timestamps of the new daemon's lines in ``daemon.log`` (millisecond resolution):
"daemon starting" → "cgroup mode" (fork server start, cgroup probe) → "recovery:" (the
pass over every spec) → "daemon ready" (index load, socket bound). The row fails unless
the "recovery:" line reports every spec examined and all 50 reattached, and all 50 specs
are still RUNNING with a live group leader afterwards.

(g) That recovered daemon then supervises the 50 reattached sleepers (orphans to it:
their collectors are not children of its fork server). After 2 s of settling, the
utime+stime of the daemon and of its fork server, from ``/proc/<pid>/stat``, are sampled
before and after a window of 30 s (scaled, at least 10 s): percent of one core. Measured
the same way, for context: the set-up daemon with the same 50 jobs freshly launched
(not orphans), just before it is killed; and, at the end, an idle daemon on the same
root once the jobs are gone (10 s window).

(h) With the recovered daemon and its 50 running jobs: ``vq top --json`` and
``vq list --json`` on the same root, interleaved round by round, 20 runs each after one
untimed warm-up that checks the output (50 jobs in top, every spec in list).

Clean-up, in ``finally``: the daemon is stopped, then every process whose environment
holds ``VQ_STATE_DIR=<this root>`` (collectors, sleeps, a stray daemon or fork server) is
SIGKILLed and waited for.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import statistics
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

from common import (
    CLOCK_TICKS,
    VQ,
    Figure,
    Result,
    StateRoot,
    Target,
    children_of,
    cpu_ticks,
    run_checked,
    scale,
    scaled,
    time_process,
    write_specs,
)

SPECS = 10_000
JOBS = 50
MAX_CPUS = 64
JOB_COMMAND = ["sleep", "600"]
WINDOW_SECONDS = 30.0
MIN_WINDOW_SECONDS = 10.0
IDLE_WINDOW_SECONDS = 10.0
SETTLE_SECONDS = 2.0
TOP_RUNS = 20
LAUNCH_TIMEOUT_SECONDS = 60.0
EXIT_TIMEOUT_SECONDS = 15.0

_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_RECOVERY = re.compile(r"recovery: (\d+) specs examined, (\d+) reattached")


class Incomplete(Exception):
    """Some of this group's measurements crashed; ``results`` holds every row anyway.

    The rows that crashed carry their error. run.py reports the rows and counts the group
    as crashed (exit status 1).
    """

    def __init__(self, message: str, results: list[Result]) -> None:
        super().__init__(message)
        self.results = results


# --- processes of this root ---------------------------------------------------------------
def root_processes(state: StateRoot) -> list[int]:
    """Live pids (not this one) whose environment holds ``VQ_STATE_DIR=<state.root>``."""
    marker = f"VQ_STATE_DIR={state.root}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if marker in environ.split(b"\0") and _alive(int(entry)):
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    return raw[raw.rindex(b")") + 2 : raw.rindex(b")") + 3] not in (b"Z", b"X")


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    left = [pid for pid in pids if _alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if _alive(pid)]
    return left


def kill_root_processes(state: StateRoot) -> int:
    """SIGKILL every process of this root (see :func:`root_processes`); how many there were."""
    total = 0
    for _ in range(5):  # a collector may fork its command while we look
        pids = root_processes(state)
        if not pids:
            break
        total += len(pids)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        _wait_gone(pids, EXIT_TIMEOUT_SECONDS)
    return total


# --- daemon ---------------------------------------------------------------------------------
def _start_daemon(state: StateRoot, max_jobs: int) -> tuple[float, int]:
    """``vq daemon start --json`` with this benchmark's caps: (seconds to answer, pid)."""
    argv = [VQ, "daemon", "start", "--json", "--max-jobs", str(max_jobs)]
    argv += ["--max-cpus", str(MAX_CPUS)]
    t0 = time.perf_counter()
    try:
        proc = run_checked(argv, state.env, timeout=180.0)
    except Exception:
        with contextlib.suppress(OSError, ValueError):
            state.daemon_pid = int((state.root / "daemon.pid").read_text().strip())
        raise
    elapsed = time.perf_counter() - t0
    pid = int(json.loads(proc.stdout)["pid"])
    state.daemon_pid = pid
    return elapsed, pid


def _spec(state: StateRoot, job_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(state.paths.spec(job_id).read_bytes())
    return data


def _wait_launched(state: StateRoot, ids: list[str]) -> dict[str, int]:
    """Wait until every job is RUNNING with a recorded pgid; their pgids."""
    deadline = time.monotonic() + LAUNCH_TIMEOUT_SECONDS
    pgids: dict[str, int] = {}
    while True:
        for job_id in ids:
            if job_id in pgids:
                continue
            with contextlib.suppress(OSError, ValueError):
                spec = _spec(state, job_id)
                if spec.get("state") == "RUNNING" and spec.get("pgid"):
                    pgids[job_id] = int(spec["pgid"])
        if len(pgids) == len(ids):
            return pgids
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{len(ids) - len(pgids)} of {len(ids)} jobs had no pgid after "
                f"{LAUNCH_TIMEOUT_SECONDS:.0f}s:\n{state.daemon_log_tail()}"
            )
        time.sleep(0.05)


def _log_times(log_path: Path, offset: int) -> dict[str, Any]:
    """Timestamps (epoch seconds) of the start-up lines written after ``offset``."""
    with open(log_path, "rb") as handle:
        handle.seek(offset)
        lines = handle.read().decode(errors="replace").splitlines()
    marks = {
        "starting": "daemon starting",
        "cgroup": "cgroup mode:",
        "recovery": " specs examined, ",
        "ready": "daemon ready",
    }
    out: dict[str, Any] = {"recovery_line": None, "reattach_lines": 0}
    for line in lines:
        if "reattached to live process group" in line:
            out["reattach_lines"] += 1
        match = _LOG_TIME.match(line)
        if match is None:
            continue
        for key, needle in marks.items():
            if key not in out and needle in line:
                stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
                out[key] = stamp.timestamp()  # logging's asctime is local time
                if key == "recovery":
                    out["recovery_line"] = line[match.end() :]
    return out


def _ticks(pid: int) -> int | None:
    try:
        return cpu_ticks(pid)[0]
    except (OSError, ValueError):
        return None


def _cpu_window(state: StateRoot, daemon: int, seconds: float) -> dict[str, Any]:
    """Percent of one core used by the daemon, its fork server and the job processes."""
    server = children_of(daemon)
    jobs = [pid for pid in root_processes(state) if pid != daemon and pid not in server]
    pids = [daemon, *server, *jobs]
    before = {pid: _ticks(pid) for pid in pids}
    load_before = os.getloadavg()
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    after = {pid: _ticks(pid) for pid in pids}
    if after[daemon] is None or before[daemon] is None:
        raise RuntimeError(f"the daemon (pid {daemon}) died during the CPU window")

    def percent(group: list[int]) -> float:
        used = 0
        for pid in group:
            start, end = before[pid], after[pid]
            if start is not None and end is not None:
                used += end - start
        return used / CLOCK_TICKS / elapsed * 100

    return {
        "percent": percent([daemon, *server]),
        "daemon_percent": percent([daemon]),
        "fork_server_percent": percent(server),
        "job_processes_percent": percent(jobs),
        "job_processes": len(jobs),
        "window_seconds": elapsed,
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
    }


# --- the benchmark ------------------------------------------------------------------------
def _setup(state: StateRoot, n_specs: int, n_jobs: int, window: float) -> dict[str, Any]:
    """Specs, a daemon running ``n_jobs`` sleeps (its CPU measured), then SIGKILLed."""
    t0 = time.perf_counter()
    write_specs(state, n_specs - n_jobs)
    _, daemon = _start_daemon(state, n_jobs)
    client = state.client()
    ids = [client.call("submit", {"command": JOB_COMMAND})["id"] for _ in range(n_jobs)]
    pgids = _wait_launched(state, ids)
    seconds = time.perf_counter() - t0
    # The same daemon's CPU with the jobs freshly launched (not orphans), for context.
    time.sleep(SETTLE_SECONDS)
    fresh_cpu = _cpu_window(state, daemon, window)
    server = children_of(daemon)
    os.kill(daemon, signal.SIGKILL)
    state.daemon_pid = None
    left = _wait_gone([daemon, *server], EXIT_TIMEOUT_SECONDS)
    if left:
        raise RuntimeError(f"still alive {EXIT_TIMEOUT_SECONDS:.0f}s after SIGKILL: {left}")
    dead = [job_id for job_id, pgid in pgids.items() if not _alive(pgid)]
    if dead:
        raise RuntimeError(f"{len(dead)} job groups died with the daemon: {dead[:5]}")
    return {"ids": ids, "pgids": pgids, "seconds": seconds, "fresh_cpu": fresh_cpu}


def _recovery(
    state: StateRoot, name: str, n_specs: int, setup: dict[str, Any]
) -> tuple[Result, int]:
    """(f): time the start over the live groups, check the reattachment; (row, daemon pid)."""
    ids: list[str] = setup["ids"]
    pgids: dict[str, int] = setup["pgids"]
    n_jobs = len(ids)
    log_offset = state.paths.daemon_log.stat().st_size
    os.sync()
    wall_invoke = time.time()
    start_s, daemon = _start_daemon(state, n_jobs)
    marks = _log_times(state.paths.daemon_log, log_offset)
    recovery_s = marks["recovery"] - marks["starting"]
    match = _RECOVERY.search(marks["recovery_line"] or "")
    examined, reattached = (int(match[1]), int(match[2])) if match else (None, None)
    not_running = [
        job_id
        for job_id in ids
        if _spec(state, job_id).get("state") != "RUNNING" or not _alive(pgids[job_id])
    ]
    problems = []
    if reattached != n_jobs:
        problems.append(f"recovery reattached {reattached}, expected {n_jobs}")
    if examined != n_specs:
        problems.append(f"recovery examined {examined} specs, expected {n_specs}")
    if not_running:
        problems.append(f"{len(not_running)} jobs not RUNNING with a live group after")
    row = Result(
        "recovery_start",
        name,
        Figure("invoke → daemon answers", "s", [start_s], note=f"recovery pass {recovery_s:.3f} s"),
        target=Target("< 10 s", "value", 10.0, strict=True),
        extra={
            "specs": n_specs,
            "live_groups": n_jobs,
            "job_command": JOB_COMMAND,
            "setup_seconds_not_timed": setup["seconds"],
            "recovery_pass_s": recovery_s,
            "phases_s_from_log": {
                "invoke_to_daemon_starting": marks["starting"] - wall_invoke,
                "starting_to_cgroup_probed": marks["cgroup"] - marks["starting"],
                "cgroup_probed_to_recovery_done": marks["recovery"] - marks["cgroup"],
                "recovery_done_to_ready": marks["ready"] - marks["recovery"],
                "ready_to_cli_returned": wall_invoke + start_s - marks["ready"],
            },
            "recovery_log_line": marks["recovery_line"],
            "reattach_log_lines": marks["reattach_lines"],
            "examined": examined,
            "reattached": reattached,
            "not_running_after": not_running[:10],
        },
        error="; ".join(problems) or None,
    )
    return row, daemon


def _watchdog(
    state: StateRoot, name: str, daemon: int, window: float, setup: dict[str, Any]
) -> Result:
    """(g): CPU of the recovered daemon supervising the reattached jobs."""
    time.sleep(SETTLE_SECONDS)
    cpu = _cpu_window(state, daemon, window)
    fresh = setup["fresh_cpu"]
    return Result(
        "watchdog_cpu",
        name,
        Figure(
            "utime+stime / window",
            "%",
            [cpu["percent"]],
            note=f"fresh launches: {fresh['percent']:.2f} %",
        ),
        target=Target("< 2 % of a core", "value", 2.0, strict=True),
        extra={
            "what": "daemon + fork server; the jobs are orphans to this daemon",
            "reattached": cpu,
            "fresh_launches_before_the_kill": fresh,
            "clock_ticks_per_second": CLOCK_TICKS,
        },
    )


def _idle(state: StateRoot, n_jobs: int, row: Result) -> None:
    """The comparison of (g): same root, the jobs gone, a fresh daemon, 10 s."""
    state.stop_daemon()
    kill_root_processes(state)
    _, daemon = _start_daemon(state, n_jobs)
    time.sleep(SETTLE_SECONDS)
    idle = _cpu_window(state, daemon, IDLE_WINDOW_SECONDS)
    row.comparison = Figure(
        f"same root, no running jobs, {idle['window_seconds']:.0f} s", "%", [idle["percent"]]
    )
    row.extra["idle_same_root"] = idle


def run() -> list[Result]:
    n_specs = scaled(SPECS, minimum=500)
    n_jobs = scaled(JOBS, minimum=10)
    window = max(MIN_WINDOW_SECONDS, WINDOW_SECONDS * scale())
    runs = scaled(TOP_RUNS, minimum=5)
    names = {
        "recovery": f"(f) `vq daemon start`, {n_specs} specs, {n_jobs} live groups",
        "watchdog": f"(g) daemon CPU, {n_jobs} reattached running jobs",
        "top": f"(h) `vq top --json`, {n_jobs} running, {n_specs} specs",
    }
    rows: dict[str, Result] = {}
    crashed: list[str] = []

    def crash(key: str, row_key: str, exc: Exception) -> None:
        traceback.print_exc()
        crashed.append(key)
        rows[key] = Result(row_key, names[key], None, error=f"{type(exc).__name__}: {exc}")

    with StateRoot("supervision") as state:
        try:
            daemon = None
            try:
                setup = _setup(state, n_specs, n_jobs, window)
                rows["recovery"], daemon = _recovery(state, names["recovery"], n_specs, setup)
            except Exception as exc:
                crash("recovery", "recovery_start", exc)
            if daemon is None:
                for key, row_key in (("watchdog", "watchdog_cpu"), ("top", "top_json")):
                    rows[key] = Result(row_key, names[key], None, error="not run: (f) failed")
            else:
                try:
                    rows["watchdog"] = _watchdog(state, names["watchdog"], daemon, window, setup)
                except Exception as exc:
                    crash("watchdog", "watchdog_cpu", exc)
                try:
                    rows["top"] = _top(state, names["top"], n_jobs, n_specs, runs)
                except Exception as exc:
                    crash("top", "top_json", exc)
                if rows["watchdog"].vq is not None:
                    try:
                        _idle(state, n_jobs, rows["watchdog"])
                    except Exception as exc:
                        traceback.print_exc()
                        crashed.append("idle comparison")
                        rows["watchdog"].error = f"idle comparison: {type(exc).__name__}: {exc}"
        finally:
            state.stop_daemon()
            leftovers = kill_root_processes(state)
            for row in rows.values():
                row.extra["leftover_processes_killed"] = leftovers
    ordered = [rows[key] for key in ("recovery", "watchdog", "top")]
    if crashed:
        raise Incomplete(f"crashed: {', '.join(crashed)}", ordered)
    return ordered


def _top(state: StateRoot, name: str, n_jobs: int, n_specs: int, runs: int) -> Result:
    """(h): ``vq top --json`` and ``vq list --json`` interleaved, after checked warm-ups."""
    top_argv = [VQ, "top", "--json"]
    list_argv = [VQ, "list", "--json"]
    # Untimed warm-ups that check what the commands see.
    snap = json.loads(run_checked(top_argv, state.env, timeout=300).stdout)
    shown = len(snap["jobs"])
    if shown != n_jobs or not snap["daemon"]["running"]:
        raise RuntimeError(
            f"vq top --json shows {shown} jobs (expected {n_jobs}), "
            f"daemon running: {snap['daemon']['running']}"
        )
    listed = len(json.loads(run_checked(list_argv, state.env, timeout=300).stdout)["jobs"])
    if listed != n_specs:
        raise RuntimeError(f"vq list --json returned {listed} rows, expected {n_specs}")
    top_ms: list[float] = []
    list_ms: list[float] = []
    for _ in range(runs):
        top_ms.append(time_process(top_argv, state.env, timeout=300) * 1000)
        list_ms.append(time_process(list_argv, state.env, timeout=300) * 1000)
    ages = [job["sample_age_seconds"] for job in snap["jobs"]]
    known = [age for age in ages if age is not None]
    return Result(
        "top_json",
        name,
        Figure("vq top --json > /dev/null", "ms", top_ms, show_p95=True),
        Figure("vq list --json, same root", "ms", list_ms, show_p95=True),
        extra={
            "runs": runs,
            "jobs_shown": shown,
            "list_rows": listed,
            "stale_jobs_in_warmup": sum(1 for job in snap["jobs"] if job["stale"]),
            "jobs_without_sample_in_warmup": len(ages) - len(known),
            "median_sample_age_s_in_warmup": statistics.median(known) if known else None,
            "counts_in_warmup": snap["counts"],
        },
    )
