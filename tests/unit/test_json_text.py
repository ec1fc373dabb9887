"""``dumps_indented`` writes exactly what ``json.dumps(value, indent=2)`` writes."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vq.cli.json_text import dumps_indented

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_same_text_as_the_standard_encoder(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2)


class _Colour(enum.IntEnum):
    RED = 1


class _Name(enum.StrEnum):
    ADA = "ada"


@pytest.mark.parametrize(
    "value",
    [
        {"rows": [{"n": _Colour.RED}]},  # an int subclass
        {"who": _Name.ADA},  # a str subclass
        {1: "int key", None: "none key", 2.5: "float key", False: "bool key"},
        {"nested": {"x": {3: [1, 2]}}},
        {"jobs": [{"id": "a", "tags": []}, {"id": "b", "tags": ["x"]}], "counts": {}},
        ["ü", "\u2028", "\x00", "\ud800"],
        [math.nan, -math.inf, 1e300, -0.0, 10**40],
    ],
)
def test_unusual_values_match_too(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2)


def test_what_the_standard_encoder_refuses_is_refused_the_same_way() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented({"loop": loop})
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indented({"when": object()})
