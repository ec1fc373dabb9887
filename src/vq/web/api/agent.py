"""Long-poll and output download for scripts and AI agents (§10.3).

* ``GET /api/v1/jobs/{id}/wait?timeout=60[&since_state=S]`` (0 ≤ timeout ≤ 300) answers
  at once when the job is terminal or its state differs from ``since_state``; otherwise
  it blocks until the job's next state change or the timeout, and answers
  ``{"id", "state", "changed", "timed_out", "job": <vq status --json>}`` either way.
  With a daemon it is the daemon's ``wait_change`` RPC over an asyncio socket (no worker
  thread held while waiting; the daemon blocks on its index condition). Without one, the
  spec file is re-read once a second (slow polling, documented in docs/agents.md). A
  client that goes away early ends the wait: uvicorn does not cancel the route, it only
  answers ``http.disconnect`` to ``receive()``, so the route awaits that alongside the
  wait and cancels the wait (closing its daemon connection) when the client is gone; the
  daemon notices the closed connection within a second and frees its thread. Waits are
  capped per credential, per client address and in all (:mod:`vq.web.waits`): 503 with
  ``Retry-After`` beyond a cap, as for a daemon at its connection cap.
* ``GET /api/v1/jobs/{id}/outputs.tar.gz`` streams the tree ``vq fetch`` produces
  (:class:`vq.services.outputs.OutputsArchive`) once the job is terminal; 409 before.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Coroutine
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from vq.domain.states import JobState
from vq.errors import DaemonNotRunning, InvalidInput, ProtocolError
from vq.services.query import wait_answer
from vq.web.auth.principal import Principal
from vq.web.backend import Backend, backend_of
from vq.web.deps import need, web_config
from vq.web.submission import scrubbed
from vq.web.waits import WaitSlots

__all__ = ["WAIT_MAX_SECONDS", "router"]

router = APIRouter(tags=["agents"])

WAIT_MAX_SECONDS = 300.0
#: Poll interval of the no-daemon fallback.
POLL_SECONDS = 1.0
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]")


def _since(value: str | None) -> JobState | None:
    if value is None:
        return None
    if value.upper() not in JobState.__members__:
        raise InvalidInput(
            f"since_state {value[:40]!r} is not a job state",
            hint="use a state name such as PENDING, RUNNING or COMPLETED",
        )
    return JobState[value.upper()]


async def _poll(backend: Backend, job_id: str, since: JobState | None, timeout: float) -> Any:
    """The no-daemon wait: re-read the spec every POLL_SECONDS until it changes."""
    deadline = time.monotonic() + timeout
    spec = await run_in_threadpool(backend.spec, job_id)
    baseline = spec.state if since is None else since
    while not spec.is_terminal and spec.state is baseline:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await asyncio.sleep(min(POLL_SECONDS, remaining))
        spec = await run_in_threadpool(backend.spec, job_id)
    return wait_answer(spec, baseline, await run_in_threadpool(backend.status, job_id))


async def _client_gone(request: Request) -> None:
    """Return once the HTTP client disconnected (the request body, if any, is discarded);
    a failing ``receive`` also counts as gone (it can no longer be answered either)."""
    try:
        while (await request.receive())["type"] != "http.disconnect":
            pass
    except Exception:  # any transport failure: nobody is listening any more
        return


async def _unless_client_leaves(request: Request, work: Coroutine[Any, Any, Any]) -> Any:
    """``work``'s result, or an empty answer once the client went away (``work`` cancelled)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_client_gone(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})  # its daemon connection is closed when this returns
    if task.cancelled():
        return Response(status_code=204)  # nobody reads it: the client is gone
    return task.result()


async def _wait(request: Request, job_id: str, since: JobState | None, timeout: float) -> Any:
    from vq.web.async_rpc import acall

    config = web_config(request)
    backend = backend_of(request)
    started = time.monotonic()
    params = {"id": job_id, "timeout": timeout, "since_state": since and since.value}
    with scrubbed(config):
        try:  # no stat() of the socket first: that would be disk I/O on the event loop
            return await acall(config.state.daemon_sock, "wait_change", params, timeout + 30)
        except (DaemonNotRunning, ProtocolError):
            pass  # no daemon, or it went away mid-wait: wait on the disk instead
        remaining = max(0.0, timeout - (time.monotonic() - started))
        return await _poll(backend, job_id, since, remaining)


@router.get("/jobs/{job_id}/wait")
async def wait_job(
    job_id: str,
    request: Request,
    timeout: float = Query(60.0, ge=0, le=WAIT_MAX_SECONDS, description="seconds to block"),
    since_state: str | None = Query(None, description="answer at once if the state differs"),
    principal: Principal = Depends(need("read")),  # noqa: B008 - FastAPI dependency
) -> Any:
    Backend.check_id(job_id)
    since = _since(since_state)
    slots: WaitSlots = request.app.state.waits
    credential = principal.token_id or f"{principal.kind}:{principal.name}"
    peer = request.client.host if request.client else "unknown"
    with slots.hold(credential, peer):  # 503 + Retry-After beyond a cap
        return await _unless_client_leaves(request, _wait(request, job_id, since, timeout))


@router.get(
    "/jobs/{job_id}/outputs.tar.gz",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/gzip": {}}}},
)
def job_outputs(
    job_id: str,
    request: Request,
    principal: Principal = Depends(need("read")),  # noqa: B008 - FastAPI dependency
) -> StreamingResponse:
    from vq.services.outputs import OutputsArchive

    config = web_config(request)
    backend = backend_of(request)
    Backend.check_id(job_id)
    with scrubbed(config):
        archive = OutputsArchive(backend.gateway.local_context(), job_id)
    filename = _UNSAFE_FILENAME.sub("_", archive.filename)
    return StreamingResponse(
        archive.chunks(),
        media_type="application/gzip",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        background=BackgroundTask(archive.close),
    )
