"""Shared helpers of the benchmarks: scale, statistics, timing, state roots, daemons, tsp.

Every benchmark runs against its own fresh state root under /tmp (``StateRoot``) and
stops the daemon it started on the way out, also when the benchmark fails. Whole-process
timings are ``time.perf_counter`` around ``subprocess.run``; the children run without
``PYTHONDONTWRITEBYTECODE`` so the bytecode compiled at start-up is used.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The venv's interpreter and its ``vq`` console script.
PYTHON = sys.executable
VQ = str(Path(sys.executable).with_name("vq"))
REPO = Path(__file__).resolve().parent.parent

DAEMON_STOP_TIMEOUT = 90.0


# --- scale ------------------------------------------------------------------------------
def scale() -> float:
    """``VQ_BENCH_SCALE`` (default 1.0): multiplies iteration counts and sizes."""
    raw = os.environ.get("VQ_BENCH_SCALE", "1.0")
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"VQ_BENCH_SCALE must be a number, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise SystemExit(f"VQ_BENCH_SCALE must be > 0, got {raw!r}")
    return value


def scaled(n: float, minimum: int = 1) -> int:
    """``n`` times the scale, rounded, never below ``minimum``."""
    return max(minimum, round(n * scale()))


# --- statistics -------------------------------------------------------------------------
def summary(samples: Sequence[float]) -> dict[str, float | int]:
    """n / min / median / p95 / max of ``samples`` (p95 by linear interpolation)."""
    data = sorted(samples)
    if not data:
        raise ValueError("no samples")
    p95 = statistics.quantiles(data, n=20, method="inclusive")[18] if len(data) > 1 else data[0]
    return {
        "n": len(data),
        "min": data[0],
        "median": statistics.median(data),
        "p95": p95,
        "max": data[-1],
    }


# --- results ----------------------------------------------------------------------------
@dataclass
class Figure:
    """One measured quantity: a label, its unit and its samples (or a single value)."""

    label: str
    unit: str  # "s", "ms" or "%"
    samples: list[float]
    headline: str = "median"  # which statistic the table shows
    show_p95: bool = False  # the table adds the p95
    note: str = ""  # shown after the figure, e.g. "238 jobs/s"

    @property
    def stats(self) -> dict[str, float | int]:
        return summary(self.samples)

    @property
    def value(self) -> float:
        return float(self.stats[self.headline])

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "unit": self.unit,
            "headline": self.headline,
            "samples": self.stats,
            "note": self.note,
        }


@dataclass
class Target:
    """``value ≤ limit`` (kind "max") or ``value < limit`` (kind "below").

    ``on`` says what is compared: "ratio" (vq / comparison) or "value" (the vq figure).
    """

    text: str
    on: str
    limit: float
    strict: bool = False

    def met(self, observed: float) -> bool:
        return observed < self.limit if self.strict else observed <= self.limit

    def missed_by_percent(self, observed: float) -> float:
        return (observed / self.limit - 1.0) * 100.0

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "on": self.on, "limit": self.limit, "strict": self.strict}


@dataclass
class Result:
    """One row of the results table (and one entry of results.json)."""

    key: str
    name: str
    vq: Figure | None
    comparison: Figure | None = None
    target: Target | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.vq is None or self.comparison is None or self.comparison.value == 0:
            return None
        return self.vq.value / self.comparison.value

    @property
    def observed(self) -> float | None:
        if self.target is None or self.vq is None:
            return None
        return self.ratio if self.target.on == "ratio" else self.vq.value

    @property
    def met(self) -> bool | None:
        observed = self.observed
        if self.target is None or observed is None:
            return None
        return self.target.met(observed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "vq": None if self.vq is None else self.vq.as_dict(),
            "comparison": None if self.comparison is None else self.comparison.as_dict(),
            "ratio": self.ratio,
            "target": None if self.target is None else self.target.as_dict(),
            "met": self.met,
            "error": self.error,
            "extra": self.extra,
        }


# --- processes --------------------------------------------------------------------------
def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The benchmark's environment for a child: bytecode caching on, no inherited root."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if os.geteuid() == 0:  # a root daemon must be told it is a single-user one
        env["VQ_ALLOW_ROOT"] = "1"
    for name in ("VQ_STATE_DIR", "VQ_CONFIG_DIR", "VQ_ARCHIVE_DIR", "TS_SOCKET"):
        env.pop(name, None)
    if extra:
        env.update(extra)
    return env


def run_checked(
    argv: Sequence[str], env: dict[str, str], timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` capturing output; raise with its stderr if it fails."""
    proc = subprocess.run(
        list(argv), env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()}"
        )
    return proc


def time_process(argv: Sequence[str], env: dict[str, str], timeout: float = 60.0) -> float:
    """Seconds from spawn to reap of one run of ``argv`` (output discarded, must exit 0)."""
    start = time.perf_counter()
    proc = subprocess.run(
        list(argv),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=timeout,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"
        )
    return elapsed


def cpu_ticks(pid: int) -> tuple[int, int]:
    """(utime + stime, cutime + cstime) of ``pid`` in clock ticks, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        raw = handle.read()
    fields = raw[raw.rindex(b")") + 2 :].split()
    # fields[0] is field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17.
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def children_of(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (scanning /proc/*/stat)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        ppid = int(raw[raw.rindex(b")") + 2 :].split()[1])
        if ppid == pid:
            out.append(int(entry))
    return out


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- state roots and daemons ------------------------------------------------------------
class StateRoot:
    """A fresh temp dir under /tmp with ``state/`` and ``config/``; a daemon on demand.

    Use as a context manager: on exit the daemon (if one was started) is stopped and the
    directory removed (kept when ``VQ_BENCH_KEEP`` is set, for a look around).
    """

    def __init__(self, label: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"vq-bench-{label}-", dir="/tmp"))
        self.root = self.dir / "state"
        self.config = self.dir / "config"
        self.config.mkdir()
        self.env = child_env({"VQ_STATE_DIR": str(self.root), "VQ_CONFIG_DIR": str(self.config)})
        self.daemon_pid: int | None = None

    def __enter__(self) -> StateRoot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.stop_daemon()
        finally:
            if not os.environ.get("VQ_BENCH_KEEP"):
                shutil.rmtree(self.dir, ignore_errors=True)

    # --- paths ---------------------------------------------------------------------------
    @property
    def paths(self) -> Any:
        from vq.paths import StatePaths

        return StatePaths(self.root)

    @property
    def socket(self) -> str:
        return str(self.root / "daemon.sock")

    def client(self, timeout: float = 60.0) -> Any:
        from vq.client import Client

        return Client(self.socket, timeout=timeout)

    # --- daemon --------------------------------------------------------------------------
    def start_daemon(
        self, max_jobs: int | None = None, max_cpus: int | None = None
    ) -> dict[str, Any]:
        """``vq daemon start --json`` (returns once it answers); returns its ping answer."""
        argv = [VQ, "daemon", "start", "--json"]
        if max_jobs is not None:
            argv += ["--max-jobs", str(max_jobs)]
        if max_cpus is not None:
            argv += ["--max-cpus", str(max_cpus)]
        try:
            proc = run_checked(argv, self.env, timeout=180.0)
        except Exception:
            self._adopt_recorded_pid()
            raise
        answer: dict[str, Any] = json.loads(proc.stdout)
        self.daemon_pid = int(answer["pid"])
        return answer

    def _adopt_recorded_pid(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.daemon_pid = int((self.root / "daemon.pid").read_text().strip())

    def stop_daemon(self) -> None:
        """Stop the daemon this object started (``vq daemon stop``; SIGTERM/SIGKILL backup)."""
        pid = self.daemon_pid
        if pid is None:
            return
        try:
            subprocess.run(
                [VQ, "daemon", "stop"],
                env=self.env,
                capture_output=True,
                timeout=DAEMON_STOP_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pass
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.daemon_pid = None

    def daemon_log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join((self.root / "daemon.log").read_text().splitlines()[-lines:])
        except OSError:
            return "(no daemon.log)"


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    return raw[raw.rindex(b")") + 2 : raw.rindex(b")") + 3] != b"Z"


# --- task-spooler -----------------------------------------------------------------------
def find_tsp() -> str | None:
    """Path of task-spooler's client: ``tsp`` on Debian, sometimes ``ts``."""
    path = shutil.which("tsp")
    if path:
        return path
    path = shutil.which("ts")
    if path is None:
        return None
    try:
        help_text = subprocess.run(
            [path, "-h"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (help_text.stdout + help_text.stderr).lower()
    return path if "usage: ts [action]" in text else None  # not moreutils' ts


class TspQueue:
    """A private task-spooler server: own TS_SOCKET and TMPDIR in a temp dir.

    ``start()`` runs ``tsp -S <slots>`` (which starts the server); leaving the context
    runs ``tsp -K`` and removes the directory.
    """

    def __init__(self, tsp: str, label: str) -> None:
        self.tsp = tsp
        self.dir = Path(tempfile.mkdtemp(prefix=f"vq-bench-tsp-{label}-", dir="/tmp"))
        self.env = child_env({"TS_SOCKET": str(self.dir / "socket"), "TMPDIR": str(self.dir)})
        self.started = False

    def __enter__(self) -> TspQueue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self.started:
                subprocess.run(
                    [self.tsp, "-K"], env=self.env, capture_output=True, timeout=30, check=False
                )
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, slots: int = 2) -> None:
        self.started = True
        run_checked([self.tsp, "-S", str(slots)], self.env, timeout=30)

    def submit(self, *command: str) -> int:
        proc = run_checked([self.tsp, *command], self.env, timeout=60)
        return int(proc.stdout.strip())

    def unfinished(self) -> int:
        """Jobs still queued or running, from ``tsp -l``."""
        proc = run_checked([self.tsp, "-l"], self.env, timeout=60)
        count = 0
        for line in proc.stdout.splitlines()[1:]:
            parts = line.split(None, 2)
            if len(parts) >= 2 and parts[1] in {"queued", "running", "allocating"}:
                count += 1
        return count


# --- bulk spec set-up (not timed) -------------------------------------------------------
def write_specs(state: StateRoot, n: int, pending_every: int = 0) -> list[str]:
    """:func:`write_specs_at` into ``state``'s root."""
    return write_specs_at(state.paths, n, pending_every)


def write_specs_at(paths: Any, n: int, pending_every: int = 0) -> list[str]:
    """Write ``n`` valid specs straight to the store of ``paths`` (a ``StatePaths``),
    non-durably, then one ``os.sync()``. Imports nothing beyond vq and the standard library,
    so a remote host can run it (the fleet benchmark seeds its hosts this way).

    Every ``pending_every``-th spec (0: none) is PENDING with ``not_before`` a day ahead, so
    a daemon keeps it queued instead of running it; the others are COMPLETED with exit 0
    and the process identity a finished job keeps (``pid``/``pgid``/``pid_start_time``).
    Those pids lie above the kernel's ``pid_max``, so no live process can ever match them.
    Each spec gets its ``.lock`` sidecar, as real submits leave behind.
    """
    from datetime import UTC, datetime, timedelta

    from vq.domain.spec import JobSpec
    from vq.domain.states import JobState
    from vq.store.specs import encode_spec

    paths.ensure()
    with open("/proc/sys/kernel/pid_max") as handle:
        pid_max = int(handle.read())
    base = datetime.now(UTC) - timedelta(hours=1)
    later = datetime.now(UTC) + timedelta(days=1)
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < n:
        job_id = os.urandom(6).hex()
        if job_id in seen:
            continue
        seen.add(job_id)
        i = len(ids)
        submitted = base + timedelta(milliseconds=i)
        spec = JobSpec(
            id=job_id,
            submitted_at=submitted,
            command=["true"],
            cwd=str(paths.workspace(job_id)),
            cpus=1,
        )
        if pending_every and i % pending_every == 0:
            spec.not_before = later
        else:
            spec.state = JobState.COMPLETED
            spec.started_at = submitted + timedelta(milliseconds=5)
            spec.finished_at = submitted + timedelta(milliseconds=9)
            spec.exit_code = 0
            spec.workdir = str(paths.workdir(job_id))
            spec.pid = spec.pgid = pid_max + 1 + i
            spec.pid_start_time = 1000 + i
        spec_path = paths.spec(job_id)
        spec_path.write_bytes(encode_spec(spec))
        spec_path.with_name(spec_path.name + ".lock").touch()
        ids.append(job_id)
    os.sync()
    return ids
