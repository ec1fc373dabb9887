"""Trusting per-user specs (§2.4, §7.1): the owner directory is the authority."""

from __future__ import annotations

import pytest

from vq.domain.owned_specs import OwnedSpec, classify

VQA, VQB = 1003, 1004


def spec(owner: int, job_id: str, submitter: str | None = None, *deps: str) -> OwnedSpec:
    return OwnedSpec(owner, f"{job_id}.json", job_id, submitter or str(owner), deps)


def test_well_formed_specs_are_admitted_with_their_trusted_owner() -> None:
    found = classify([spec(VQA, "a" * 12), spec(VQB, "b" * 12, None, "b" * 11 + "0")], 1000)
    assert found.admitted["a" * 12].owner == VQA and found.lookup("b" * 12, uid=VQB)
    assert found.lookup("a" * 12, uid=VQB) is None and not found.rejected


@pytest.mark.parametrize(
    "tampered, why",
    [
        (spec(VQA, "a" * 12, str(VQB)), "submitter '1004' is not its owner directory's uid 1003"),
        (spec(VQA, "a" * 12, "alice"), "submitter 'alice'"),
        (OwnedSpec(VQA, "b" * 12 + ".json", "a" * 12, str(VQA)), "not a job id equal to"),
        (OwnedSpec(VQA, "../x.json", "../x", str(VQA)), "not a job id equal to"),
        (spec(0, "a" * 12), "owner uid 0 is 0 or below"),
        (spec(999, "a" * 12), "below multi_user.min_uid = 1000"),
    ],
)
def test_tampered_specs_are_rejected_with_the_reason(tampered: OwnedSpec, why: str) -> None:
    found = classify([tampered], 1000)
    assert not found.admitted and why in found.rejected[0][1]


def test_an_id_in_two_owner_trees_quarantines_every_copy_only() -> None:
    copied = "c" * 12
    found = classify([spec(VQA, copied), spec(VQB, copied), spec(VQA, "d" * 12)], 1000)
    assert set(found.admitted) == {"d" * 12}
    assert sorted(s.owner for s in found.quarantined[copied]) == [VQA, VQB]
    with pytest.raises(LookupError, match=r"several owners \(uids \[1003, 1004\]\)"):
        found.lookup(copied)
    copy = found.lookup(copied, uid=VQB)
    assert copy is not None and copy.owner == VQB


def test_a_cross_user_dependency_is_refused() -> None:
    theirs, mine = "e" * 12, "f" * 12
    found = classify([spec(VQB, theirs), spec(VQA, mine, None, theirs)], 1000)
    assert set(found.admitted) == {theirs}
    assert found.rejected[0][0].job_id == mine and "another owner's job" in found.rejected[0][1]
