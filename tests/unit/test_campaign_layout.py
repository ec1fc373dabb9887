"""Where the console draws a campaign's nodes and edges (pure)."""

from __future__ import annotations

from tests.campaign_support import campaign
from vq.campaign.layout import BOX_H, BOX_W, layout


def test_columns_follow_the_longest_path_and_edges_keep_their_kind() -> None:
    parsed, _digest = campaign()
    drawn = layout(parsed)
    x = {item.node: item.x for item in drawn.nodes}
    assert x["calculate"] < x["validate"] == x["cleanup"] < x["render"]
    kinds = {(e.before, e.node): e.on for e in drawn.edges}
    assert kinds == {
        ("calculate", "validate"): "success",
        ("calculate", "render"): "success",  # an input: drawn once
        ("validate", "render"): "success",
        ("calculate", "cleanup"): "completion",
    }
    dashed = [(e.before, e.node) for e in drawn.edges if e.dashed]
    assert dashed == [("calculate", "cleanup")]
    for item in drawn.nodes:  # every box inside the picture
        assert 0 <= item.x and item.x + BOX_W <= drawn.width
        assert 0 <= item.y and item.y + BOX_H <= drawn.height


def test_an_edge_that_skips_a_column_arches_over_the_boxes_between() -> None:
    parsed, _digest = campaign()
    edges = {(e.before, e.node): e for e in layout(parsed).edges}
    assert edges[("calculate", "render")].path.split()[3] == "C"
    assert edges[("calculate", "validate")].path.split()[3] == "L"
    lift = int(edges[("calculate", "render")].path.split()[5].rstrip(","))
    assert lift >= 0 and lift < edges[("calculate", "render")].y1 - BOX_H // 2
