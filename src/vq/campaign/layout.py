"""Where the console draws each node of a campaign graph (pure; no I/O).

Columns are levels: a node sits one column right of its furthest predecessor (longest
path from a root), rows follow campaign order within a column. Edges keep their kind:
``success`` edges are drawn solid, ``completion`` edges dashed. Several edges between the
same two nodes (an input and an ``after``) are drawn once, as the strongest (success).
An edge that skips columns arches over the boxes between its ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from vq.campaign.checks import campaign_order, edges
from vq.campaign.model import Campaign

__all__ = ["BOX_H", "BOX_W", "GraphLayout", "PlacedEdge", "PlacedNode", "layout"]

BOX_W, BOX_H = 160, 44
_GAP_X, _GAP_Y, _MARGIN = 70, 26, 12
#: How far an edge that skips columns arches above its ends (the top margin leaves room).
_ARCH = 50


@dataclass(frozen=True)
class PlacedNode:
    node: str
    x: int
    y: int


@dataclass(frozen=True)
class PlacedEdge:
    before: str
    node: str
    on: str
    x1: int
    y1: int
    x2: int
    y2: int

    @property
    def dashed(self) -> bool:
        return self.on == "completion"

    @property
    def path(self) -> str:
        """SVG path data: straight to the next column, arched over the boxes between."""
        if self.x2 - self.x1 <= _GAP_X:
            return f"M {self.x1} {self.y1} L {self.x2} {self.y2}"
        lift = min(self.y1, self.y2) - _ARCH
        return (
            f"M {self.x1} {self.y1} C {self.x1 + _GAP_X} {lift}, "
            f"{self.x2 - _GAP_X} {lift}, {self.x2} {self.y2}"
        )


@dataclass(frozen=True)
class GraphLayout:
    width: int
    height: int
    nodes: list[PlacedNode]
    edges: list[PlacedEdge]


def layout(campaign: Campaign) -> GraphLayout:
    """The positions of every node box and edge line (see the module docstring)."""
    order = campaign_order(campaign)
    graph = edges(campaign)
    level: dict[str, int] = {}
    for node in order:
        depths = [level[e.before] for e in graph if e.node == node]
        level[node] = 1 + max(depths) if depths else 0
    rows: dict[int, int] = {}
    placed: dict[str, PlacedNode] = {}
    for node in order:
        column = level[node]
        row = rows.get(column, 0)
        rows[column] = row + 1
        x = _MARGIN + column * (BOX_W + _GAP_X)
        placed[node] = PlacedNode(node, x, _MARGIN + _ARCH + row * (BOX_H + _GAP_Y))
    kinds: dict[tuple[str, str], str] = {}
    for edge in graph:
        pair = (edge.before, edge.node)
        kinds[pair] = "success" if "success" in (edge.on, kinds.get(pair)) else edge.on
    lines = []
    for (before, node), on in kinds.items():
        a, b = placed[before], placed[node]
        lines.append(
            PlacedEdge(before, node, on, a.x + BOX_W, a.y + BOX_H // 2, b.x, b.y + BOX_H // 2)
        )
    columns = 1 + max(level.values(), default=0)
    tallest = max(rows.values(), default=1)
    return GraphLayout(
        width=2 * _MARGIN + columns * BOX_W + (columns - 1) * _GAP_X,
        height=2 * _MARGIN + _ARCH + tallest * BOX_H + (tallest - 1) * _GAP_Y,
        nodes=[placed[node] for node in order],
        edges=lines,
    )
