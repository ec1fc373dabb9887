"""vq.api_client against a real daemon and a real `vq web serve`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.web.conftest import Web
from vq.api_client import ApiError, AsyncClient, Client


@pytest.fixture
def client(web: Web) -> Iterator[Client]:
    web.vq.start_daemon()
    with Client(web.base_url, token=web.init_token(), timeout=30) as made:
        yield made


def test_run_submits_waits_and_downloads(client: Client, tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("cat in.txt raw.bin > out.txt\necho to-stdout\n")
    result = client.run(
        ["bash", "run.sh"],
        files={"run.sh": script, "in.txt": "text input\n", "raw.bin": b"\x00\x01"},
        outputs=tmp_path / "out",
        job_name="client-run",
        timeout=60,
    )
    assert result.state == "COMPLETED" and result.exit_code == 0
    assert result.outputs_dir == tmp_path / "out"
    assert (result.outputs_dir / "out.txt").read_bytes() == b"text input\n\x00\x01"
    assert (result.outputs_dir / "_vq" / "terminal-diagnosis.json").is_file()
    assert client.logs(result.id) == "to-stdout\n"
    status = client.status(result.id)
    assert (status.state, status.exit_code, status.terminal) == ("COMPLETED", 0, True)
    assert status.job["id"] == result.id and status.events[0]["kind"] == "submitted"


def test_submit_is_idempotent_and_errors_are_typed(client: Client, tmp_path: Path) -> None:
    first = client.submit(["true"], idempotency_key="client-key", files={"a.txt": "a"})
    again = client.submit(["true"], idempotency_key="client-key", files={"a.txt": "a"})
    assert first.created and not again.created and again.id == first.id
    with pytest.raises(ApiError) as conflict:
        client.submit(["true"], idempotency_key="client-key", files={"a.txt": "b"})
    assert conflict.value.status == 409 and conflict.value.code == "idempotency-conflict"
    with pytest.raises(ApiError) as invalid:
        client.submit(["true"], cpus=0)
    assert invalid.value.status == 422 and invalid.value.details[0]["loc"] == "body.cpus"
    auto = client.submit(["true"])
    assert auto.created and auto.spec["idempotency_key_hash"]
    final = client.wait_terminal(first.id, timeout=60)
    assert final.state == "COMPLETED" and final.terminal


def test_upload_of_a_directory(client: Client, tmp_path: Path) -> None:
    source = tmp_path / "tree"
    (source / "deep").mkdir(parents=True)
    (source / "deep" / "f.txt").write_text("deep file\n")
    submitted = client.submit(["cp", "deep/f.txt", "copied.txt"], upload=source)
    assert submitted.created
    client.wait_terminal(submitted.id, timeout=60)
    out = client.download_outputs(submitted.id, tmp_path / "dl")
    assert (out / "copied.txt").read_text() == "deep file\n"
    with pytest.raises(FileExistsError):
        client.download_outputs(submitted.id, tmp_path / "dl")


def test_wait_times_out_and_outputs_need_a_finished_job(client: Client) -> None:
    job = client.submit(["sleep", "30"])
    running = client.wait(job.id, timeout=10)
    state = running.state
    if state == "PENDING":
        state = client.wait(job.id, timeout=10, since_state="PENDING").state
    assert state == "RUNNING"
    started = time.monotonic()
    idle = client.wait(job.id, timeout=1, since_state="RUNNING")
    assert idle.timed_out and not idle.changed and time.monotonic() - started >= 0.9
    with pytest.raises(ApiError) as early:
        client.download_outputs(job.id, Path("/nonexistent-never-created"))
    assert early.value.status == 409 and early.value.hint
    client.http.post(f"/api/v1/jobs/{job.id}/kill")


def test_async_client_run(web: Web, tmp_path: Path) -> None:
    web.vq.start_daemon()
    token = web.init_token()

    async def main() -> None:
        async with AsyncClient(web.base_url, token=token) as client:
            result = await client.run(
                ["bash", "-c", "echo async > a.txt"], outputs=tmp_path / "o", timeout=60
            )
            assert result.state == "COMPLETED"
            assert (tmp_path / "o" / "a.txt").read_text() == "async\n"

    asyncio.run(main())


def test_connection_errors_surface_after_bounded_retries() -> None:
    with socket_port() as port:
        started = time.monotonic()
        with (
            Client(f"http://127.0.0.1:{port}", retries=2, backoff=0.01) as client,
            pytest.raises(httpx.TransportError),
        ):
            client.submit(["true"])
        assert time.monotonic() - started < 10


class socket_port:  # a port nobody listens on
    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *_: object) -> None:
        self.sock.close()
