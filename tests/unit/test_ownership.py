"""The per-verb ownership rule (§7.3): owner, root or admin group; old specs allowed; a
denial leaks nothing but the id."""

from __future__ import annotations

import pytest

from vq.errors import EXIT_CODES, PermissionDenied
from vq.services.ownership import Caller, authorize, owner_of_submitter

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
