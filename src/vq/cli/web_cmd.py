"""``vq web ...``: serve the console, and manage its token, accounts and agent tokens."""

from __future__ import annotations

import click

from vq.cli import web_auth_cmd, web_fleet_cmd
from vq.cli.types import AsciiIntRange
from vq.web.binding import check_bind

__all__ = ["web"]

DEFAULT_PORT = 8477


@click.group()
def web() -> None:
    """Serve the web console and /api/v1; manage its credentials."""


@web.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=AsciiIntRange(0, 65535))
@click.option(
    "--allow-remote", is_flag=True, help="Allow a non-loopback bind (TLS and ACLs are yours)."
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="A host name clients use (repeatable; beside [web] allowed_hosts and loopback).",
)
@click.option(
    "--fleet",
    is_flag=True,
    help="Also serve the fleet console over every configured host (/fleet, /api/v1/fleet).",
)
def serve(
    host: str, port: int, allow_remote: bool, allowed_hosts: tuple[str, ...], fleet: bool
) -> None:
    """Serve the console on HOST:PORT (loopback by default) until interrupted.

    Requests whose Host header is neither a loopback name nor an allowed host get 400.
    ``--fleet`` (or ``[web] fleet = true``) adds the fleet console.
    """
    from vq.web.hosts import configured_hosts, fleet_configured

    names = configured_hosts(allowed_hosts)
    fleet = fleet or fleet_configured()
    warning = check_bind(host, port, allow_remote, names)
    if warning:
        click.echo(warning, err=True)
    from vq.web.serve import serve_forever

    serve_forever(host, port, allowed_hosts=names, fleet=fleet)


web_auth_cmd.register(web)
web_fleet_cmd.register(web)
