"""A Python client of vq's HTTP submission API (§10), for scripts and AI agents.

``Client`` (blocking) and ``AsyncClient`` (asyncio) over httpx; importable without
FastAPI (httpx, the stdlib and vq's leaf modules only). Contract:

* ``submit(command, *, idempotency_key=None, files=None, upload=None, **fields)`` →
  :class:`SubmitResult` ``(id, state, created, spec)``. ``files`` maps relative paths to
  ``bytes``, ``str`` (UTF-8 text) or a ``Path`` to read; ``upload`` is a ``.tar.gz`` or a
  directory (packed first) sent through ``POST /api/v1/uploads`` (streamed from disk;
  ``files`` and ``upload`` together raise ``ValueError`` before anything is sent).
  ``fields`` are JobSpec names (``cpus``, ``mem_mb``, ``wall_time_seconds``,
  ``job_name``, ``tags``, ``depends_on``, ``profile``, ``program``, ...). Without a key
  a uuid4 is drawn once and reused for every retry, so retries never create a second job.
* Connection errors and 5xx answers are retried ``retries`` times with exponential
  backoff (``backoff`` × 2ⁿ seconds); any other error answer raises :class:`ApiError`
  ``(status, code, message, hint, details, retry_after)`` at once.
* ``wait(id, timeout=60, since_state=None)`` → :class:`WaitResult` (one long-poll);
  ``wait_terminal(id, timeout=None)`` loops until a terminal state.
* ``status(id)`` → :class:`JobStatus` ``(id, state, exit_code, failure_reason, job_name,
  events, job)``; ``logs(id, stream="stdout", tail=200)``.
* ``download_outputs(id, dest)`` streams ``outputs.tar.gz`` to a temporary file and
  extracts it into ``dest`` (must be absent or empty) after checking every member with
  vq's archive rules, stripping the archive's top directory.
* ``run(command, *, outputs=None, timeout=None, **submit_args)`` = submit + wait until
  terminal + download → :class:`RunResult` ``(id, state, exit_code, outputs_dir,
  failure_reason, failure_tail)``.
"""

from vq.api_client._async import AsyncClient
from vq.api_client._common import (
    TERMINAL,
    ApiError,
    JobStatus,
    RunResult,
    SubmitResult,
    WaitResult,
    extract_outputs,
)
from vq.api_client._sync import Client

__all__ = [
    "TERMINAL",
    "ApiError",
    "AsyncClient",
    "Client",
    "JobStatus",
    "RunResult",
    "SubmitResult",
    "WaitResult",
    "extract_outputs",
]
