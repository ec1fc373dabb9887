"""``vq web ...``: serve the console, and manage its token, accounts and agent tokens."""

from __future__ import annotations

import ipaddress

import click

from vq.cli import web_auth_cmd
from vq.errors import UsageError

__all__ = ["web"]

DEFAULT_PORT = 8477


@click.group()
def web() -> None:
    """Serve the web console and /api/v1; manage its credentials."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@web.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--allow-remote", is_flag=True, help="Allow a non-loopback bind (TLS and ACLs are yours)."
)
def serve(host: str, port: int, allow_remote: bool) -> None:
    """Serve the console on HOST:PORT (loopback by default) until interrupted."""
    if not is_loopback(host) and not allow_remote:
        raise UsageError(
            f"refusing to bind the console to non-loopback address {host}",
            hint="pass --allow-remote to accept that risk, or use an SSH tunnel to 127.0.0.1",
        )
    if not is_loopback(host):
        click.echo(
            f"warning: serving the vq console on {host}:{port}, reachable from the network; "
            "reads are open until a console account exists (`vq web user add`)",
            err=True,
        )
    from vq.web.serve import serve_forever

    serve_forever(host, port)


web_auth_cmd.register(web)
