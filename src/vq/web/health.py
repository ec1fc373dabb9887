"""``GET /health/live`` and ``GET /health/ready`` (§6.5): unauthenticated, no job data.

* live: ``ok`` with 200 whenever the app answers (proves only the web process is up).
* ready: ``ok`` with 200 when the daemon pidfile names a live pid and the state root's
  queue directory exists; a generic 503 otherwise. No RPC, no paths in the body.
"""

from __future__ import annotations

import os

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from vq._fs import read_regular
from vq.web.deps import web_config

__all__ = ["router"]

router = APIRouter(tags=["health"])


def _daemon_alive(pid_text: str) -> bool:
    try:
        pid = int(pid_text.strip())
    except ValueError:
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@router.get("/health/live", response_class=PlainTextResponse)
def live() -> str:
    return "ok"


@router.get("/health/ready", response_class=PlainTextResponse)
def ready(request: Request) -> PlainTextResponse:
    paths = web_config(request).state
    try:
        pid_text = read_regular(paths.daemon_pid, 64).decode()
    except (OSError, ValueError):
        pid_text = ""
    if paths.queue_dir.is_dir() and _daemon_alive(pid_text):
        return PlainTextResponse("ok")
    return PlainTextResponse("not ready", status_code=503)
