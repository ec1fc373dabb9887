"""API submits record who submitted; the Python client's RunResult says why a job failed."""

from __future__ import annotations

import asyncio

from tests.web.conftest import Web
from vq.api_client import AsyncClient, Client


def test_run_result_carries_failure_reason_and_tail(web: Web) -> None:
    web.vq.start_daemon()
    token = web.init_token()
    failing = ["sh", "-c", "echo the-basis-set-is-missing >&2; exit 3"]
    with Client(web.base_url, token=token, timeout=30) as client:
        result = client.run(failing, idempotency_key="fail-sync", timeout=60)
    assert result.state == "FAILED" and result.exit_code == 3
    assert result.failure_reason and "3" in result.failure_reason
    assert result.failure_tail is not None and "the-basis-set-is-missing" in result.failure_tail

    async def main() -> None:
        async with AsyncClient(web.base_url, token=token, timeout=30) as client:
            result = await client.run(failing, idempotency_key="fail-async", timeout=60)
        assert result.failure_tail is not None and "the-basis-set-is-missing" in result.failure_tail
        assert result.failure_reason

    asyncio.run(main())
    with Client(web.base_url, token=token, timeout=30) as client:
        ok = client.run(["true"], idempotency_key="ok", timeout=60)
    assert ok.state == "COMPLETED" and ok.failure_reason is None and ok.failure_tail is None
