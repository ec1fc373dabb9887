"""``make test``'s property tests are reproducible: the same examples on every run
(:mod:`tests.hypothesis_profiles`); ``make soak`` is where fresh ones are drawn."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


def _draws() -> list[bytes]:
    drawn: list[bytes] = []

    @settings(max_examples=25)
    @given(st.binary(min_size=8, max_size=8))
    def record(value: bytes) -> None:
        drawn.append(value)

    record()
    return drawn


def test_a_property_test_draws_the_same_examples_on_every_run(
    request: pytest.FixtureRequest,
) -> None:
    if request.config.getoption("hypothesis_profile") or os.environ.get("VQ_HYPOTHESIS_PROFILE"):
        pytest.skip("a profile was chosen for this run (make soak explores on purpose)")
    first, second = _draws(), _draws()
    assert len(first) == 25 and len(set(first)) > 1
    assert first == second
    assert settings.default.database is None  # no replay of an earlier run's failures either
