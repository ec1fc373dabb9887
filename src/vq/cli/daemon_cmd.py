"""``vq daemon start|stop|status|run|drain|undrain|throttle|reload|ping|admin-status``.

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
from typing import TYPE_CHECKING, Any, TypedDict, cast

import click

from vq.cli.common import client, echo_json, paths
from vq.cli.types import AsciiIntRange

if TYPE_CHECKING:
    from vq.protocol.answers import ThrottleAnswer
from vq.errors import (
    Conflict,
    DaemonNotRunning,
    StorageError,
    UsageError,
    VqError,
    error_from_payload,
)

__all__ = ["daemon"]

START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 60.0


class DaemonOptions(TypedDict, total=False):
    """The options :func:`_cap_options` adds, as Click passes them (None: not given)."""

    allow_root: bool
    web_allow_remote: bool
    web_port: int | None
    fleet: bool
    web_host: str | None
    web: bool
    auto_resume: bool
    default_job_mem_mb: int | None
    max_mem_mb: int | None
    max_cpus: int | None
    max_jobs: int | None


def _cap_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--allow-root",
        is_flag=True,
        help="As root: run a single-user daemon anyway (containers, CI); also VQ_ALLOW_ROOT=1.",
    )(fn)
    fn = click.option(
        "--web-allow-remote",
        is_flag=True,
        help="Allow a non-loopback --web-host (TLS and ACLs are yours).",
    )(fn)
    fn = click.option(
        "--web-port",
        type=AsciiIntRange(1, 65535),
        help="Port of the web console (default 8477).",
    )(fn)
    fn = click.option(
        "--fleet",
        is_flag=True,
        help="With --web: also serve the fleet console over every configured host.",
    )(fn)
    fn = click.option("--web-host", help="Address of the web console (default 127.0.0.1).")(fn)
    fn = click.option(
        "--web",
        is_flag=True,
        help="Also serve the web console as a child process (restarted if it dies).",
    )(fn)
    fn = click.option(
        "--auto-resume",
        is_flag=True,
        help=(
            "Default `vq submit --auto-resume` for jobs submitted through this daemon "
            "without it (auto-resume is per job)."
        ),
    )(fn)
    for flag, text in (
        ("--default-job-mem-mb", "Memory reserved by a job that declares none."),
        ("--max-mem-mb", "Total memory budget (default: host total)."),
        ("--max-cpus", "Total CPU budget (default: logical CPUs)."),
        ("--max-jobs", "At most this many jobs at once."),
    ):
        fn = click.option(flag, type=AsciiIntRange(1), help=text)(fn)
    return fn


def _web_argv(caps: DaemonOptions) -> list[str]:
    """``--web*`` options for ``python -m vq.daemon`` (popped from ``caps``); checks the host."""
    web = caps.pop("web", False)
    host, port = caps.pop("web_host", None), caps.pop("web_port", None)
    allow_remote = caps.pop("web_allow_remote", False)
    fleet = caps.pop("fleet", False)
    if not web:
        if host is not None or port is not None or allow_remote or fleet:
            raise UsageError("--web-host, --web-port, --web-allow-remote and --fleet need --web")
        return []
    from vq.web.binding import check_bind

    argv = ["--web"]
    if host is not None:
        from vq.web.binding import is_loopback

        names: tuple[str, ...] = ()
        if allow_remote and not is_loopback(host):
            from vq.web.hosts import configured_hosts

            names = configured_hosts()  # the sidecar answers only to [web] allowed_hosts
        warning = check_bind(host, port or 8477, allow_remote, names)
        if warning:
            click.echo(warning, err=True)
        argv += ["--web-host", host]
    if port is not None:
        argv += ["--web-port", str(port)]
    if allow_remote:
        argv.append("--web-allow-remote")
    if fleet:
        argv.append("--web-fleet")
    return argv


def _daemon_argv(caps: DaemonOptions) -> list[str]:
    argv = [sys.executable, "-m", "vq.daemon", *_web_argv(caps)]
    if caps.pop("auto_resume", False):
        argv.append("--auto-resume")
    if caps.pop("allow_root", False):
        argv.append("--allow-root")
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
    argv = _daemon_argv(cast(DaemonOptions, caps))
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
    _check_root_start(bool(caps.get("allow_root")))
    state.ensure()
    from vq._fs import open_log

    log = os.fdopen(open_log(state.daemon_log), "ab")  # never world-readable; to the child
    with log:
        child = subprocess.Popen(
            _daemon_argv(cast(DaemonOptions, caps)),
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
            reason = _last_error(state.daemon_log)
            if code == StorageError.exit_code and reason == "no log":
                # Its error line could not be logged either: the disk is full.
                raise StorageError(
                    f"the daemon could not start: no space left on {state.root}",
                    hint="free space there (`df -h`, `vq cleanup`), then start it again",
                )
            # Keep the daemon's own error class (and so its exit code: 9 for config).
            raise error_from_payload(
                {
                    "code": code,
                    "message": f"the daemon exited with code {code} while starting: " + reason,
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


def _check_root_start(allow_root: bool) -> None:
    """Refuse a root start here too, before the state tree or daemon.log is created.

    With ``--allow-root`` an invalid configuration is left for the daemon to report,
    exactly as for an ordinary user.
    """
    if os.geteuid() != 0:
        return
    from vq.config.multi_user import allow_root_from_env
    from vq.config.settings import load_settings
    from vq.errors import ConfigError
    from vq.services.root_guard import start_mode

    allow_root = allow_root or allow_root_from_env(os.environ)
    try:
        settings = load_settings()
    except ConfigError:
        if allow_root:
            return
        raise
    start_mode(0, allow_root, lambda: settings)


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
    from vq._proc_stat import is_alive

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
    effective = answer.get("effective_caps")
    if effective and effective != caps:
        click.echo(
            f"throttled to: max_jobs={effective['max_jobs'] or 'unlimited'} "
            f"max_cpus={effective['max_cpus']}"
        )


@daemon.command()
@click.option("--full", is_flag=True, help="Also pause the running jobs until undrain.")
@click.option("--reject-submits", is_flag=True, help="Refuse new submissions meanwhile.")
@click.option("--reason", help="Why (shown to submitters and in admin status).")
@click.option("--json", "as_json", is_flag=True)
def drain(full: bool, reject_submits: bool, reason: str | None, as_json: bool) -> None:
    """Stop starting jobs (kept across restarts in drain.json) until `vq daemon undrain`."""
    from vq.cli.common import gateway

    result = gateway().drain(full=full, reject_submits=reject_submits, reason=reason)
    if as_json:
        echo_json(result)
    else:
        click.echo(
            f"draining ({result['mode']}); submissions "
            + ("refused" if result["reject_submits"] else "still accepted")
        )


@daemon.command()
def undrain() -> None:
    """Start dispatching again (and resume jobs a full drain paused)."""
    from vq.cli.common import gateway

    gateway().undrain()
    click.echo("dispatch resumed")


def throttle_table(result: ThrottleAnswer) -> str:
    """``vq daemon throttle``'s answer as an aligned table (``--json`` has the object)."""
    limits, effective = result.get("throttle"), result.get("effective_caps")
    expires = limits.get("expires_at") if limits else None
    lines = [f"throttled {'until ' + expires if expires else 'until cleared (--clear)'}"]
    rows = [("CAP", "THROTTLE", "EFFECTIVE")]
    jobs_now = effective.get("max_jobs") if effective else None
    cpus_now = effective.get("max_cpus") if effective else None
    caps = (
        ("max_jobs", limits.get("max_jobs") if limits else None, jobs_now),
        ("max_cpus", limits.get("max_cpus") if limits else None, cpus_now),
    )
    for cap, value, now in caps:
        rows.append((cap, "-" if value is None else str(value), "-" if now is None else str(now)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        lines.append(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    if not effective:
        lines.append("(no daemon running: it applies the throttle when it starts)")
    return "\n".join(lines)


@daemon.command()
@click.option("--max-jobs", type=AsciiIntRange(1), help="Temporary job limit.")
@click.option("--max-cpus", type=AsciiIntRange(1), help="Temporary CPU limit.")
@click.option("--for", "duration", help="Expire after this long (e.g. 2h); default: until cleared.")
@click.option("--clear", is_flag=True, help="Remove the throttle.")
@click.option("--json", "as_json", is_flag=True)
def throttle(
    max_jobs: int | None, max_cpus: int | None, duration: str | None, clear: bool, as_json: bool
) -> None:
    """Temporarily lower max_jobs/max_cpus (kept across restarts in throttle.json)."""
    from vq.cli.common import gateway
    from vq.domain.durations import parse_duration

    if not clear and max_jobs is None and max_cpus is None:
        raise UsageError("give --max-jobs and/or --max-cpus, or --clear")
    seconds = parse_duration(duration) if duration else None
    result = gateway().throttle(clear=clear, max_jobs=max_jobs, max_cpus=max_cpus, seconds=seconds)
    if as_json:
        echo_json(result)
    elif clear:
        click.echo("throttle cleared")
    else:
        click.echo(throttle_table(result))


@daemon.command()
@click.option("--json", "as_json", is_flag=True)
def reload(as_json: bool) -> None:
    """Re-read the configuration; report what changed and what needs a restart."""
    from vq.cli.common import gateway
    from vq.protocol.answers import RELOAD

    result = gateway().daemon_only(RELOAD)
    if as_json:
        echo_json(result)
        return
    click.echo("changed: " + (", ".join(result["changed"]) or "nothing"))
    lanes = result.get("lanes")
    if lanes is not None:
        for what, names in (
            ("added", lanes["added"]),
            ("changed", lanes["changed"]),
            ("removed", lanes["removed"]),
        ):
            if names:
                click.echo(f"scheduler lanes {what}: " + ", ".join(names))
    if result["needs_restart"]:
        click.echo("needs a daemon restart: " + ", ".join(result["needs_restart"]))


@daemon.command()
@click.option("--json", "as_json", is_flag=True)
def ping(as_json: bool) -> None:
    """Ask the daemon to answer (version, pid, uptime, methods); exit 5 if none does."""
    from vq.cli.common import gateway
    from vq.protocol.answers import PING

    answer = gateway().daemon_only(PING)
    if as_json:
        echo_json(answer)
    else:
        click.echo(f"pong from vq {answer['version']} (pid {answer['pid']})")


@daemon.command("admin-status")
@click.option("--json", "as_json", is_flag=True)
def admin_status(as_json: bool) -> None:
    """Drain, throttle, config and pressure holds, and the effective caps."""
    from vq.cli.common import gateway
    from vq.protocol.answers import ADMIN_STATUS

    answer = gateway().daemon_only(ADMIN_STATUS)
    if as_json:
        echo_json(answer)
        return
    holding = (
        answer["holding_dispatch"]
        or answer["memory_pressure_hold"]
        or bool(answer.get("storage_hold"))
    )
    click.echo(
        f"drain: {answer['drain']['mode']}  throttle: {answer['throttle'] or 'none'}  "
        f"holding dispatch: {holding}"
    )
    if answer["config_error"]:
        click.echo(f"config error: {answer['config_error']}")
    if answer.get("dispatch_hold"):
        click.echo(answer["dispatch_hold"])
    storage = answer.get("storage_hold")
    if storage:
        click.echo(f"storage hold: {storage['message']} (since {storage['since']})")
    click.echo(f"effective caps: {answer['effective_caps']}")


from vq.cli.install_service import install_service  # noqa: E402

daemon.add_command(install_service)

from vq.cli.health_cmd import health  # noqa: E402

daemon.add_command(health)
