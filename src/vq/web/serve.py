"""Run the app under uvicorn (``vq web serve`` and the daemon's ``--web`` sidecar)."""

from __future__ import annotations

import sys

import uvicorn

from vq.web.app import create_app
from vq.web.connections import UVICORN_OPTIONS, HeaderTimeoutH11Protocol
from vq.web.context import WebConfig

__all__ = ["serve_forever"]


def serve_forever(
    host: str,
    port: int,
    *,
    mode: str = "standalone",
    allowed_hosts: tuple[str, ...] = (),
    fleet: bool = False,
) -> None:
    """Serve until interrupted; ``fleet`` mounts the fleet console (:mod:`vq.web.fleet`)."""
    app = create_app(WebConfig.from_env(mode=mode, allowed_hosts=allowed_hosts, fleet=fleet))
    shown = f"[{host}]" if ":" in host else host
    what = "vq fleet console" if fleet else "vq web console"
    print(
        f"{what} on http://{shown}:{port}/ (API docs at /api/v1/docs); Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        http=HeaderTimeoutH11Protocol,
        **UVICORN_OPTIONS,
    )
