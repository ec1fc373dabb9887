"""Scoped agent tokens: format, storage, expiry, revocation, limits and daily quotas."""

from __future__ import annotations

import os
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vq.errors import Conflict, InvalidInput, NotFound
from vq.web.auth import quota, scoped
from vq.web.auth.principal import Principal
from vq.web.auth.scoped import TokenRejected, parse_token
from vq.web.errors import ApiError

NOW = datetime(2026, 5, 4, 23, 59, 0, tzinfo=UTC)


def test_token_format_parses_and_rejects() -> None:
    secret = "A" * 43
    assert parse_token(f"vqt_0123456789ab_{secret}") == ("0123456789ab", secret)
    assert parse_token(f"vqt_0123456789ab_{'a_b-' * 10}abc") == (
        "0123456789ab",
        "a_b-" * 10 + "abc",
    )
    for bad in (
        "",
        "vqt",
        "vqt_0123456789ab",
        f"xyz_0123456789ab_{secret}",
        f"vqt_0123456789AB_{secret}",
        f"vqt_012345_{secret}",
        f"vqt_0123456789ab_{secret}!",
    ):
        assert parse_token(bad) is None, bad


def test_created_token_authenticates_and_only_its_hash_is_stored(tmp_path: Path) -> None:
    token, record = scoped.create_token(
        tmp_path, "agent", ["submit", "read"], now=NOW, profiles=["a", "b"], max_jobs_per_day=3
    )
    assert token.startswith(f"vqt_{record.id}_")
    stored = (tmp_path / "web-tokens.json").read_text()
    assert token.split("_", 2)[2] not in stored
    assert stat.S_IMODE(os.stat(tmp_path / "web-tokens.json").st_mode) == 0o600
    found = scoped.authenticate_token(tmp_path, token, NOW)
    principal = found.principal()
    assert principal.kind == "scoped_token" and principal.can("submit") and principal.can("read")
    assert not principal.can("control") and not principal.can("admin")
    assert principal.profiles == frozenset({"a", "b"}) and principal.token_id == record.id


def test_wrong_secret_unknown_id_expired_and_revoked_are_rejected(tmp_path: Path) -> None:
    token, record = scoped.create_token(
        tmp_path, "agent", ["read"], now=NOW, expires_in=timedelta(hours=1)
    )
    wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
    with pytest.raises(TokenRejected):
        scoped.authenticate_token(tmp_path, wrong, NOW)
    with pytest.raises(TokenRejected):
        scoped.authenticate_token(tmp_path, "vqt_ffffffffffff_" + token.split("_", 2)[2], NOW)
    with pytest.raises(TokenRejected, match="expired"):
        scoped.authenticate_token(tmp_path, token, NOW + timedelta(hours=1))
    scoped.revoke_token(tmp_path, "agent", now=NOW)
    with pytest.raises(TokenRejected, match="revoked"):
        scoped.authenticate_token(tmp_path, token, NOW)
    assert scoped.revoke_token(tmp_path, record.id, now=NOW)[1] is True
    with pytest.raises(NotFound):
        scoped.revoke_token(tmp_path, "nothing", now=NOW)


def test_names_and_scopes_are_validated(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        scoped.create_token(tmp_path, "agent", ["admin"], now=NOW)
    with pytest.raises(InvalidInput):
        scoped.create_token(tmp_path, "agent", [], now=NOW)
    with pytest.raises(InvalidInput):
        scoped.create_token(tmp_path, "bad name", ["read"], now=NOW)
    scoped.create_token(tmp_path, "agent", ["read"], now=NOW)
    with pytest.raises(Conflict):
        scoped.create_token(tmp_path, "agent", ["read"], now=NOW)
    scoped.revoke_token(tmp_path, "agent", now=NOW)
    scoped.create_token(tmp_path, "agent", ["read"], now=NOW)  # a revoked name is free again


def test_seconds_to_utc_midnight() -> None:
    assert quota.seconds_to_utc_midnight(NOW) == 60
    assert quota.seconds_to_utc_midnight(datetime(2026, 5, 5, tzinfo=UTC)) == 86400
    late = datetime(2026, 5, 4, 23, 59, 59, 500000, tzinfo=UTC)
    assert quota.seconds_to_utc_midnight(late) == 1


def test_quota_refuses_with_retry_after_and_resets_at_utc_midnight(tmp_path: Path) -> None:
    token, _ = scoped.create_token(tmp_path, "agent", ["submit"], now=NOW, max_jobs_per_day=2)
    principal = scoped.authenticate_token(tmp_path, token, NOW).principal()
    quota.charge_submission(tmp_path, principal, NOW)
    quota.charge_submission(tmp_path, principal, NOW)
    with pytest.raises(ApiError) as caught:
        quota.charge_submission(tmp_path, principal, NOW)
    assert caught.value.status == 429 and caught.value.code == "rate-limited"
    assert caught.value.headers == {"Retry-After": "60"}
    assert quota.usage_today(tmp_path, principal.token_id or "", NOW) == 2
    tomorrow = NOW + timedelta(minutes=1)
    quota.charge_submission(tmp_path, principal, tomorrow)
    assert quota.usage_today(tmp_path, principal.token_id or "", tomorrow) == 1


def test_quota_counts_a_batch_and_other_principals_pass(tmp_path: Path) -> None:
    token, _ = scoped.create_token(tmp_path, "agent", ["submit"], now=NOW, max_jobs_per_day=5)
    principal = scoped.authenticate_token(tmp_path, token, NOW).principal()
    with pytest.raises(ApiError):
        quota.charge_submission(tmp_path, principal, NOW, count=6)
    quota.charge_submission(tmp_path, principal, NOW, count=5)
    quota.charge_submission(tmp_path, Principal("admin_token", "admin-token", role="admin"), NOW)
    assert not (tmp_path / "web-token-usage.json").read_text().count("admin")


def test_quota_holds_under_concurrent_charges(tmp_path: Path) -> None:
    token, _ = scoped.create_token(tmp_path, "agent", ["submit"], now=NOW, max_jobs_per_day=10)
    principal = scoped.authenticate_token(tmp_path, token, NOW).principal()
    outcomes: list[int] = []

    def charge() -> None:
        try:
            quota.charge_submission(tmp_path, principal, NOW)
            outcomes.append(200)
        except ApiError as exc:
            outcomes.append(exc.status)

    threads = [threading.Thread(target=charge) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == [200] * 10 + [429] * 6


def test_revoked_token_cannot_be_charged(tmp_path: Path) -> None:
    token, _ = scoped.create_token(tmp_path, "agent", ["submit"], now=NOW)
    principal = scoped.authenticate_token(tmp_path, token, NOW).principal()
    scoped.revoke_token(tmp_path, "agent", now=NOW)
    with pytest.raises(ApiError) as caught:
        quota.charge_submission(tmp_path, principal, NOW)
    assert caught.value.status == 401


def test_profile_and_program_limits() -> None:
    limited = Principal(
        "scoped_token",
        "dev",
        scopes=frozenset({"submit"}),
        token_id="0123456789ab",
        profiles=frozenset({"orca", "vibeqc"}),
        programs=frozenset({"orca"}),
    )
    quota.check_submit_allowed(limited, "orca", "orca")
    for profile, program in (("other", "orca"), (None, "orca"), ("orca", None), ("orca", "x")):
        with pytest.raises(ApiError) as caught:
            quota.check_submit_allowed(limited, profile, program)
        assert caught.value.status == 403
    open_token = Principal("scoped_token", "any", scopes=frozenset({"submit"}), token_id="x")
    quota.check_submit_allowed(open_token, None, None)
    quota.check_submit_allowed(Principal("session", "alice", role="operator"), None, None)


def test_a_refund_gives_back_exactly_the_refused_submit(tmp_path: Path) -> None:
    token, _ = scoped.create_token(tmp_path, "agent", ["submit"], now=NOW, max_jobs_per_day=2)
    principal = scoped.authenticate_token(tmp_path, token, NOW).principal()
    assert quota.charge_submission(tmp_path, principal, NOW, key_hash="a" * 64)
    quota.refund_submission(tmp_path, principal, NOW, key_hash="a" * 64)
    assert quota.usage_today(tmp_path, principal.token_id or "", NOW) == 0
    quota.refund_submission(tmp_path, principal, NOW, key_hash="a" * 64)  # twice: no-op
    assert quota.usage_today(tmp_path, principal.token_id or "", NOW) == 0
    assert quota.charge_submission(tmp_path, principal, NOW, key_hash="a" * 64)  # again
    assert quota.charge_submission(tmp_path, principal, NOW, key_hash="b" * 64)
    quota.refund_submission(tmp_path, principal, NOW, key_hash="c" * 64)  # never charged
    assert quota.usage_today(tmp_path, principal.token_id or "", NOW) == 2
