"""The typed RPC contract, against a real daemon on a temporary state root.

Every method's answer validates against its result model; invalid params are a typed
``invalid-input`` error naming the field (never a traceback or pydantic's wording); the
composed daemon's loop can be driven one :meth:`Daemon.tick` at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from vq.client import Client
from vq.config.settings import load_settings
from vq.daemon.compose import compose_daemon
from vq.errors import InvalidInput, UsageError
from vq.paths import StatePaths
from vq.protocol.messages import SubmitParams
from vq.protocol.methods import CONTRACTS
from vq.services.submit import submit

BAD_PARAMS: list[tuple[str, dict[str, Any], str]] = [
    ("status", {}, "id"),
    ("kill", {"id": 7}, "id"),
    ("list", {"colour": "red"}, "colour"),
    ("list", {"max_age": 61}, "max_age"),
    ("list", {"limit": -1}, "limit"),
    ("wait_change", {"id": "x", "timeout": 301}, "timeout"),
    ("wait_change", {"id": "x", "timeout": True}, "timeout"),
    ("throttle", {"max_jobs": 0}, "max_jobs"),
    ("throttle", {"max_jobs": True}, "max_jobs"),
    ("drain", {"mode": "sideways"}, "mode"),
    ("resubmit", {"id": "x", "overrides": []}, "overrides"),
    ("submit", {"command": []}, "command"),
    ("ping", {"extra": 1}, "extra"),
]


@pytest.fixture
def client(vq: Vq) -> Client:
    vq.start_daemon()
    return Client(str(vq.root / "daemon.sock"), timeout=10)


@pytest.mark.parametrize(("method", "params", "field"), BAD_PARAMS)
def test_invalid_params_are_a_typed_error_naming_the_field(
    client: Client, method: str, params: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        client.call(method, params)
    error = caught.value
    assert error.exit_code == 4
    assert error.message.startswith(f"{field}:"), error.message
    assert "Value error" not in error.message and "pydantic" not in error.message
    assert method in (error.hint or "")


def test_an_unknown_method_is_a_usage_error(client: Client) -> None:
    with pytest.raises(UsageError) as caught:
        client.call("explode", {})
    assert "ping" in (caught.value.hint or "")


def test_every_answer_matches_its_result_model(vq: Vq, client: Client) -> None:
    job = vq.submit("--", "sleep", "30")
    vq.wait_state(job, "RUNNING")
    wait_until(lambda: vq.spec(job)["pgid"])  # started: pause and kill act on its group
    calls: dict[str, dict[str, Any]] = {
        "ping": {},
        "wake": {},
        "status": {"id": job},
        "list": {},
        "wait_change": {"id": job, "timeout": 0},
        "pause": {"id": job},
        "resume": {"id": job},
        "capacity": {},
        "admin_status": {},
        "throttle": {"max_jobs": 3},
        "drain": {},
        "undrain": {},
        "kill": {"id": job},
    }
    for method, params in calls.items():
        answer = client.call(method, params)
        CONTRACTS[method].result.model_validate(answer)
    vq.wait_state(job, "KILLED")
    clone = client.call("resubmit", {"id": job})
    CONTRACTS["resubmit"].result.model_validate(clone)
    client.call("kill", {"id": clone["id"]})
    assert client.call("ping")["methods"] == sorted(CONTRACTS)
    listing = client.call("list", {"limit": 1})
    assert listing["total"] >= 2 and len(listing["jobs"]) == 1


def test_the_composed_daemon_runs_a_job_one_tick_at_a_time(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    paths.ensure()
    daemon = compose_daemon(paths, load_settings({"VQ_CONFIG_DIR": str(tmp_path / "config")}))
    try:
        assert daemon.start()
        job = submit(daemon.parts.ctx, SubmitParams(command=["true"], cwd=str(tmp_path)))
        daemon.parts.index.upsert(job.spec)

        def ticked_to_completion() -> bool:
            daemon.tick()
            return daemon.parts.ctx.store.read(job.spec.id).state.value == "COMPLETED"

        wait_until(ticked_to_completion, timeout=30)
        assert daemon.tick() > 0
    finally:
        daemon.shutdown()
