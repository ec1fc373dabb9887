"""The vq.campaign/1 file: every refusal names its node and field; the digest is content."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.campaign_support import node, raw
from vq.campaign.checks import (
    campaign_order,
    check_campaign,
    check_source_placement,
    edges,
)
from vq.campaign.model import CampaignRefused, campaign_sha256, parse_campaign
from vq.campaign.problems import Problem


def problems_of(data: dict[str, Any]) -> list[Problem]:
    try:
        parsed = parse_campaign(data)
    except CampaignRefused as exc:
        return exc.problems
    return check_campaign(parsed)


def test_the_base_campaign_is_sound() -> None:
    parsed = parse_campaign(raw())
    assert check_campaign(parsed) == []
    assert campaign_order(parsed) == ["calculate", "validate", "render", "cleanup"]
    assert [(e.before, e.node, e.on, e.via) for e in edges(parsed)] == [
        ("calculate", "validate", "success", "input result"),
        ("calculate", "render", "success", "input result"),
        ("validate", "render", "success", "after"),
        ("calculate", "cleanup", "completion", "after"),
    ]


def _set(node_id: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        node(data, node_id)[key] = value

    return edit


def _input(node_id: str, key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        node(data, node_id)["inputs"][0][key] = value

    return edit


def _too_many(data: dict[str, Any]) -> None:
    data["nodes"] = [{"id": f"n{i}", "kind": "other", "command": ["true"]} for i in range(65)]


def _duplicate(data: dict[str, Any]) -> None:
    node(data, "cleanup")["id"] = "render"


def _no_validate_upstream(data: dict[str, Any]) -> None:
    node(data, "render")["after"] = []


REFUSALS: list[tuple[str, Callable[[dict[str, Any]], None], str | None, str, str]] = [
    ("unknown top field", lambda d: d.update(env={"A": "1"}), None, "env", "not a field"),
    (
        "environment field",
        _set("calculate", "environment", {}),
        "calculate",
        "environment",
        "not a field",
    ),
    (
        "credential field",
        _set("calculate", "password", "x"),
        "calculate",
        "password",
        "not a field",
    ),
    ("too many nodes", _too_many, None, "nodes", "between 1 and 64"),
    ("bad kind", _set("calculate", "kind", "science"), "calculate", "kind", "'science'"),
    ("string cpus", _set("calculate", "cpus", "16"), "calculate", "cpus", "must be an integer"),
    ("zero cpus", _set("calculate", "cpus", 0), "calculate", "cpus", "at least 1"),
    (
        "missing command",
        lambda d: node(d, "cleanup").pop("command"),
        "cleanup",
        "command",
        "is required",
    ),
    ("empty command", _set("cleanup", "command", []), "cleanup", "command", "must not be empty"),
    ("duplicate id", _duplicate, "render", "id", "more than one node"),
    ("dotted id", _set("cleanup", "id", "clean.up"), "clean.up", "id", "no '.'"),
    (
        "unknown node",
        _input("validate", "source", "calc.result"),
        "validate",
        "inputs[0].source",
        "unknown node 'calc'",
    ),
    (
        "unknown output",
        _input("validate", "source", "calculate.nope"),
        "validate",
        "inputs[0].source",
        "unknown output 'nope'",
    ),
    (
        "bad source",
        _input("validate", "source", "calculate"),
        "validate",
        "inputs[0].source",
        "NODE.OUTPUT",
    ),
    (
        "self input",
        _input("validate", "source", "validate.verdict"),
        "validate",
        "inputs[0].source",
        "itself",
    ),
    (
        "unknown after",
        _set("cleanup", "after", [{"node": "ghost", "on": "success"}]),
        "cleanup",
        "after[0].node",
        "unknown node 'ghost'",
    ),
    (
        "bad edge kind",
        _set("cleanup", "after", [{"node": "calculate", "on": "sometimes"}]),
        "cleanup",
        "after[0].on",
        "'sometimes'",
    ),
    ("absolute path", _input("validate", "path", "/in"), "validate", "inputs[0].path", "absolute"),
    ("dotdot path", _input("validate", "path", "../in"), "validate", "inputs[0].path", "'..'"),
    ("dot path", _input("validate", "path", "./in"), "validate", "inputs[0].path", "'.'"),
    ("empty component", _input("validate", "path", "a//in"), "validate", "inputs[0].path", "empty"),
    ("reserved _vq", _input("validate", "path", "_vq/in"), "validate", "inputs[0].path", "_vq"),
    (
        "overlap",
        _set(
            "validate", "outputs", [{"name": "verdict", "path": "in/verdict.json", "kind": "file"}]
        ),
        "validate",
        "outputs[0].path",
        "overlaps inputs[0].path",
    ),
    (
        "completion on consumed producer",
        _set("validate", "after", [{"node": "calculate", "on": "completion"}]),
        "validate",
        "after[0].on",
        "contradiction",
    ),
    (
        "render without validate",
        _no_validate_upstream,
        "render",
        "kind",
        "no validate node is upstream",
    ),
    (
        "root without digest",
        _set("render", "runtime_root", "/opt/rt"),
        "render",
        "runtime_root",
        "needs a runtime_digest",
    ),
    (
        "digest not hex",
        _set("render", "runtime_digest", "abc"),
        "render",
        "runtime_digest",
        "64 lowercase",
    ),
    (
        "sources path",
        _set("validate", "sources", {"path": "/abs", "sha256": "x"}),
        "validate",
        "sources.path",
        "absolute",
    ),
]


@pytest.mark.parametrize(
    ("edit", "node_id", "field", "text"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_each_refusal_names_node_and_field(
    edit: Callable[[dict[str, Any]], None], node_id: str | None, field: str, text: str
) -> None:
    data = raw()
    edit(data)
    problems = problems_of(data)
    matching = [p for p in problems if p.node == node_id and p.field == field]
    assert matching, problems
    assert text in matching[0].message
    for problem in problems:  # no library wording leaks into messages
        assert "Value error" not in problem.message
        assert "pydantic" not in problem.message.lower()
        assert "Input should" not in problem.message


def test_a_cycle_is_refused_and_one_is_named() -> None:
    data = raw()
    node(data, "calculate")["after"] = [{"node": "render", "on": "success"}]
    problems = problems_of(data)
    cycles = [p for p in problems if "cycle" in p.message]
    assert len(cycles) == 1
    named = cycles[0].message.split(": ", 1)[1].split(" -> ")
    assert named[0] == named[-1]
    assert len(named) >= 3
    graph = {(e.before, e.node) for e in edges(parse_campaign(data))}
    assert all((a, b) in graph for a, b in itertools.pairwise(named))


def test_a_wrong_schema_name_is_refused_before_anything_else() -> None:
    data = raw()
    data["schema_name"] = "vq.campaign/2"
    with pytest.raises(CampaignRefused) as caught:
        parse_campaign(data)
    assert caught.value.problems[0].field == "schema_name"
    assert "vq.campaign/2" in caught.value.message
    assert caught.value.exit_code == 4


def test_a_source_file_where_an_input_or_output_goes_is_refused() -> None:
    parsed = parse_campaign(raw())
    validate = parsed.node("validate")
    assert validate is not None
    assert check_source_placement(validate, [("check_scf.py", "file")]) == []
    at_input = check_source_placement(validate, [("in", "file")])
    assert [(p.field, p.node) for p in at_input] == [("inputs[0].path", "validate")]
    inside = check_source_placement(validate, [("in", "directory"), ("in/x", "file")])
    assert inside[0].field == "inputs[0].path"
    output = check_source_placement(validate, [("verdict.json", "file")])
    assert output[0].field == "outputs[0].path"


# --- the digest ---------------------------------------------------------------------------
def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: _shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), indent=st.one_of(st.none(), st.integers(0, 8)))
def test_the_digest_is_stable_under_reformatting(seed: int, indent: int | None) -> None:
    expected = campaign_sha256(parse_campaign(raw()))
    rng = random.Random(seed)
    text = json.dumps(
        _shuffled(raw(), rng), indent=indent, separators=None if indent else (", ", ": ")
    )
    data = json.loads(text)
    if rng.random() < 0.5:
        node(data, "validate")["cpus"] = 1  # spelling out a default changes nothing
    assert campaign_sha256(parse_campaign(data)) == expected


EDITABLE = st.sampled_from(["calculate", "validate", "render", "cleanup"])


@settings(max_examples=80, deadline=None)
@given(
    node_id=EDITABLE,
    what=st.sampled_from(["arg", "cpus", "mem", "host", "id"]),
    text=st.text(min_size=1, max_size=12),
    number=st.integers(3, 10**6),
)
def test_any_edit_changes_the_digest(node_id: str, what: str, text: str, number: int) -> None:
    before = campaign_sha256(parse_campaign(raw()))
    data = raw()
    target = node(data, node_id)
    if what == "arg":
        target["command"] = [*target["command"], text]
    elif what == "cpus":
        target["cpus"] = number
    elif what == "mem":
        target["mem_mb"] = number
    elif what == "host":
        target["host"] = text
    else:
        data["campaign_id"] = "h2o-" + str(number)
    assert campaign_sha256(parse_campaign(data)) != before
