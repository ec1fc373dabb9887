"""Run every vq benchmark in one process, print a table, write bench/results.json.

Usage: ``make bench``, or ``.venv/bin/python bench/run.py`` (``VQ_BENCH_SCALE=0.1`` for a
quick smoke run). Targets are reported, not enforced: the exit status is 0 when every
benchmark ran, whether or not it met its target, and 1 when one of them crashed.
See bench/README.md.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # children inherit bytecode caching

from rich.console import Console
from rich.table import Table

import bench_affinity
import bench_campaign
import bench_campaign_remote
import bench_drain
import bench_fleet
import bench_floors
import bench_idle
import bench_lanes
import bench_list
import bench_multi_user
import bench_pack
import bench_publish
import bench_remote
import bench_scale
import bench_ssh
import bench_submit
import bench_supervision
import bench_swarm
import bench_web
import bench_workflows
from common import PYTHON, REPO, VQ, Figure, Result, child_env, scale

RESULTS = Path(__file__).resolve().parent / "results.json"

#: (what runs, the function) in run order; each returns result rows.
GROUPS: list[tuple[str, Callable[[], list[Result]]]] = [
    ("physical floors", bench_floors.run),
    ("(a) vq submit CLI", bench_submit.submit_cli),
    ("(b) submit → running latency", bench_submit.latency),
    ("(c) queue drain", bench_drain.run),
    ("(d) vq list over 10k specs", bench_list.run),
    ("(e) idle daemon CPU", bench_idle.run),
    ("(f)–(h) recovery, supervision CPU, vq top", bench_supervision.run),
    ("(i) array submit via the CLI", bench_workflows.array_submit),
    ("(j) dependency graph drain", bench_workflows.graph_drain),
    ("(k)–(l) web console and /api/v1 over 10k specs", bench_web.listing),
    ("(m) web: HTTP submit → result round trip", bench_web.round_trip),
    ("(n) web: 100 long-polling agents", bench_web.long_pollers),
    ("(o) SSH round trip, multiplexed vs fresh", bench_ssh.run),
    ("(p) campaign artifact hashing", bench_campaign.run),
    ("(q) publish", bench_publish.run),
    ("(v)–(x) packed Slurm sweeps", bench_pack.run),
    ("(t) swarm: 2,000-element array, --max-parallel 2", bench_swarm.run),
    ("(u) 100k specs: start, submit, list, status, RSS, idle CPU", bench_scale.run),
    ("remote (b)–(d): remote daemons over SSH", bench_remote.run),
    ("(r) CPU affinity: pinned vs unpinned matmul pair", bench_affinity.run),
    ("fleet (a)–(c): the fleet console over SSH", bench_fleet.run),
    ("lanes (a)–(d): Slurm lanes over SSH", bench_lanes.run),
    ("campaign (a), (c): the controller over three hosts", bench_campaign_remote.run),
    ("multi-user (a)–(c): root daemon over per-user trees", bench_multi_user.run),
]


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _git_commit() -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None


def loadavg() -> list[float] | None:
    try:
        return [float(x) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        vq_version: str | None = version("vq")
    except PackageNotFoundError:
        vq_version = None
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "kernel": platform.release(),
        "platform": platform.platform(),
        "python_version": platform.python_version(),
        "python": PYTHON,
        "vq_version": vq_version,
        "git": _git_commit(),
        "scale": scale(),
        "loadavg_start": loadavg(),
    }


def prepare(console: Console) -> None:
    """Bytecode for src (the editable install never caches it otherwise); a working CLI."""
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", str(REPO / "src")],
        env=child_env(),
        stdout=subprocess.DEVNULL,
        check=False,
    )
    probe = subprocess.run(
        [VQ, "--help"], env=child_env(), capture_output=True, text=True, timeout=60, check=False
    )
    if probe.returncode != 0:
        console.print(f"[red]`{VQ} --help` fails; cannot benchmark:[/]\n{probe.stderr.strip()}")
        raise SystemExit(1)


# --- formatting -------------------------------------------------------------------------
def fmt(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"
    if unit == "s":
        return f"{value:.3f} s" if value < 10 else f"{value:.2f} s"
    if unit == "%":
        return f"{value:.2f} %"
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def fmt_figure(figure: Figure | None, *, with_label: bool = False) -> str:
    if figure is None:
        return "—"
    stats = figure.stats
    text = fmt(figure.value, figure.unit)
    if stats["n"] > 1 and figure.headline == "median":
        text += " med"
    if figure.show_p95:
        text += f"\np95 {fmt(float(stats['p95']), figure.unit)}"
    if figure.note:
        text += f"\n{figure.note}"
    if with_label:
        text += f"\n[dim]{figure.label}[/]"
    return text


def verdict(result: Result) -> str:
    if result.error:
        return "[red]error[/]"
    met = result.met
    if met is None:
        return "[dim]info[/]"
    if met:
        return "[green]met[/]"
    assert result.target is not None and result.observed is not None
    return f"[red]missed by {result.target.missed_by_percent(result.observed):.0f}%[/]"


def table(results: list[Result]) -> Table:
    out = Table(title=f"vq benchmarks (VQ_BENCH_SCALE={scale():g})", show_lines=True)
    out.add_column("benchmark")
    out.add_column("vq", justify="right")
    out.add_column("comparison (floor or peer)", justify="right")
    out.add_column("ratio", justify="right")
    out.add_column("target")
    out.add_column("verdict")
    for result in results:
        ratio = result.ratio
        name = result.name if not result.error else f"{result.name}\n[red]{result.error}[/]"
        out.add_row(
            name,
            fmt_figure(result.vq),
            fmt_figure(result.comparison, with_label=True),
            "—" if ratio is None else f"{ratio:.2f}×",
            result.target.text if result.target else "—",
            verdict(result),
        )
    return out


# --- driver -----------------------------------------------------------------------------
def main() -> int:
    console = Console(width=None if sys.stdout.isatty() else 150)
    progress = Console(stderr=True)
    info = machine_info()
    load = info["loadavg_start"]
    if load and load[0] > 0.5:
        progress.print(
            f"[yellow]warning: 1-minute load average is {load[0]:.2f} before the run; other "
            "work on this machine skews the figures (ratios suffer least)[/]"
        )
    prepare(console)
    results: list[Result] = []
    failed = False
    started = time.perf_counter()
    only = os.environ.get("VQ_BENCH_ONLY", "")
    for label, fn in GROUPS:
        if only and only not in label:
            continue
        os.sync()  # leave no earlier writeback for this group to pay for
        progress.print(f"[bold]→ {label}[/] (t={time.perf_counter() - started:.0f}s)")
        try:
            results.extend(fn())
        except bench_supervision.Incomplete as exc:  # some rows measured, some crashed
            failed = True
            progress.print(f"[red]{label}: {exc}[/]")
            results.extend(exc.results)
        except Exception as exc:
            failed = True
            progress.print(traceback.format_exc())
            results.append(Result(label, label, None, error=f"{type(exc).__name__}: {exc}"))
    info["duration_seconds"] = time.perf_counter() - started
    info["loadavg_end"] = loadavg()
    console.print(table(results))
    RESULTS.write_text(
        json.dumps({"machine": info, "benchmarks": [r.as_dict() for r in results]}, indent=2) + "\n"
    )
    console.print(f"results: {RESULTS} ({info['duration_seconds']:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
