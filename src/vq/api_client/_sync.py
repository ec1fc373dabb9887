"""The blocking client (:class:`Client`); see :mod:`vq.api_client` for the contract."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
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

__all__ = ["Client"]


class Client:
    """``Client(base_url, token=None, timeout=30.0, retries=4)``; a context manager."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- plumbing -----------------------------------------------------------------------
    def _send(self, attempt: Callable[[], httpx.Response], *, retry: bool) -> httpx.Response:
        """One request; with ``retry``, connection errors and 5xx are retried with backoff."""
        tries = self.retries + 1 if retry else 1
        for number in range(tries):
            try:
                response = attempt()
            except httpx.TransportError:
                if number + 1 >= tries:
                    raise
            else:
                if response.status_code < 400:
                    return response
                if response.status_code not in RETRY_STATUSES or number + 1 >= tries:
                    raise error_of(response)
            time.sleep(self.backoff * 2**number)
        raise AssertionError("unreachable")

    # --- the API ------------------------------------------------------------------------
    def upload(self, path: Path) -> str:
        """Upload a ``.tar.gz`` (or a directory, packed first); the upload token."""
        packed = pack_directory(path) if path.is_dir() else None
        archive = packed or path
        try:

            def attempt() -> httpx.Response:
                with open(archive, "rb") as handle:
                    return self.http.post(
                        "/api/v1/uploads",
                        content=handle,
                        headers={"Content-Type": "application/gzip"},
                    )

            return str(self._send(attempt, retry=True).json()["upload_token"])
        finally:
            if packed is not None:
                with contextlib.suppress(OSError):
                    packed.unlink()

    def submit(
        self,
        command: list[str],
        *,
        idempotency_key: str | None = None,
        files: dict[str, FileContent] | None = None,
        upload: Path | None = None,
        **fields: Any,
    ) -> SubmitResult:
        """Submit one job; retried safely (one idempotency key for every attempt)."""
        check_inputs(files, upload)
        token = self.upload(upload) if upload is not None else None
        body = submit_body(command, idempotency_key, files, token, fields)
        response = self._send(lambda: self.http.post("/api/v1/jobs", json=body), retry=True)
        spec = response.json()
        return SubmitResult(spec["id"], spec.get("state"), response.status_code == 201, spec)

    def status(self, job_id: str) -> JobStatus:
        """``GET /api/v1/jobs/{id}``: the ``vq status --json`` view plus recent events."""
        view = self._send(lambda: self.http.get(f"/api/v1/jobs/{job_id}"), retry=True).json()
        return JobStatus.from_view(view)

    def wait(
        self, job_id: str, timeout: float = 60.0, since_state: str | None = None
    ) -> WaitResult:
        """One long-poll: returns on the next state change, or after ``timeout`` seconds."""
        params: dict[str, str | float] = {"timeout": timeout}
        if since_state is not None:
            params["since_state"] = since_state
        data = self._send(
            lambda: self.http.get(
                f"/api/v1/jobs/{job_id}/wait", params=params, timeout=timeout + self.timeout
            ),
            retry=True,
        ).json()
        return WaitResult(
            data["id"], data["state"], data["changed"], data["timed_out"], data["job"]
        )

    def wait_terminal(self, job_id: str, timeout: float | None = None) -> WaitResult:
        """Long-poll until the job is terminal (or ``timeout`` seconds; then the last answer)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        state: str | None = None
        while True:
            left = 60.0 if deadline is None else max(0.0, min(60.0, deadline - time.monotonic()))
            result = self.wait(job_id, left, since_state=state)
            state = result.state
            if result.state in TERMINAL or (deadline is not None and time.monotonic() >= deadline):
                return result

    def logs(self, job_id: str, stream: str = "stdout", tail: int = 200) -> str:
        """The last ``tail`` lines of the job's stdout or stderr."""
        params: dict[str, str | int] = {"stream": stream, "tail": tail}
        return self._send(
            lambda: self.http.get(f"/api/v1/jobs/{job_id}/logs", params=params), retry=True
        ).text

    def download_outputs(self, job_id: str, dest: Path) -> Path:
        """Fetch ``outputs.tar.gz`` and extract it safely into ``dest``; returns ``dest``."""
        with tempfile.NamedTemporaryFile(suffix=".tar.gz") as spool:
            with self.http.stream("GET", f"/api/v1/jobs/{job_id}/outputs.tar.gz") as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_of(response)
                for chunk in response.iter_bytes():
                    spool.write(chunk)
            spool.flush()
            return extract_outputs(Path(spool.name), Path(dest))

    def run(
        self,
        command: list[str],
        *,
        outputs: Path | None = None,
        timeout: float | None = None,
        **submit_args: Any,
    ) -> RunResult:
        """Submit, wait until terminal, download the outputs (into ``outputs`` if given)."""
        submitted = self.submit(command, **submit_args)
        final = self.wait_terminal(submitted.id, timeout)
        if final.state not in TERMINAL:
            return RunResult.of(submitted.id, final, None)
        target = None
        if outputs is not None:
            target = self.download_outputs(submitted.id, outputs)
        return RunResult.of(submitted.id, final, target)
