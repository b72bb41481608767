"""Where each box of the lineage picture goes: a layered (Sugiyama) layout, left to right in lineage
order, computed in Python by grandalf (no Graphviz, no system package).

grandalf ranks the nodes into columns, orders each column to cut crossings and places the boxes
(Brandes-Köpf); a last pass per column pushes apart any two boxes closer than ``NODE_GAP``, so no two
boxes overlap. A cluster (a Flink job's operators) is laid out on its own first and then takes part
in the outer layout as one box, so no other node is drawn inside it. Edges are routed through the
columns they cross (grandalf's dummy nodes), from the source's side to the target's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout

NODE_GAP = 18.0  # px between two boxes of one column
COLUMN_GAP = 64.0  # px between two columns, where the edges run
COMPONENT_GAP = 28.0  # px between two unconnected parts of the graph, stacked top to bottom
MARGIN = 12.0  # px around the picture
CLUSTER_PAD = 12.0  # px inside a cluster's border, around its boxes
CLUSTER_HEADER = 36.0  # px above a cluster's boxes, for its title

Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    """A rectangle: ``x``, ``y`` its top left corner."""

    x: float
    y: float
    w: float
    h: float

    def overlaps(self, other: Box) -> bool:
        return (
            self.x < other.x + other.w
            and other.x < self.x + self.w
            and self.y < other.y + other.h
            and (other.y < self.y + self.h)
        )

    def moved(self, dx: float, dy: float) -> Box:
        return Box(self.x + dx, self.y + dy, self.w, self.h)


@dataclass(frozen=True)
class Layout:
    width: float
    height: float
    nodes: dict[str, Box]
    clusters: dict[str, Box]
    routes: dict[tuple[str, str], list[Point]]  # each edge: its path, from the source's side to the target's


def layout(
    sizes: Mapping[str, tuple[float, float]],
    edges: Iterable[tuple[str, str]],
    clusters: Mapping[str, list[str]] | None = None,
    cluster_widths: Mapping[str, float] | None = None,
) -> Layout:
    """Boxes of ``sizes`` (key → width, height), clusters (key → member keys) around their members,
    at least as wide as ``cluster_widths`` says (their titles), and a route for each edge (an edge of
    a node to itself is not drawn)."""
    clusters, cluster_widths = clusters or {}, cluster_widths or {}
    edges = sorted({(a, b) for a, b in edges if a != b})
    block_of = {m: c for c, members in clusters.items() for m in members}
    inner: dict[str, _Placed] = {}
    outer_sizes = {k: s for k, s in sizes.items() if k not in block_of}
    for c, members in clusters.items():
        member_set = set(members)
        placed = _layered({m: sizes[m] for m in members}, [(a, b) for a, b in edges if {a, b} <= member_set])
        inner[c] = placed
        outer_sizes[c] = (
            max(placed.width + 2 * CLUSTER_PAD, cluster_widths.get(c, 0.0)),
            placed.height + CLUSTER_HEADER + CLUSTER_PAD,
        )
    outer_edges = {(block_of.get(a, a), block_of.get(b, b)) for a, b in edges}
    outer = _layered(outer_sizes, sorted((a, b) for a, b in outer_edges if a != b))

    nodes: dict[str, Box] = {}
    cluster_boxes: dict[str, Box] = {}
    inner_origin: dict[str, Point] = {}  # where a cluster's own layout starts: below its title, centred
    for key, box in outer.boxes.items():
        if key in clusters:
            cluster_boxes[key] = box
            ox, oy = box.x + (box.w - inner[key].width) / 2, box.y + CLUSTER_HEADER
            inner_origin[key] = (ox, oy)
            for m, mbox in inner[key].boxes.items():
                nodes[m] = mbox.moved(ox, oy)
        else:
            nodes[key] = box
    routes: dict[tuple[str, str], list[Point]] = {}
    for a, b in edges:
        ca, cb = block_of.get(a), block_of.get(b)
        if ca is not None and ca == cb:
            ox, oy = inner_origin[ca]
            via = [(x + ox, y + oy) for x, y in inner[ca].via[(a, b)]]
        else:
            via = outer.via[(ca or a, cb or b)]
        routes[(a, b)] = _ends(nodes[a], nodes[b], via)
    return Layout(
        outer.width + 2 * MARGIN,
        outer.height + 2 * MARGIN,
        _shift(nodes),
        _shift(cluster_boxes),
        {e: [(x + MARGIN, y + MARGIN) for x, y in r] for e, r in routes.items()},
    )


@dataclass(frozen=True)
class _Placed:
    width: float
    height: float
    boxes: dict[str, Box]  # top left at (0, 0)
    via: dict[tuple[str, str], list[Point]]  # each edge: the points it passes between its ends


def _layered(sizes: Mapping[str, tuple[float, float]], edges: list[tuple[str, str]]) -> _Placed:
    """A left-to-right layered layout of one graph, its unconnected parts stacked top to bottom.

    grandalf lays out top to bottom: it is handed each box turned a quarter (its height as the width
    within a layer), and its coordinates are swapped back."""
    vertices = {k: Vertex(k) for k in sorted(sizes)}
    for k, v in vertices.items():
        v.view = _View(sizes[k][1], sizes[k][0])
    graph = Graph(list(vertices.values()), [Edge(vertices[a], vertices[b]) for a, b in edges])
    boxes: dict[str, Box] = {}
    via: dict[tuple[str, str], list[Point]] = {}
    top, width = 0.0, 0.0
    for part in graph.C:
        centres, part_via = _part(part)
        left = min(centres[k][0] - sizes[k][0] / 2 for k in centres)
        upper = min(centres[k][1] - sizes[k][1] / 2 for k in centres)
        bottom = 0.0
        for k, (cx, cy) in centres.items():
            w, h = sizes[k]
            boxes[k] = Box(cx - w / 2 - left, cy - h / 2 - upper + top, w, h)
            width = max(width, boxes[k].x + w)
            bottom = max(bottom, boxes[k].y + h)
        for e, points in part_via.items():
            via[e] = [(x - left, y - upper + top) for x, y in points]
        top = bottom + COMPONENT_GAP
    return _Placed(width, max(top - COMPONENT_GAP, 0.0), boxes, via)


class _View:
    """What grandalf reads and writes of a vertex: its size and, once drawn, its centre."""

    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h
        self.xy: Point = (0.0, 0.0)


def _part(part) -> tuple[dict[str, Point], dict[tuple[str, str], list[Point]]]:
    """Centres (left to right) of one connected part's boxes, and the points each edge passes."""
    if len(part.sV) == 1:
        (only,) = part.sV
        return {only.data: (0.0, 0.0)}, {}
    sug = SugiyamaLayout(part)
    sug.xspace, sug.yspace = NODE_GAP, COLUMN_GAP
    sug.init_all()
    sug.draw()
    for column in sug.layers:  # no two boxes of a column closer than NODE_GAP, whatever the averaging gave
        for before, v in pairwise(column):
            least = before.view.xy[0] + (before.view.w + v.view.w) / 2 + NODE_GAP
            if v.view.xy[0] < least:
                v.view.xy = (least, v.view.xy[1])
    centres = {v.data: (v.view.xy[1], v.view.xy[0]) for v in part.sV}
    via: dict[tuple[str, str], list[Point]] = {}
    for e in part.sE:
        a, b = e.v
        points: list[Point] = []
        if e in sug.ctrls:
            dummies = sug.ctrls[e]
            ra, rb = sug.grx[a].rank, sug.grx[b].rank
            ranks = range(ra + 1, rb) if ra < rb else range(ra - 1, rb, -1)
            points = [(dummies[r].view.xy[1], dummies[r].view.xy[0]) for r in ranks]
        via[(a.data, b.data)] = points
    return centres, via


def _ends(source: Box, target: Box, via: list[Point]) -> list[Point]:
    """The route of an edge: out of the source's right side into the target's left one (the other way
    round for an edge drawn right to left, one that closes a cycle)."""
    forward = target.x >= source.x + source.w
    start = (source.x + source.w, source.y + source.h / 2) if forward else (source.x, source.y + source.h / 2)
    end = (target.x, target.y + target.h / 2) if forward else (target.x + target.w, target.y + target.h / 2)
    return [start, *via, end]


def _shift(boxes: dict[str, Box]) -> dict[str, Box]:
    return {k: b.moved(MARGIN, MARGIN) for k, b in sorted(boxes.items())}
