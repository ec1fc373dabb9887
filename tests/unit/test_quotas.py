"""Per-owner dispatch quotas (§4.9): active holders counted once, jobs left PENDING with a
reason naming the quota, and the ``[quotas]`` configuration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vq.config.settings import load_settings
from vq.domain.admission import Caps, Request, Usage, pending_reason, plan_dispatch
from vq.domain.quotas import (
    Holder,
    OwnerLoad,
    QuotaGate,
    QuotaHold,
    QuotaLimits,
    QuotaPolicy,
    load_of,
)
from vq.errors import ConfigError

NOW = datetime(2026, 1, 1, tzinfo=UTC)
VQA, VQB = 1003, 1004
CAPS = Caps(max_jobs=None, max_cpus=64, max_mem_mb=None)


def job(n: int, owner: int, cpus: int = 1) -> Request:
    return Request(f"job{n:09d}", cpus, None, 0, NOW + timedelta(seconds=n), owner=owner)


def test_holders_are_charged_once_per_owner_and_id() -> None:
    load = load_of(
        [Holder(VQA, "a", 1), Holder(VQA, "a", 1), Holder(VQA, "b", 2), Holder(VQB, "a", 4)]
    )
    assert load == {VQA: OwnerLoad(2, 3), VQB: OwnerLoad(1, 4)}


def test_a_job_over_its_owners_cpu_quota_can_never_fit_and_says_so() -> None:
    """Its own CPUs exceed max_concurrent_cpus: whatever the load, never a "(0/1)" wait."""
    policy = QuotaPolicy(QuotaLimits(max_concurrent_cpus=1), {VQB: QuotaLimits(None, 4)})
    big = job(1, VQA, cpus=2)
    never = "quota: over max_concurrent_cpus (cpus 2 > quota 1), so it can never start"
    assert str(policy.never_fits(VQA, 2)).startswith(never)
    assert policy.never_fits(VQB, 2) is None and policy.never_fits(VQA, 1) is None
    hold = policy.hold(VQA, 2, {})
    assert isinstance(hold, QuotaHold) and hold.never and hold.reason.startswith(never)
    assert policy.hold(VQA, 1, {VQA: OwnerLoad(1, 1)}) == QuotaHold(
        "quota: max_concurrent_cpus (1/1)"
    )
    gate = QuotaGate(policy)
    assert plan_dispatch([big, job(2, VQA)], Usage(), CAPS, NOW, quota=gate) == ["job000000002"]
    assert pending_reason(big, Usage(), CAPS, NOW, quota=gate).startswith(never)


def test_a_full_cpu_quota_leaves_the_owners_jobs_pending_while_others_run() -> None:
    policy = QuotaPolicy(QuotaLimits(max_concurrent_cpus=2))
    candidates = [job(1, VQA), job(2, VQA), job(3, VQA), job(4, VQA), job(5, VQB), job(6, VQB)]
    chosen = plan_dispatch(candidates, Usage(), CAPS, NOW, quota=QuotaGate(policy))
    assert chosen == ["job000000001", "job000000002", "job000000005", "job000000006"]
    running = QuotaGate(policy, load_of([Holder(VQA, "job000000001", 1), Holder(VQA, "x", 1)]))
    assert plan_dispatch(candidates[2:4], Usage(), CAPS, NOW, quota=running) == []
    reason = pending_reason(candidates[2], Usage(), CAPS, NOW, quota=running)
    assert reason == "quota: max_concurrent_cpus (2/2)"


def test_per_uid_overrides_replace_defaults_key_by_key() -> None:
    policy = QuotaPolicy(
        QuotaLimits(max_pending_jobs=1, max_concurrent_cpus=8),
        {VQB: QuotaLimits(max_pending_jobs=3)},
    )
    assert policy.limits(VQB) == QuotaLimits(3, 8) and policy.limits(VQA) == QuotaLimits(1, 8)
    load = {VQA: OwnerLoad(1, 1)}
    assert policy.blocker(VQA, 1, load) == "quota: max_pending_jobs (1/1)"
    assert policy.blocker(VQB, 8, load) is None and policy.blocker(VQB, 9, load) is not None


def test_jobs_without_an_owner_or_without_quotas_are_not_gated() -> None:
    ownerless = Request("job000000009", 4, None, 0, NOW)
    gate = QuotaGate(QuotaPolicy(QuotaLimits(max_concurrent_cpus=1)))
    assert plan_dispatch([ownerless], Usage(), CAPS, NOW, quota=gate) == ["job000000009"]
    assert QuotaPolicy().unlimited and not gate.policy.unlimited


def test_the_system_config_sets_quotas(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[quotas]\ndefault_max_concurrent_cpus = 2\n\n[quotas.uid.1004]\nmax_pending_jobs = 5\n"
    )
    env = {"VQ_CONFIG_DIR": str(tmp_path)}
    policy = load_settings(env, site_config=tmp_path / "absent").quotas.policy()
    assert policy.limits(1004) == QuotaLimits(5, 2) and policy.limits(1003) == QuotaLimits(None, 2)
    (tmp_path / "config.toml").write_text("[quotas.uid.alice]\nmax_pending_jobs = 5\n")
    with pytest.raises(ConfigError, match="'alice' is not a canonical decimal uid"):
        load_settings(env, site_config=tmp_path / "absent")


def test_the_overview_shows_each_owners_holders_against_their_limits() -> None:
    from vq.services.reports import owner_use

    rows = [
        {"id": "a1", "state": "RUNNING", "cpus": 1, "submitter": "1003"},
        {"id": "a2", "state": "SUSPENDED", "cpus": 1, "submitter": "1003"},
        {"id": "a3", "state": "PENDING", "cpus": 1, "submitter": "1003"},
        {"id": "a4", "state": "COMPLETED", "cpus": 4, "submitter": "1003"},
        {"id": "b1", "state": "RUNNING", "cpus": 3, "submitter": "1004"},
        {"id": "old", "state": "RUNNING", "cpus": 8, "submitter": None},
    ]
    policy = QuotaPolicy(QuotaLimits(max_pending_jobs=10), {1003: QuotaLimits(None, 2)})
    assert owner_use(rows, policy) == [
        {
            "uid": 1003,
            "holders": 2,
            "cpus": 2,
            "pending": 1,
            "max_pending_jobs": 10,
            "max_concurrent_cpus": 2,
        },
        {
            "uid": 1004,
            "holders": 1,
            "cpus": 3,
            "pending": 0,
            "max_pending_jobs": 10,
            "max_concurrent_cpus": None,
        },
    ]
