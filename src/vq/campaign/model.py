"""The ``vq.campaign/1`` file: nodes, their edges, sources, outputs and runtime pins.

Contracts:

* Unknown fields are refused everywhere (there is no field for environment variables or
  credentials, and a misspelt one is never silently ignored).
* Values are taken as written: strict types, no coercion of ``"16"`` to ``16``.
* :func:`parse_campaign` returns the model or raises :class:`CampaignRefused` with every
  problem, each naming its node and field. Graph rules (references, cycles, paths) live
  in :mod:`vq.campaign.checks`.
* :func:`campaign_sha256` digests the canonical JSON of the parsed model, so reformatting
  or reordering keys never changes it and any edit of a value does. Fields left at their
  defaults are omitted from the digest, so spelling out a default changes nothing and a
  later, additive field does not change the digest of an existing campaign.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vq.campaign.problems import Problem, field_path
from vq.domain.canonical import sha256_of
from vq.domain.validation_words import JSON_WORDS, describe
from vq.errors import InvalidInput

__all__ = [
    "MAX_NODES",
    "SCHEMA_NAME",
    "After",
    "Campaign",
    "CampaignRefused",
    "Input",
    "Node",
    "Output",
    "Sources",
    "campaign_sha256",
    "parse_campaign",
]

SCHEMA_NAME = "vq.campaign/1"
MAX_NODES = 64

NodeKind = Literal["compute", "validate", "render", "other"]
OutputKind = Literal["file", "directory"]
EdgeOn = Literal["success", "completion"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Sources(_Strict):
    """A directory next to the campaign file, copied to the root of the node's workspace."""

    path: str
    sha256: str


class Input(_Strict):
    """Another node's output (``node.output``) staged at ``path`` in this node's workspace."""

    name: str
    source: str
    path: str


class Output(_Strict):
    name: str
    path: str
    kind: OutputKind


class After(_Strict):
    node: str
    on: EdgeOn


class Node(_Strict):
    """One ordinary vq job of the campaign."""

    id: str
    kind: NodeKind
    command: list[str] = Field(min_length=1)
    host: str | None = None
    program: str | None = None
    cpus: int = Field(default=1, ge=1)
    mem_mb: int | None = Field(default=None, ge=1)
    wall_time_seconds: int | None = Field(default=None, ge=1)
    sources: Sources | None = None
    inputs: list[Input] = Field(default_factory=list)
    outputs: list[Output] = Field(default_factory=list)
    after: list[After] = Field(default_factory=list)
    runtime_digest: str | None = None
    runtime_root: str | None = None

    def output(self, name: str) -> Output | None:
        return next((out for out in self.outputs if out.name == name), None)


class Campaign(_Strict):
    schema_name: Literal["vq.campaign/1"]
    campaign_id: str
    nodes: list[Node] = Field(min_length=1, max_length=MAX_NODES)

    def node(self, node_id: str) -> Node | None:
        return next((node for node in self.nodes if node.id == node_id), None)

    def node_ids(self) -> list[str]:
        return [node.id for node in self.nodes]


class CampaignRefused(InvalidInput):
    """A campaign file that is not a valid ``vq.campaign/1`` (exit 4); ``problems`` lists all."""

    default_reference = "campaign-invalid"

    def __init__(self, source: str, problems: list[Problem]):
        first = problems[0].text()
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        super().__init__(
            f"{source} is refused: {first}{more}",
            hint="`vq campaign validate FILE` lists every problem; see docs/campaigns.md",
        )
        self.problems = problems


def parse_campaign(raw: Any, *, source: str = "campaign") -> Campaign:
    """The campaign in ``raw`` (decoded JSON); CampaignRefused listing every problem."""
    if not isinstance(raw, dict):
        raise CampaignRefused(source, [Problem(None, "(file)", "is not a JSON object")])
    name = raw.get("schema_name")
    if name != SCHEMA_NAME:
        message = (
            "is missing" if name is None else f"is {name!r}; this vq reads only {SCHEMA_NAME!r}"
        )
        raise CampaignRefused(source, [Problem(None, "schema_name", message)])
    try:
        return Campaign.model_validate(raw)
    except ValidationError as exc:
        raise CampaignRefused(source, _problems(raw, exc)) from None


def campaign_sha256(campaign: Campaign) -> str:
    """The content digest of ``campaign`` (see the module contract)."""
    return sha256_of(campaign.model_dump(mode="json", exclude_defaults=True))


def _problems(raw: dict[str, Any], exc: ValidationError) -> list[Problem]:
    nodes = raw.get("nodes")
    problems: list[Problem] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        node: str | None = None
        if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
            node = _node_name(nodes, loc[1])
            loc = loc[2:]
        problems.append(Problem(node, field_path(loc), _message(error)))
    return problems


def _node_name(nodes: Any, index: int) -> str:
    if isinstance(nodes, list) and index < len(nodes) and isinstance(nodes[index], dict):
        node_id = nodes[index].get("id")
        if isinstance(node_id, str) and node_id:
            return node_id
    return f"nodes[{index}]"


def _message(error: Any) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return "is not a field of vq.campaign/1 (unknown fields are refused)"
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        return f"is {error['input']!r}; expected {ctx.get('expected', 'another value')}"
    if kind in ("too_short", "too_long") and error["loc"] == ("nodes",):
        return f"must list between 1 and {MAX_NODES} nodes"
    if kind == "too_short":
        return "must not be empty"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind in ("string_type", "int_type", "list_type", "dict_type", "model_type"):
        expected = {
            "string_type": "a string",
            "int_type": "an integer",
            "list_type": "a list",
            "dict_type": "an object",
            "model_type": "an object",
        }[kind]
        return f"must be {expected}, not {_json_type(error['input'])}"
    return describe(error, JSON_WORDS)


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (no Python wording in messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"
