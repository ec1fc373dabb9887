"""The answer types of :mod:`vq.protocol.answers` name the keys the answers carry.

The CLI, the gateway and the web read the daemon's and the services' answers through
these ``TypedDict`` types; nothing checks them at run time, so these tests do: every
type's required keys are in the answer and every key of the answer is one the type
names (optional keys only where the type says so). They check the types three ways:
against the models they mirror (the spec, the RPC result models), against what the
services build on the no-daemon path, and against a real daemon's answers.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Vq, wait_until
from vq.domain.spec import JobSpec, ProgramRuntimePin, RuntimeGeneration
from vq.gateway import Gateway
from vq.paths import StateLayout
from vq.protocol import answers
from vq.protocol import report_answers as reports
from vq.protocol.methods import CONTRACTS
from vq.services.query import list_row
from vq.services.reports import report_row


def mismatch(kind: Any, answer: Mapping[str, Any]) -> dict[str, set[str]]:
    """What ``answer`` lacks of ``kind``'s required keys and has beyond its keys (empty
    sets when they match)."""
    required, optional = set(kind.__required_keys__), set(kind.__optional_keys__)
    return {
        "missing": required - set(answer),
        "unknown": set(answer) - required - optional,
    }


MATCH: dict[str, set[str]] = {"missing": set(), "unknown": set()}


def all_keys(kind: Any) -> set[str]:
    return set(kind.__required_keys__) | set(kind.__optional_keys__)


# --- against the models -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "model"),
    [
        (answers.SpecJSON, JobSpec),
        (answers.RuntimePinJSON, ProgramRuntimePin),
        (answers.RuntimeGenerationJSON, RuntimeGeneration),
    ],
)
def test_a_spec_type_names_every_field_of_its_model(kind: Any, model: Any) -> None:
    assert set(kind.__required_keys__) == set(model.model_fields)
    assert list(typing.get_type_hints(kind)) == list(model.model_fields)  # and in its order


def test_every_rpc_method_has_a_typed_answer() -> None:
    assert [rpc.name for rpc in answers.RPC_METHODS] == list(CONTRACTS)


#: The answer types of the closed result models (every field declared), by method.
CLOSED = {
    "ping": answers.PingAnswer,
    "wake": answers.EmptyAnswer,
    "wait_change": answers.WaitChangeAnswer,
    "scheduler_resolve": answers.SchedulerResolveAnswer,
    "drain": answers.DrainAnswer,
    "undrain": answers.UndrainAnswer,
    "throttle": answers.ThrottleAnswer,
    "capacity": answers.CapacityAnswer,
    "health": answers.HealthAnswer,
    "admin_status": answers.AdminStatusAnswer,
}


@pytest.mark.parametrize("method", sorted(CLOSED))
def test_a_closed_result_model_and_its_answer_type_name_the_same_keys(method: str) -> None:
    assert all_keys(CLOSED[method]) == set(CONTRACTS[method].result.model_fields)


def test_the_list_answer_names_the_list_result_and_the_cli_group_summary() -> None:
    model = set(CONTRACTS["list"].result.model_fields)
    assert all_keys(answers.ListAnswer) == model | {"group"}


def test_the_status_view_names_the_spec_and_the_derived_fields() -> None:
    assert set(answers.StatusView.__required_keys__) >= set(JobSpec.model_fields)
    assert set(CONTRACTS["status"].result.model_fields) <= all_keys(answers.StatusView)


# --- against the services (no daemon) -----------------------------------------------------
@pytest.fixture
def gateway(tmp_path: Path) -> Gateway:
    (tmp_path / "config").mkdir()
    return Gateway(StateLayout(tmp_path / "state"), {"VQ_CONFIG_DIR": str(tmp_path / "config")})


def test_the_disk_answers_match_their_types(gateway: Gateway) -> None:
    one = gateway.submit({"command": ["true"], "mem_mb": 10})
    assert mismatch(answers.SubmitAnswerOne, one) == MATCH
    group = gateway.submit({"command": ["true"], "array": [0, 1]})
    assert mismatch(answers.GroupSubmitAnswer, group) == MATCH
    assert "array_group_id" in group
    chain = gateway.submit({"command": ["true"], "chain": 2})
    assert mismatch(answers.GroupSubmitAnswer, chain) == MATCH
    assert "chain_group_id" in chain
    job_id = answers.submitted_id(one)
    assert job_id is not None

    view = gateway.status(job_id)
    assert mismatch(answers.StatusView, view) == MATCH
    assert "queue_eta" in view  # a PENDING job's estimate, one of the optional keys
    assert mismatch(answers.QueueEta, view["queue_eta"]) == MATCH

    listing = gateway.list_rows({"states": [], "tags": []})
    assert mismatch(answers.ListAnswer, listing) == MATCH
    for row in listing["jobs"]:
        assert mismatch(answers.ListRow, row) == MATCH
    paged = gateway.list_rows({"states": [], "limit": 2})
    assert mismatch(answers.ListAnswer, paged) == MATCH
    assert {"total", "total_jobs"} <= set(paged)

    spec = gateway.spec(job_id)
    assert mismatch(answers.ReportRow, report_row(spec, None, spec.submitted_at)) == MATCH
    assert mismatch(answers.ListRow, list_row(spec, None, spec.submitted_at)) == MATCH

    drained = gateway.drain(full=False, reject_submits=False, reason="x")
    assert mismatch(answers.DrainAnswer, drained) == MATCH
    assert mismatch(answers.UndrainAnswer, gateway.undrain()) == MATCH
    throttled = gateway.throttle(clear=False, max_jobs=1, seconds=60)
    assert mismatch(answers.ThrottleAnswer, throttled) == MATCH
    assert throttled["throttle"] is not None
    assert mismatch(answers.ThrottleJSON, throttled["throttle"]) == MATCH
    assert mismatch(answers.CapsJSON, throttled["effective_caps"]) == MATCH

    killed = gateway.kill(job_id)
    assert mismatch(answers.KillAnswer, killed) == MATCH
    ended = gateway.status(job_id)
    assert mismatch(answers.StatusView, ended) == MATCH
    assert "resource_usage" in ended
    final = gateway.final_state(job_id)
    assert final is not None
    assert mismatch(answers.FinalState, final) == MATCH
    assert mismatch(answers.SpecJSON, gateway.resubmit(job_id, {})) == MATCH
    check_reports(gateway)


def check_reports(gateway: Gateway) -> None:
    """The report verbs' answers (``overview``, ``usage``, ``top``) against their types."""
    overview = gateway.overview()
    assert mismatch(reports.OverviewAnswer, overview) == MATCH
    assert mismatch(reports.DaemonSummary, overview["daemon"]) == MATCH
    assert mismatch(reports.RecentTerminal, overview["recent_terminal"]) == MATCH
    assert mismatch(reports.Reservation, overview["reserved"]) == MATCH
    usage = gateway.usage("total", None)
    assert mismatch(reports.UsageAnswer, usage) == MATCH
    assert mismatch(reports.UsageTotals, usage["total"]) == MATCH
    for group in usage["groups"]:
        assert mismatch(reports.UsageGroup, group) == MATCH
    top = gateway.top(("RUNNING", "SUSPENDED"), 10.0)
    assert mismatch(reports.TopAnswer, top) == MATCH
    assert mismatch(reports.TopCapacity, top["capacity"]) == MATCH
    for use in (top["capacity"]["cpus"], top["capacity"]["mem_mb"], top["capacity"]["jobs"]):
        assert mismatch(reports.CapUse, use) == MATCH
    for job in top["jobs"]:
        assert mismatch(reports.TopJob, job) == MATCH


# --- against a real daemon ----------------------------------------------------------------
def test_a_daemon_answers_match_their_types(vq: Vq) -> None:
    vq.start_daemon()
    gateway = Gateway(StateLayout(vq.root), vq.env)
    ping = gateway.daemon_only(answers.PING)
    assert mismatch(answers.PingAnswer, ping) == MATCH
    assert mismatch(answers.CapsJSON, ping["caps"]) == MATCH
    health = gateway.daemon_only(answers.HEALTH)
    assert mismatch(answers.HealthAnswer, health) == MATCH
    for check in health["checks"]:
        assert mismatch(answers.HealthCheck, check) == MATCH
    admin = gateway.daemon_only(answers.ADMIN_STATUS)
    assert mismatch(answers.AdminStatusAnswer, admin) == MATCH
    assert mismatch(answers.DrainAnswer, admin["drain"]) == MATCH
    capacity = gateway.daemon_only(answers.CAPACITY)
    assert mismatch(answers.CapacityAnswer, capacity) == MATCH
    reload = gateway.daemon_only(answers.RELOAD)
    assert mismatch(answers.ReloadAnswer, reload) == MATCH

    one = gateway.submit({"command": ["sleep", "60"]})
    assert mismatch(answers.SubmitAnswerOne, one) == MATCH
    job_id = answers.submitted_id(one)
    assert job_id is not None
    assert mismatch(answers.StatusView, gateway.status(job_id)) == MATCH
    listing = gateway.list_rows({"states": [], "tags": []})
    assert mismatch(answers.ListAnswer, listing) == MATCH
    for row in listing["jobs"]:
        assert mismatch(answers.ListRow, row) == MATCH
    wait_until(lambda: gateway.status(job_id)["state"] == "RUNNING")
    check_reports(gateway)  # with a live job in top's rows and usage's groups
    assert mismatch(answers.KillAnswer, gateway.kill(job_id)) == MATCH


def test_the_key_check_sees_a_missing_and_an_unknown_key() -> None:
    answer = {"id": "x", "state": "PENDING", "changed": True, "signaled": False, "extra": 1}
    assert mismatch(answers.PauseAnswer, answer) == MATCH | {"unknown": {"extra"}}
    del answer["signaled"], answer["extra"]
    assert mismatch(answers.PauseAnswer, answer) == MATCH | {"missing": {"signaled"}}
