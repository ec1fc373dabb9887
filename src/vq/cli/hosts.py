"""``vq hosts [--probe] [--json]``: the configured remote hosts and their last known health.

Without ``--probe`` nothing is contacted: the rows come from ``<state-root>/hosts/*.json``.
``--probe`` runs the remote ``vq --version`` on every host that is not marked down and
whose backoff (2, 4 … 300 s after consecutive failures) has elapsed, in parallel, each
within its ``ssh_timeout``; ``--force`` ignores the backoff. A host that answers is then
asked whether its daemon runs (``vq daemon ping --json``, as bounded): one that answers
over SSH without a daemon shows ``ssh ok, no daemon`` (``"daemon": "not_running"`` in
``--json``; ``status`` stays ``ok``, the SSH answer). An answer that is not
``vq, version X`` marks the host ``invalid`` (:func:`~vq.protocol.remote_answers.read_version`);
every text shown comes from the health record, whose remote words are escaped there
(:func:`vq.hosts.health.remote_text`). Exits 0 when every probed
host answered, 11 otherwise. Each row also counts ``unresolved_submits``: delegated
submits whose outcome is unknown, kept in the outbox (:mod:`vq.remote.outbox`).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import click

from vq.cli.output import echo_json
from vq.config.host_names import effective_default_host
from vq.errors import TransportError, VqError
from vq.hosts.health import HealthJSON, HostHealth, mark_down, read_health, record_ok
from vq.protocol.remote_answers import BadAnswer, read_version
from vq.remote.fleet import Fleet, load_fleet
from vq.remote.outbox import outbox_dir, unresolved

__all__ = ["hosts", "probe_host"]

_MAX_PARALLEL = 8


def probe_host(fleet: Fleet, name: str) -> HostHealth:
    """One bounded ``vq --version`` on ``name``; the result is its new health."""
    host = fleet.host(name)
    started = time.monotonic()
    try:
        result = host.run(["--version"])
    except VqError:
        return read_health(fleet.state_root, name)
    if result.rc != 0:
        from vq.hosts.health import record_failure

        said = result.stderr.decode(errors="replace").strip().splitlines()
        return record_failure(
            fleet.state_root,
            name,
            f"`vq --version` exited {result.rc}" + (f": {said[-1]}" if said else ""),
            invalid=True,
        )
    try:
        version = read_version(result.stdout)
    except BadAnswer as exc:
        host.bad_answer(["--version"], str(exc))  # recorded: the host is invalid
        return read_health(fleet.state_root, name)
    rtt = (time.monotonic() - started) * 1000
    record_ok(fleet.state_root, name, rtt, vq_version=version)
    return _probe_daemon(fleet, name)


def _probe_daemon(fleet: Fleet, name: str) -> HostHealth:
    """Whether ``name``'s daemon answers (``vq daemon ping --json`` there): exit 0 is
    ``running``, the remote vq's own DaemonNotRunning (exit 5) ``not_running``; any other
    outcome leaves the daemon's last known status as it was."""
    from vq.errors import DaemonNotRunning
    from vq.hosts.health import record_daemon
    from vq.remote.host import said_vq_error

    try:
        result = fleet.host(name).run(["daemon", "ping", "--json"])
    except VqError:
        return read_health(fleet.state_root, name)
    if result.rc == 0:
        return record_daemon(fleet.state_root, name, "running")
    if result.rc == DaemonNotRunning.exit_code and said_vq_error(result):
        return record_daemon(fleet.state_root, name, "not_running")
    return read_health(fleet.state_root, name)


class HostRow(HealthJSON):
    """One host of ``vq hosts --json``: its health and configuration."""

    ssh: str
    default: bool
    down: bool
    unresolved_submits: int


def _row(fleet: Fleet, name: str, health: HostHealth, unresolved: int) -> HostRow:
    settings = fleet.hosts[name]
    return {
        **health.as_dict(),
        "ssh": settings.ssh,
        "default": fleet.default_host == name,
        "down": settings.down,
        "unresolved_submits": unresolved,
    }


@click.command()
@click.option("--probe", is_flag=True, help="Contact each host now (respects the backoff).")
@click.option("--force", is_flag=True, help="With --probe: ignore the backoff.")
@click.option("--json", "as_json", is_flag=True, help="Print the hosts as JSON.")
def hosts(probe: bool, force: bool, as_json: bool) -> None:
    """List the configured remote hosts ([hosts.NAME]) and their health."""
    fleet = load_fleet()
    now = datetime.now(UTC)
    healths: dict[str, HostHealth] = {}
    to_probe: list[str] = []
    for name in fleet.names():
        if fleet.hosts[name].down:
            healths[name] = mark_down(fleet.state_root, name)
            continue
        healths[name] = read_health(fleet.state_root, name)
        if probe and (force or healths[name].probe_due(now)):
            to_probe.append(name)
    if to_probe:
        with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL, len(to_probe))) as pool:
            for name, health in zip(
                to_probe, pool.map(lambda n: probe_host(fleet, n), to_probe), strict=True
            ):
                healths[name] = health
    kept = unresolved(fleet.state_root)
    rows = [_row(fleet, name, healths[name], len(kept.get(name, []))) for name in fleet.names()]
    if as_json:
        echo_json({"hosts": rows, "default_host": effective_default_host(fleet.default_host)})
    else:
        _render(rows, fleet.default_host)
        _render_unresolved(rows, fleet)
    if any(healths[name].status != "ok" for name in to_probe):
        raise SystemExit(TransportError.exit_code)


def _render(rows: list[HostRow], default: str | None) -> None:
    if not rows:
        click.echo("no remote hosts configured ([hosts.NAME] in config.toml)")
        return
    click.echo(f"{'HOST':<16} {'STATUS':<17} {'RTT':>8}  {'VERSION':<10} {'LAST OK':<20} ERROR")
    for row in rows:
        rtt = f"{row['rtt_ms']:.0f} ms" if row["rtt_ms"] is not None else "-"
        last_ok = (row["last_ok_at"] or "-")[:19]
        name = row["name"] + (" *" if row["default"] else "")
        click.echo(
            f"{name:<16} {_shown_status(row):<17} {rtt:>8}  {row['vq_version'] or '-':<10} "
            f"{last_ok:<20} {row['last_error'] or ''}"
        )
    where = "default_host" if default else "default_host is not set: this queue"
    click.echo(f"default host: {effective_default_host(default)} ({where})")


def _shown_status(row: HostRow) -> str:
    """STATUS as :attr:`~vq.hosts.health.HostHealth.shown_status` words it."""
    if row["status"] == "ok" and row["daemon"] == "not_running":
        return "ssh ok, no daemon"
    return row["status"]


def _render_unresolved(rows: list[HostRow], fleet: Fleet) -> None:
    for row in rows:
        if row["unresolved_submits"]:
            click.echo(
                f"{row['name']}: {row['unresolved_submits']} submit(s) with an unknown outcome "
                f"kept in {outbox_dir(fleet.state_root)}; rerun each with its "
                "--idempotency-key (request.json) or check `vq queue "
                f"{row['name']}`, then remove the entry"
            )
