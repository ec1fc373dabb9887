"""``load_spec``'s one-pass path and its step-by-step path agree on every input.

The one-pass path (pydantic's JSON validation) may only *accept* what the checked path
accepts, with the same spec; everything else must fall through to the checked path,
which words the refusal. Inputs: valid specs with fields replaced by arbitrary JSON
values or removed, version keys of every kind, and raw texts JSON parsers disagree on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vq.domain.spec import JobSpec, _load_checked, _load_plain, dump_spec, load_spec
from vq.errors import VqError
from vq.store.specs import encode_spec

_BASE = dump_spec(
    JobSpec.model_validate(
        {
            "id": "0123456789ab",
            "submitted_at": "2026-01-02T03:04:05Z",
            "command": ["echo", "hi"],
            "cpus": 2,
            "state": "RUNNING",
            "started_at": "2026-01-02T03:04:06Z",
            "pid": 123,
            "program_runtime_pin": {"program": "p", "version": "1.0"},
            "build_env": {"A": "1"},
        }
    )
)
_FIELDS = sorted(_BASE)

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(["2026-01-02T03:04:05", "RUNNING", "completed", "0123456789ab", "1", ""]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def _outcome(load: Any, data: bytes | str) -> str:
    """The spec loaded (as JSON text, so NaN equals NaN), or the error's kind and words."""
    try:
        spec = load(data)
    except VqError as exc:
        return f"{type(exc).__name__}: {exc.message}"
    return json.dumps(dump_spec(spec))


def _assert_same(data: bytes | str) -> None:
    assert _outcome(load_spec, data) == _outcome(lambda d: _load_checked(d, "spec"), data)
    plain = _load_plain(data)
    if plain is not None:  # what the one pass accepts, the checked path accepts alike
        assert json.dumps(dump_spec(plain)) == json.dumps(dump_spec(_load_checked(data, "spec")))


@settings(max_examples=600, deadline=None)
@given(
    changes=st.dictionaries(
        st.sampled_from([*_FIELDS, "version", "unknown_field"]), _json_values, max_size=4
    ),
    removed=st.sets(st.sampled_from(_FIELDS), max_size=3),
)
def test_changed_fields_load_alike(changes: dict[str, Any], removed: set[str]) -> None:
    raw = {k: v for k, v in _BASE.items() if k not in removed} | changes
    _assert_same(json.dumps(raw))
    _assert_same(json.dumps(raw, indent=1).encode())


@pytest.mark.parametrize(
    "data",
    [
        encode_spec(JobSpec.model_validate(_BASE)),
        json.dumps(_BASE | {"spec_version": "2"}),
        json.dumps(_BASE | {"spec_version": 2.0}),
        json.dumps(_BASE | {"spec_version": True}),
        json.dumps(_BASE | {"spec_version": 3}),
        json.dumps({k: v for k, v in _BASE.items() if k != "spec_version"} | {"version": 3}),
        json.dumps({k: v for k, v in _BASE.items() if k != "spec_version"} | {"version": 1}),
        json.dumps(_BASE | {"state": "running"}),
        json.dumps(_BASE | {"paused_seconds_total": float("nan")}),
        json.dumps(_BASE | {"job_name": "\ud800"}),
        json.dumps(_BASE).replace('"hi"', '"h\ni"'),  # a raw control character
        b"\xef\xbb\xbf" + json.dumps(_BASE).encode(),
        json.dumps(_BASE).encode() + b" trailing",
        json.dumps(_BASE)[:-5],
        json.dumps(_BASE).replace('"cpus": 2', '"cpus": 2, "cpus": 0'),
        json.dumps([_BASE]),
        json.dumps(_BASE).encode("utf-16"),
        b'{"job_name": "\xff"}',
        b"[" * 100_000,
    ],
)
def test_edge_texts_load_alike(data: bytes | str) -> None:
    _assert_same(data)
