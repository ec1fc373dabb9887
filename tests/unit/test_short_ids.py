"""resolve_prefix: git-like short job ids."""

from __future__ import annotations

import pytest

from vq.domain.ids import resolve_prefix
from vq.errors import AmbiguousId, InvalidInput, NotFound

IDS = ["abcd12340000", "abcd99990000", "ffff00001111"]


def test_unique_prefixes_and_full_ids() -> None:
    assert resolve_prefix("ffff", IDS) == "ffff00001111"
    assert resolve_prefix("ABCD1", IDS) == "abcd12340000"
    assert resolve_prefix("0123456789ab", IDS) == "0123456789ab"  # full: caller checks


def test_ambiguous_names_the_matches() -> None:
    with pytest.raises(AmbiguousId) as caught:
        resolve_prefix("abcd", IDS)
    assert caught.value.message == "'abcd' is ambiguous: matches abcd12340000, abcd99990000"
    assert caught.value.exit_code == 8


@pytest.mark.parametrize(("text", "error"), [("abc", InvalidInput), ("xyzw", InvalidInput)])
def test_too_short_or_not_hex(text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        resolve_prefix(text, IDS)


def test_no_match() -> None:
    with pytest.raises(NotFound):
        resolve_prefix("1234", IDS)
