"""The gateway answers the same shape whether a daemon runs or not.

Each verb is asked twice against one state root, once with the daemon up and once with
it stopped; the answers must have the same keys (and, where nothing else changed, the
same values).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.conftest import Vq
from vq.gateway import Gateway
from vq.paths import StateLayout
from vq.protocol.answers import PING


def _both(vq: Vq, ask: Callable[[Gateway], Any]) -> tuple[Any, Any]:
    """``ask`` answered with the daemon up, then with it stopped."""
    gateway = Gateway(StateLayout(vq.root), vq.env)
    vq.start_daemon()
    assert gateway.call(PING) is not None
    up = ask(gateway)
    vq.stop_daemon()
    assert gateway.call(PING) is None
    down = ask(gateway)
    return up, down


def test_undrain_answers_the_same_with_and_without_a_daemon(vq: Vq) -> None:
    def drain_then_undrain(gateway: Gateway) -> dict[str, Any]:
        gateway.drain(full=False, reject_submits=False, reason="parity")
        return gateway.undrain()

    up, down = _both(vq, drain_then_undrain)
    assert up == down == {"mode": "none", "resumed_paused_by": "drain"}
    assert not (vq.root / "drain.json").exists()


def test_status_eta_is_assembled_the_same_way_on_both_paths(vq: Vq) -> None:
    vq.run("daemon", "drain")  # nothing dispatches: the job stays PENDING
    job = vq.submit("--", "true")
    up, down = _both(vq, lambda gateway: gateway.status(job))
    assert up["state"] == down["state"] == "PENDING"
    assert set(up) == set(down)
    assert up["queue_eta"] == down["queue_eta"]
    assert set(up["queue_eta"]) == {
        "eta_seconds",
        "basis",
        "median_run_seconds",
        "jobs_ahead",
        "slots",
    }


def test_throttle_and_list_answer_the_same_shape(vq: Vq) -> None:
    vq.submit("--", "true")

    def throttle(gateway: Gateway) -> dict[str, Any]:
        return gateway.throttle(clear=False, max_jobs=2, seconds=60)

    up, down = _both(vq, throttle)
    assert set(up) == set(down) == {"throttle", "effective_caps"}
    assert up["effective_caps"]["max_jobs"] == down["effective_caps"]["max_jobs"] == 2
    assert set(up["throttle"]) == set(down["throttle"])
    listed_up, listed_down = _both(vq, lambda gateway: gateway.list_rows({}))
    assert set(listed_up) == set(listed_down) == {"jobs", "quarantined", "counts"}
    assert listed_up["counts"] == listed_down["counts"]
