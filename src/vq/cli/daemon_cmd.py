"""``vq daemon start|stop|status|run``.

``run`` replaces this process with ``python -m vq.daemon`` (foreground, for tmux or a
service manager). ``start`` launches the same program detached and returns once the
daemon answers a ping, or fails with the daemon's own error message.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from vq.cli.common import client, echo_json, paths
from vq.errors import Conflict, DaemonNotRunning, VqError, error_from_payload

__all__ = ["daemon"]

START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 60.0


def _cap_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--auto-resume",
        is_flag=True,
        help="After a crash or reboot, rerun jobs whose outcome was lost as new sibling jobs.",
    )(fn)
    for flag, text in (
        ("--default-job-mem-mb", "Memory reserved by a job that declares none."),
        ("--max-mem-mb", "Total memory budget (default: host total)."),
        ("--max-cpus", "Total CPU budget (default: logical CPUs)."),
        ("--max-jobs", "At most this many jobs at once."),
    ):
        fn = click.option(flag, type=click.IntRange(1), help=text)(fn)
    return fn


def _daemon_argv(caps: dict[str, Any]) -> list[str]:
    argv = [sys.executable, "-m", "vq.daemon"]
    if caps.pop("auto_resume", False):
        argv.append("--auto-resume")
    for key, value in caps.items():
        if value is not None:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


@click.group()
def daemon() -> None:
    """Start, stop and inspect the daemon of this state root."""


@daemon.command()
@_cap_options
def run(**caps: Any) -> None:
    """Run the daemon in the foreground (Ctrl-C stops it; jobs keep running)."""
    argv = _daemon_argv(caps)
    os.execv(argv[0], argv)


@daemon.command()
@_cap_options
@click.option("--json", "as_json", is_flag=True)
def start(as_json: bool, **caps: Any) -> None:
    """Start the daemon in the background; returns once it answers."""
    state = paths()
    existing = client().ping()
    if existing is not None:
        raise Conflict(
            f"a vq daemon already runs for {state.root} (pid {existing['pid']})",
            hint="`vq daemon stop` stops it",
            reference="daemon-running",
        )
    state.ensure()
    log = open(state.daemon_log, "ab")  # noqa: SIM115 - handed to the child
    with log:
        child = subprocess.Popen(
            _daemon_argv(caps),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        answer = client().ping(timeout=1.0)
        if answer is not None:
            if as_json:
                echo_json(answer)
            else:
                click.echo(f"vq daemon started (pid {answer['pid']}) on {state.root}")
            return
        code = child.poll()
        if code is not None:
            # Keep the daemon's own error class (and so its exit code: 9 for config).
            raise error_from_payload(
                {
                    "code": code,
                    "message": f"the daemon exited with code {code} while starting: "
                    + _last_error(state.daemon_log),
                    "hint": f"see {state.daemon_log}",
                    "reference": "daemon-start-failed",
                }
            )
        time.sleep(0.05)
    raise VqError(
        f"the daemon did not answer within {START_TIMEOUT_SECONDS:.0f}s",
        hint=f"see {state.daemon_log}",
        reference="daemon-start-timeout",
    )


def _last_error(log_path: os.PathLike[str]) -> str:
    try:
        with open(log_path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(log_path) - 4096))
            lines = handle.read().decode(errors="replace").splitlines()
    except OSError:
        return "no log"
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["no log"])[-1].strip()


def _alive(pid: int) -> bool:
    from vq.executors.procs import is_alive

    return is_alive(pid)


@daemon.command()
def stop() -> None:
    """Stop the daemon (SIGTERM). Running jobs keep running and are reattached later."""
    answer = client().ping()
    if answer is None:
        click.echo("vq daemon is not running")
        return
    pid = int(answer["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while _alive(pid):
        if time.monotonic() > deadline:
            raise VqError(
                f"the daemon (pid {pid}) did not stop within {STOP_TIMEOUT_SECONDS:.0f}s",
                hint="it may be finishing its recovery pass; check daemon.log",
            )
        time.sleep(0.05)
    click.echo(f"vq daemon stopped (pid {pid})")


@daemon.command()
@click.option("--json", "as_json", is_flag=True)
def status(as_json: bool) -> None:
    """Whether the daemon runs, and its version, pid, uptime and caps (exit 5 if not)."""
    answer = client().ping()
    if as_json:
        echo_json({"running": answer is not None, **(answer or {})})
        if answer is None:
            raise SystemExit(DaemonNotRunning.exit_code)
        return
    if answer is None:
        raise DaemonNotRunning(
            f"no vq daemon is running for {paths().root}", hint="start one with `vq daemon start`"
        )
    caps = answer["caps"]
    click.echo(
        f"vq daemon {answer['version']} running (pid {answer['pid']}, "
        f"up {answer['uptime_seconds']:.0f}s) on {answer['state_root']}\n"
        f"caps: max_jobs={caps['max_jobs'] or 'unlimited'} max_cpus={caps['max_cpus']} "
        f"max_mem_mb={caps['max_mem_mb']}"
    )
