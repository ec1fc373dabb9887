"""A remote host's fetch manifest is read defensively: malformed fields read as none,
never as made-up values."""

from __future__ import annotations

from typing import Any

import pytest

from vq.fetch.remote import skipped_entries


@pytest.mark.parametrize(
    "skipped",
    ["links/a", 42, None, {"path": "x"}, True],
    ids=["string", "number", "null", "object", "bool"],
)
def test_a_skipped_that_is_not_a_list_reads_as_none(skipped: Any) -> None:
    assert skipped_entries({"skipped": skipped}) == []


def test_entries_keep_strings_and_drop_what_is_not_an_object() -> None:
    remote = {
        "skipped": [
            {"path": "a/link", "reason": "symlink"},
            "b",
            {"path": 7, "reason": ["x"]},
            {"reason": "fifo"},
        ]
    }
    assert skipped_entries(remote) == [
        {"path": "a/link", "reason": "symlink"},
        {"path": "", "reason": ""},
        {"path": "", "reason": "fifo"},
    ]


def test_no_skipped_key_reads_as_none() -> None:
    assert skipped_entries({}) == []
