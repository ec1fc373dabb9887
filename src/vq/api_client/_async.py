"""The asyncio client (:class:`AsyncClient`): the same methods as :class:`Client`, awaited."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from vq.api_client._common import (
    RETRY_STATUSES,
    TERMINAL,
    FileContent,
    JobStatus,
    RunResult,
    SubmitResult,
    WaitResult,
    check_inputs,
    error_of,
    extract_outputs,
    pack_directory,
    submit_body,
)

__all__ = ["AsyncClient"]

_CHUNK = 1 << 20


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    """``path``'s bytes, read 1 MiB at a time in a worker thread."""
    handle = await asyncio.to_thread(open, path, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, _CHUNK):
            yield chunk
    finally:
        await asyncio.to_thread(handle.close)


class AsyncClient:
    """``AsyncClient(base_url, token=None, timeout=30.0, retries=4)``; ``async with``."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout
        )
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def _send(
        self, attempt: Callable[[], Awaitable[httpx.Response]], *, retry: bool
    ) -> httpx.Response:
        tries = self.retries + 1 if retry else 1
        for number in range(tries):
            try:
                response = await attempt()
            except httpx.TransportError:
                if number + 1 >= tries:
                    raise
            else:
                if response.status_code < 400:
                    return response
                if response.status_code not in RETRY_STATUSES or number + 1 >= tries:
                    raise error_of(response)
            await asyncio.sleep(self.backoff * 2**number)
        raise AssertionError("unreachable")

    async def upload(self, path: Path) -> str:
        is_dir = await asyncio.to_thread(path.is_dir)
        packed = await asyncio.to_thread(pack_directory, path) if is_dir else None
        archive = packed or path
        try:

            async def attempt() -> httpx.Response:
                return await self.http.post(
                    "/api/v1/uploads",
                    content=_chunks(archive),  # streamed: never the whole archive in memory
                    headers={"Content-Type": "application/gzip"},
                )

            return str((await self._send(attempt, retry=True)).json()["upload_token"])
        finally:
            if packed is not None:
                with contextlib.suppress(OSError):
                    packed.unlink()

    async def submit(
        self,
        command: list[str],
        *,
        idempotency_key: str | None = None,
        files: dict[str, FileContent] | None = None,
        upload: Path | None = None,
        **fields: Any,
    ) -> SubmitResult:
        check_inputs(files, upload)
        token = await self.upload(upload) if upload is not None else None
        # Path values in ``files`` are read here: off the event loop
        body = await asyncio.to_thread(submit_body, command, idempotency_key, files, token, fields)
        response = await self._send(lambda: self.http.post("/api/v1/jobs", json=body), retry=True)
        spec = response.json()
        return SubmitResult(spec["id"], spec.get("state"), response.status_code == 201, spec)

    async def status(self, job_id: str) -> JobStatus:
        response = await self._send(lambda: self.http.get(f"/api/v1/jobs/{job_id}"), retry=True)
        return JobStatus.from_view(response.json())

    async def wait(
        self, job_id: str, timeout: float = 60.0, since_state: str | None = None
    ) -> WaitResult:
        params: dict[str, str | float] = {"timeout": timeout}
        if since_state is not None:
            params["since_state"] = since_state
        response = await self._send(
            lambda: self.http.get(
                f"/api/v1/jobs/{job_id}/wait", params=params, timeout=timeout + self.timeout
            ),
            retry=True,
        )
        data = response.json()
        return WaitResult(
            data["id"], data["state"], data["changed"], data["timed_out"], data["job"]
        )

    async def wait_terminal(self, job_id: str, timeout: float | None = None) -> WaitResult:
        deadline = None if timeout is None else time.monotonic() + timeout
        state: str | None = None
        while True:
            left = 60.0 if deadline is None else max(0.0, min(60.0, deadline - time.monotonic()))
            result = await self.wait(job_id, left, since_state=state)
            state = result.state
            if result.state in TERMINAL or (deadline is not None and time.monotonic() >= deadline):
                return result

    async def logs(self, job_id: str, stream: str = "stdout", tail: int = 200) -> str:
        params: dict[str, str | int] = {"stream": stream, "tail": tail}
        response = await self._send(
            lambda: self.http.get(f"/api/v1/jobs/{job_id}/logs", params=params), retry=True
        )
        return response.text

    async def download_outputs(self, job_id: str, dest: Path) -> Path:
        with tempfile.NamedTemporaryFile(suffix=".tar.gz") as spool:
            url = f"/api/v1/jobs/{job_id}/outputs.tar.gz"
            async with self.http.stream("GET", url) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise error_of(response)
                async for chunk in response.aiter_bytes():
                    await asyncio.to_thread(spool.write, chunk)
            await asyncio.to_thread(spool.flush)
            return await asyncio.to_thread(extract_outputs, Path(spool.name), Path(dest))

    async def run(
        self,
        command: list[str],
        *,
        outputs: Path | None = None,
        timeout: float | None = None,
        **submit_args: Any,
    ) -> RunResult:
        submitted = await self.submit(command, **submit_args)
        final = await self.wait_terminal(submitted.id, timeout)
        if final.state not in TERMINAL:
            return RunResult.of(submitted.id, final, None)
        target = await self.download_outputs(submitted.id, outputs) if outputs else None
        return RunResult.of(submitted.id, final, target)
