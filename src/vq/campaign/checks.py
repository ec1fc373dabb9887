"""The graph and path rules of a campaign, beyond the shape its model enforces.

:func:`check_campaign` returns every :class:`Problem` (empty when the campaign is sound):
names, unknown references, self-dependencies, cycles (one is named), unsafe or
overlapping paths, a completion edge on a producer the node also consumes, a render node
without a validate node upstream along success edges, runtime pins. The source-placement
rule needs the listing of a node's sources, so it is the separate
:func:`check_source_placement`. :func:`edges` and :func:`campaign_order` describe a sound
campaign.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypedDict

from vq.campaign.model import Campaign, Node
from vq.campaign.problems import Problem

__all__ = [
    "Edge",
    "campaign_order",
    "check_campaign",
    "check_source_placement",
    "consumers_of",
    "edges",
    "find_cycle",
    "path_problem",
    "paths_overlap",
    "split_source",
]

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
CAMPAIGN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
SHA256_RE = re.compile(r"[0-9a-f]{64}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: The top-level name vq keeps for its own files inside a job's workspace.
RESERVED_TOP = "_vq"


#: An :class:`Edge` as ``vq campaign graph --json`` lists it.
EdgeJSON = TypedDict("EdgeJSON", {"from": str, "to": str, "on": str, "via": str})


@dataclass(frozen=True)
class Edge:
    """``before`` must succeed (``on="success"``) or finish (``"completion"``) before ``node``.

    ``via`` is ``"input NAME"`` for an input (always a success edge) or ``"after"``.
    """

    before: str
    node: str
    on: str
    via: str

    def as_dict(self) -> EdgeJSON:
        return {"from": self.before, "to": self.node, "on": self.on, "via": self.via}


def split_source(source: str) -> tuple[str, str] | None:
    """``"calculate.result"`` → ``("calculate", "result")``; None when not ``node.output``."""
    node, dot, output = source.partition(".")
    if not dot or not NAME_RE.fullmatch(node) or not NAME_RE.fullmatch(output):
        return None
    return node, output


def path_problem(path: str) -> str | None:
    """Why ``path`` is not a safe relative workspace path, or None."""
    if not path:
        return "is empty"
    if _CONTROL.search(path):
        return "contains a control character"
    if path.startswith("/"):
        return "is absolute; paths are relative to the workspace"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' component"
    if parts[0] == RESERVED_TOP:
        return f"starts with {RESERVED_TOP!r}, which vq keeps for its own files"
    return None


def paths_overlap(a: str, b: str) -> bool:
    """Whether one path is the other or lies inside it (component-wise)."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def edges(campaign: Campaign) -> list[Edge]:
    """Every edge, in campaign order of the dependent node: inputs first, then ``after``."""
    out: list[Edge] = []
    for node in campaign.nodes:
        for item in node.inputs:
            parsed = split_source(item.source)
            if parsed is not None:
                out.append(Edge(parsed[0], node.id, "success", f"input {item.name}"))
        out.extend(Edge(dep.node, node.id, dep.on, "after") for dep in node.after)
    return out


def consumers_of(campaign: Campaign) -> dict[tuple[str, str], list[str]]:
    """``(producer, output)`` → the nodes that stage it, in campaign order."""
    found: dict[tuple[str, str], list[str]] = {}
    for node in campaign.nodes:
        for item in node.inputs:
            parsed = split_source(item.source)
            if parsed is not None and node.id not in found.setdefault(parsed, []):
                found[parsed].append(node.id)
    return found


def _predecessors(campaign: Campaign) -> dict[str, list[str]]:
    known = set(campaign.node_ids())
    preds: dict[str, list[str]] = {node_id: [] for node_id in campaign.node_ids()}
    for edge in edges(campaign):
        if edge.before in known and edge.node in preds and edge.before not in preds[edge.node]:
            preds[edge.node].append(edge.before)
    return preds


def find_cycle(campaign: Campaign) -> list[str] | None:
    """One cycle as ``[a, b, …, a]`` (each runs before the next), or None."""
    preds = _predecessors(campaign)
    colour: dict[str, int] = dict.fromkeys(preds, 0)  # 0 new, 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node_id: str) -> list[str] | None:
        colour[node_id] = 1
        stack.append(node_id)
        for pred in preds[node_id]:
            if colour[pred] == 1:
                cycle = [*stack[stack.index(pred) :], pred]
                return list(reversed(cycle))
            if colour[pred] == 0 and (found := visit(pred)) is not None:
                return found
        stack.pop()
        colour[node_id] = 2
        return None

    for node_id in preds:
        if colour[node_id] == 0 and (found := visit(node_id)) is not None:
            return found
    return None


def campaign_order(campaign: Campaign) -> list[str]:
    """A stable topological order: among the nodes whose predecessors are placed, the
    one listed first in the file comes first. The campaign must be acyclic."""
    preds = _predecessors(campaign)
    placed: list[str] = []
    done: set[str] = set()
    while len(placed) < len(preds):
        ready = next((n for n in preds if n not in done and all(p in done for p in preds[n])), None)
        if ready is None:
            raise ValueError("campaign_order needs an acyclic campaign")
        placed.append(ready)
        done.add(ready)
    return placed


def check_campaign(campaign: Campaign) -> list[Problem]:
    """Every rule violation of ``campaign`` (see the module contract)."""
    problems: list[Problem] = []
    if not CAMPAIGN_ID_RE.fullmatch(campaign.campaign_id):
        problems.append(
            Problem(None, "campaign_id", "must be 1-128 letters, digits, '.', '_' or '-'")
        )
    seen: set[str] = set()
    for index, node in enumerate(campaign.nodes):
        if node.id in seen:
            problems.append(
                Problem(node.id, "id", f"is used by more than one node (nodes[{index}])")
            )
        seen.add(node.id)
        problems.extend(_node_problems(campaign, node))
    cycle = find_cycle(campaign)
    if cycle is not None:
        problems.append(
            Problem(cycle[0], "after/inputs", "is part of a cycle: " + " -> ".join(cycle))
        )
        return problems
    problems.extend(_render_problems(campaign))
    return problems


def _node_problems(campaign: Campaign, node: Node) -> list[Problem]:
    out: list[Problem] = []

    def add(field: str, message: str) -> None:
        out.append(Problem(node.id, field, message))

    if not NAME_RE.fullmatch(node.id):
        add("id", "must be 1-64 letters, digits, '_' or '-' (no '.')")
    if node.host is not None and (not node.host or _CONTROL.search(node.host) or " " in node.host):
        add("host", "must be a host name from your configuration, or omitted for this machine")
    if any(not part for part in node.command[:1]):
        add("command[0]", "must not be empty")
    _runtime_problems(node, add)
    staged: list[tuple[str, str]] = []  # (field, path) of every input and output
    if node.sources is not None and (why := path_problem(node.sources.path)):
        add("sources.path", why)
    _names(node, add)
    for index, item in enumerate(node.inputs):
        field = f"inputs[{index}]"
        parsed = split_source(item.source)
        if parsed is None:
            add(f"{field}.source", f"is {item.source!r}; expected NODE.OUTPUT")
        else:
            producer_id, output_name = parsed
            producer = campaign.node(producer_id)
            if producer_id == node.id:
                add(f"{field}.source", "names this node itself; a node cannot consume its output")
            elif producer is None:
                add(f"{field}.source", f"names unknown node {producer_id!r}")
            elif producer.output(output_name) is None:
                add(f"{field}.source", f"names unknown output {output_name!r} of {producer_id!r}")
        if why := path_problem(item.path):
            add(f"{field}.path", why)
        else:
            staged.append((f"{field}.path", item.path))
    for index, out_item in enumerate(node.outputs):
        if why := path_problem(out_item.path):
            add(f"outputs[{index}].path", why)
        else:
            staged.append((f"outputs[{index}].path", out_item.path))
    for i, (field_a, path_a) in enumerate(staged):
        for field_b, path_b in staged[:i]:
            if paths_overlap(path_a, path_b):
                add(field_a, f"{path_a!r} overlaps {field_b} {path_b!r}")
    consumed = {parsed[0] for item in node.inputs if (parsed := split_source(item.source))}
    seen_after: set[str] = set()
    for index, dep in enumerate(node.after):
        field = f"after[{index}].node"
        if dep.node == node.id:
            add(field, "names this node itself")
        elif campaign.node(dep.node) is None:
            add(field, f"names unknown node {dep.node!r}")
        elif dep.node in seen_after:
            add(field, f"names {dep.node!r} twice")
        elif dep.on == "completion" and dep.node in consumed:
            add(
                f"after[{index}].on",
                f"is completion, but this node consumes an output of {dep.node!r}, which "
                "exists only after it succeeded (a contradiction)",
            )
        seen_after.add(dep.node)
    return out


def _names(node: Node, add: Any) -> None:
    listed = (
        ("inputs", [i.name for i in node.inputs]),
        ("outputs", [o.name for o in node.outputs]),
    )
    for label, collection in listed:
        names: set[str] = set()
        for index, name in enumerate(collection):
            if not NAME_RE.fullmatch(name):
                add(f"{label}[{index}].name", "must be 1-64 letters, digits, '_' or '-'")
            elif name in names:
                add(f"{label}[{index}].name", f"{name!r} is used twice in {label}")
            names.add(name)


def _runtime_problems(node: Node, add: Any) -> None:
    if node.runtime_root is not None:
        if node.runtime_digest is None:
            add("runtime_root", "needs a runtime_digest (a root without a digest is refused)")
        root = node.runtime_root
        if not root.startswith("/") or ".." in root.split("/") or _CONTROL.search(root):
            add("runtime_root", "must be a plain absolute path (no '..', no control characters)")
    if node.runtime_digest is not None:
        if not SHA256_RE.fullmatch(node.runtime_digest):
            add("runtime_digest", "must be 64 lowercase hexadecimal digits (a SHA-256)")
        if node.runtime_root is None:
            add("runtime_digest", "needs a runtime_root (the deploy target that holds it)")


def _render_problems(campaign: Campaign) -> list[Problem]:
    success_preds: dict[str, set[str]] = {n: set() for n in campaign.node_ids()}
    for edge in edges(campaign):
        if edge.on == "success" and edge.node in success_preds:
            success_preds[edge.node].add(edge.before)
    out: list[Problem] = []
    for node in campaign.nodes:
        if node.kind != "render":
            continue
        seen: set[str] = set()
        todo = list(success_preds[node.id])
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            todo.extend(success_preds.get(current, ()))
        if not any((n := campaign.node(p)) is not None and n.kind == "validate" for p in seen):
            out.append(
                Problem(
                    node.id,
                    "kind",
                    "is render, but no validate node is upstream along success edges "
                    "(a successful exit is not a validated result)",
                )
            )
    return out


def check_source_placement(node: Node, source_entries: list[tuple[str, str]]) -> list[Problem]:
    """Problems where a source entry ``(path, type)`` sits at or below a staged input or
    output path, or a source file sits where one of their parent directories must go."""
    out: list[Problem] = []
    targets = [(f"inputs[{i}].path", item.path) for i, item in enumerate(node.inputs)]
    targets += [(f"outputs[{i}].path", item.path) for i, item in enumerate(node.outputs)]
    for field, target in targets:
        for path, kind in source_entries:
            inside = path == target or path.startswith(target + "/")
            blocks_parent = kind != "directory" and target.startswith(path + "/")
            if inside or blocks_parent:
                out.append(
                    Problem(node.id, field, f"{target!r} is taken by the source entry {path!r}")
                )
                break
    return out
