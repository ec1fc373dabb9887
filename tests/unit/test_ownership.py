"""The per-verb ownership rule (§7.3): owner, root or admin group; old specs allowed; a
denial leaks nothing but the id."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from vq.domain.spec import JobSpec
from vq.errors import EXIT_CODES, NotFound, PermissionDenied
from vq.services.ownership import Caller, OwnerCheck, authorize, owner_of_submitter

VQA, VQB, ADMINS = 1003, 1004, 1001


def test_the_owner_root_and_admins_are_allowed() -> None:
    authorize(Caller(VQA, frozenset({VQA})), "job1", VQA, ADMINS)
    authorize(Caller(0, frozenset({0})), "job1", VQA, ADMINS)
    authorize(Caller(1005, frozenset({1007, ADMINS})), "job1", VQA, ADMINS)


def test_another_user_is_denied_with_its_own_exit_code_and_no_state() -> None:
    with pytest.raises(PermissionDenied) as denied:
        authorize(Caller(VQB, frozenset({VQB})), "job1", VQA, ADMINS)
    assert denied.value.message == "job job1: permission denied"
    assert denied.value.exit_code == EXIT_CODES["PermissionDenied"] == 15
    with pytest.raises(PermissionDenied):  # no admin group configured: only owner and root
        authorize(Caller(VQB, frozenset({ADMINS})), "job1", VQA, None)


def test_an_unresolvable_submitter_is_allowed() -> None:
    assert owner_of_submitter(None) is None and owner_of_submitter("alice") is None
    assert owner_of_submitter("01003") is None and owner_of_submitter("1003") == VQA
    authorize(Caller(VQB, frozenset({VQB})), "old", owner_of_submitter("alice"), ADMINS)


def _spec(submitter: str | None) -> JobSpec:
    return JobSpec(
        id="0123456789ab",
        job_name="j",
        submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        command=["true"],
        cpus=1,
        submitter=submitter,
    )


def test_a_users_cli_is_refused_another_tree_before_anything_is_read() -> None:
    team2 = Caller(VQB, frozenset({VQB}))
    check = OwnerCheck(team2, ADMINS, tree_owner=VQA)
    with pytest.raises(PermissionDenied):
        check.before_reading("0123456789ab")
    # The tree is the trusted owner: a forged submitter naming the caller changes nothing.
    with pytest.raises(PermissionDenied):
        check(_spec(str(VQB)))
    OwnerCheck(team2, ADMINS, tree_owner=VQB)(_spec(str(VQA)))


def test_roots_uid_selects_one_owner() -> None:
    root = OwnerCheck(Caller(0, frozenset({0})), ADMINS, tree_owner=None, selected=VQA)
    root.before_reading("0123456789ab")
    root(_spec(str(VQA)))
    with pytest.raises(NotFound):
        root(_spec(str(VQB)))
