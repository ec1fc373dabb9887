"""``vq daemon health [--json]`` (§6.5): the daemon's lifecycle check, for monitors.

Exit 0 when every check passed, 1 when one failed, 5 when no daemon answers. The checks
(loop progress, dispatch holds, fork server, index against disk, state root) are the
daemon's ``health`` RPC method (:mod:`vq.daemon.handlers.health`).
"""

from __future__ import annotations

import click

from vq.cli.common import echo_json, gateway, paths
from vq.errors import DaemonNotRunning
from vq.protocol.answers import HEALTH

__all__ = ["health"]


@click.command()
@click.option("--json", "as_json", is_flag=True, help='{"ok", "checked_at", "checks"}.')
def health(as_json: bool) -> None:
    """Check the daemon's loop, dispatch, fork server, index and state root (exit 1 if not)."""
    answer = gateway().call(HEALTH)
    if answer is None:
        if as_json:
            echo_json({"ok": False, "running": False, "checks": []})
            raise SystemExit(DaemonNotRunning.exit_code)
        raise DaemonNotRunning(
            f"no vq daemon is running for {paths().root}", hint="start one with `vq daemon start`"
        )
    if as_json:
        echo_json({**answer, "running": True})
    else:
        for check in answer["checks"]:
            mark = "ok  " if check["ok"] else "FAIL"
            click.echo(f"{mark}  {check['name']:<12} {check['detail']}")
        click.echo("healthy" if answer["ok"] else "unhealthy")
    if not answer["ok"]:
        raise SystemExit(1)
