"""The lineage graph as a picture: Graphviz DOT, Mermaid, and one self-contained HTML page.

Everything renders from the neutral JSON document (:func:`lakeflow.lineage.emit_json.document`),
so ``lakeflow harvest --format html`` and ``lakeflow lineage view`` (a saved harvest, the lineage
store) draw the same thing:

* nodes: datasets (cylinders), Flink jobs and compaction jobs (named by the engine that ran them; boxes coloured by their
  newest run: green finished, red failed, blue live, grey cancelled), Flink operators when the
  harvest had ``--operator-granularity vertex`` (boxes inside the job's cluster), and each
  unresolved reference of a job (a dashed note with its reason);
* node names are the JSON ``edges`` names (``dataset:<name>``, ``flink:<job>``, ``compaction:<job>``,
  ``operator:flink:<job>/<vertex id>``, ``unresolved:<engine>:<job>#<n>``): each is the
  ``<title>`` of its SVG group, and the key of its details.

The layout is :mod:`lakeflow.lineage.layout`'s (columns left to right in lineage order, laid out
in Python: no Graphviz, no system package), drawn here as SVG. The HTML page embeds the SVG, the node details as JSON and a few lines of inline
CSS/JS (click or Enter on a node shows its details); its Content-Security-Policy allows no
network access at all, so it works offline from a file. DOT and Mermaid need no tool.
"""

from __future__ import annotations

import html
import json
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from lakeflow.lineage.columns import flat, from_facet
from lakeflow.lineage.graph import COMPACTION, compaction_label
from lakeflow.lineage.layout import Box, Layout, layout

FORMATS = ("html", "dot", "mermaid")
LIVE_STATES = {
    "RUNNING",
    "RESTARTING",
    "CREATED",
    "INITIALIZING",
    "FAILING",
    "CANCELLING",
    "RECONCILING",
    "SUSPENDED",
    "START",
}  # Flink's live job states; a compaction with a START event only
ENGINES = {"flink": "Flink"}
# status → (fill, stroke)
COLOURS = {
    "success": ("#e6f4ea", "#1e8e3e"),
    "failure": ("#fce8e6", "#d93025"),
    "live": ("#e8f0fe", "#1a73e8"),
    "skipped": ("#f1f3f4", "#80868b"),
    "unknown": ("#ffffff", "#5f6368"),
    "dataset": ("#fef7e0", "#b06000"),
    "operator": ("#ffffff", "#1a73e8"),
    "unresolved": ("#fff8e1", "#e37400"),
}


@dataclass
class Node:
    key: str
    kind: str  # dataset / job / operator / unresolved
    status: str  # a COLOURS key
    title: str
    lines: tuple[str, ...]
    tooltip: str
    details: dict[str, Any]


@dataclass
class Cluster:
    key: str  # "cluster:<engine>:<job>"
    title: str
    status: str
    nodes: list[str] = field(default_factory=list)


@dataclass
class View:
    nodes: dict[str, Node]
    clusters: list[Cluster]
    edges: list[tuple[str, str, str]]  # (from, to, style: flow / unresolved)
    summary: dict[str, int]
    failed_jobs: list[tuple[str, str]]
    details: dict[str, dict[str, Any]]  # SVG title → details (nodes and clusters)


# --- the view model -----------------------------------------------------------------------------


def view(doc: Mapping[str, Any]) -> View:
    """What to draw, from a harvest's JSON document."""
    jobs, runs = list(doc.get("jobs") or ()), list(doc.get("runs") or ())
    datasets = {d["name"]: d for d in doc.get("datasets") or ()}
    flows_meta = {(f["engine"], f["name"]): f for f in doc.get("flows") or ()}
    tasks_by_flow: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for t in doc.get("tasks") or ():
        tasks_by_flow.setdefault((t["engine"], t["flow"]), []).append(t)
    flows = sorted({(j["engine"], j["name"]) for j in jobs} | set(flows_meta))
    runs_by_flow: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in runs:
        runs_by_flow.setdefault((r["engine"], r["flow"]), []).append(r)

    nodes: dict[str, Node] = {}
    clusters: list[Cluster] = []
    edges: set[tuple[str, str, str]] = set()
    details: dict[str, dict[str, Any]] = {}
    readers: dict[str, set[str]] = {}
    writers: dict[str, set[str]] = {}
    clustered: set[str] = set()

    for engine, name in flows:
        key = f"{engine}:{name}"
        mine = [j for j in jobs if (j["engine"], j["name"]) == (engine, name)]
        flow_runs = sorted(runs_by_flow.get((engine, name), ()), key=lambda r: (r.get("start_ms") or 0, r["run_id"]))
        newest = flow_runs[-1] if flow_runs else None
        state = newest["state"] if newest else (mine[-1]["state"] if mine else "")
        status = _status(newest["result"] if newest else None, state)
        inputs = sorted({d for j in mine for d in j["inputs"]})
        outputs = sorted({d for j in mine for d in j["outputs"]})
        unresolved = sorted({u for j in mine for u in j.get("unresolved") or ()})
        skipped = sorted({s for j in mine for s in j.get("skipped") or ()})
        evidence = sorted({(d, e) for j in mine for d, e in (j.get("evidence") or {}).items()})
        meta = flows_meta.get((engine, name), {})
        ran = (meta.get("properties") or {}).get("engine") or ((newest or {}).get("properties") or {}).get("engine")
        kind = compaction_label(ran) if engine == COMPACTION else f"{ENGINES.get(engine, engine.title())} job"
        ptype = (newest or {}).get("type") or ""
        failed = sum(1 for r in flow_runs if r.get("result") == "FAILURE")
        summary_line = " · ".join(
            x
            for x in (
                state,
                f"{len(flow_runs)} run{'s' if len(flow_runs) != 1 else ''}",
                f"{failed} failed" if failed else "",
            )
            if x
        )
        lines = [
            f"{ENGINES.get(engine, engine)} {ptype.lower()} job".replace("  ", " ") if engine != COMPACTION else kind,
            summary_line,
        ]
        io = _io_line(newest)
        if io:
            lines.append(io)
        d = {
            "kind": kind,
            "name": name,
            "fields": _fields(
                [
                    ("engine", (ran or "compaction") if engine == COMPACTION else ENGINES.get(engine, engine)),
                    ("type", ptype),
                    ("state (newest run)", state),
                    ("runs", str(len(flow_runs))),
                    ("description", meta.get("description")),
                    ("url", meta.get("url")),
                ]
            ),
            "sections": _sections(
                [
                    ("Inputs", inputs),
                    ("Outputs", outputs),
                    ("Unresolved lineage", unresolved),
                    ("Skipped (not datasets)", skipped),
                    ("Evidence", [f"{d_}: {e}" for d_, e in evidence]),
                ]
            )
            + _runs_section(flow_runs)
            + _props_section("Properties", meta.get("properties") or {}),
        }
        tasks = tasks_by_flow.get((engine, name), [])
        vertex = engine == "flink" and bool(tasks) and (len(tasks) > 1 or tasks[0]["id"] != name)
        if vertex:
            clustered.add(key)
            ckey = f"cluster:{key}"
            cluster = Cluster(ckey, name, status)
            details[ckey] = d
            for t in sorted(tasks, key=lambda t: t["id"]):
                okey = f"operator:{engine}:{name}/{t['id']}"
                props = t.get("properties") or {}
                nodes[okey] = Node(
                    okey,
                    "operator",
                    "operator",
                    _short(t["name"], 48),
                    (f"parallelism {props['parallelism']}" if props.get("parallelism") else "operator",),
                    t["name"],
                    {
                        "kind": "Flink operator (job vertex)",
                        "name": t["name"],
                        "fields": _fields(
                            [("job", name), ("vertex id", t["id"]), ("parallelism", props.get("parallelism"))]
                        ),
                        "sections": _sections(
                            [
                                ("Inputs", t["inputs"]),
                                ("Outputs", t["outputs"]),
                                ("Upstream operators", [_task_name(tasks, u) for u in t["upstream"]]),
                            ]
                        ),
                    },
                )
                cluster.nodes.append(okey)
                for ds in t["inputs"]:
                    edges.add((f"dataset:{ds}", okey, "flow"))
                    readers.setdefault(ds, set()).add(key)
                for ds in t["outputs"]:
                    edges.add((okey, f"dataset:{ds}", "flow"))
                    writers.setdefault(ds, set()).add(key)
                for u in t["upstream"]:
                    edges.add((f"operator:{engine}:{name}/{u}", okey, "flow"))
            clusters.append(cluster)
        else:
            nodes[key] = Node(key, "job", status, name, tuple(lines), f"{kind}: {name}", d)
        for i, reason in enumerate(unresolved):
            ukey = f"unresolved:{engine}:{name}#{i + 1}"
            nodes[ukey] = Node(
                ukey,
                "unresolved",
                "unresolved",
                "unresolved",
                tuple(_wrap(reason, 42, 4)),
                reason,
                {
                    "kind": "Unresolved lineage",
                    "name": reason,
                    "fields": _fields([("job", name), ("engine", ENGINES.get(engine, engine)), ("reason", reason)]),
                    "sections": [
                        {
                            "title": "What this means",
                            "items": [
                                "The job reads or writes something the harvest could not name as a dataset; "
                                "no edge is drawn for it."
                            ],
                        }
                    ],
                },
            )
            if vertex:
                clusters[-1].nodes.append(ukey)
            else:
                edges.add((key, ukey, "unresolved"))
        for ds in inputs:
            readers.setdefault(ds, set()).add(key)
        for ds in outputs:
            writers.setdefault(ds, set()).add(key)

    for a, b in doc.get("edges") or ():
        if a not in clustered and b not in clustered:  # a clustered job's edges are drawn operator by operator
            edges.add((a, b, "flow"))
    for a, b, _ in edges:  # a dataset only an edge names still gets its node
        for end in (a, b):
            if end.startswith("dataset:") and end[len("dataset:") :] not in datasets:
                datasets[end[len("dataset:") :]] = {"name": end[len("dataset:") :]}

    for name, ds in sorted(datasets.items()):
        key = f"dataset:{name}"
        ns = ds.get("namespace") or ""
        platform = ns.split("://", 1)[0] if ns else ""
        title, where = _dataset_label(name, ns, ds.get("path") or "")
        nodes[key] = Node(
            key,
            "dataset",
            "dataset",
            title,
            tuple(x for x in (where,) if x),
            name,
            {
                "kind": f"Dataset ({platform})" if platform else "Dataset",
                "name": name,
                "fields": _fields(
                    [("namespace", ns), ("name", ds.get("path")), ("platform instance", ds.get("platform_instance"))]
                ),
                "sections": _sections(
                    [
                        ("Aliases", ds.get("aliases") or []),
                        ("Written by", sorted(writers.get(name, ()))),
                        ("Read by", sorted(readers.get(name, ()))),
                    ]
                )
                + _schema_section(ds.get("schema")),
            },
        )

    for n in nodes.values():
        details[n.key] = n.details
    summary = {
        "flink_jobs": sum(1 for e, _ in flows if e == "flink"),
        "compaction_jobs": sum(1 for e, _ in flows if e == COMPACTION),
        "runs": len(runs),
        "datasets": len(datasets),
        "unresolved": sum(1 for n in nodes.values() if n.kind == "unresolved"),
        "failed_jobs": len(doc.get("failed_jobs") or ()),
    }
    failed_jobs = [(f["job_id"], f["error"]) for f in doc.get("failed_jobs") or ()]
    return View(dict(sorted(nodes.items())), clusters, sorted(edges), summary, failed_jobs, details)


def _status(result: str | None, state: str) -> str:
    if result == "SUCCESS":
        return "success"
    if result == "FAILURE":
        return "failure"
    if result == "SKIPPED":
        return "skipped"
    return "live" if state.upper() in LIVE_STATES else "unknown"


def _io_line(run: Mapping[str, Any] | None) -> str:
    if not run or not (run.get("records_in") or run.get("records_out")):
        return ""
    return f"in {_count(run.get('records_in') or 0)} · out {_count(run.get('records_out') or 0)} records"


def _count(n: int) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}".replace(".0", "")
    return str(n)


def _bytes(n: int | None) -> str:
    if n is None:
        return ""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _time(ms: int | None) -> str:
    if not ms:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(start: int | None, end: int | None) -> str:
    if not start or not end or end < start:
        return ""
    s = (end - start) / 1000
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


def _fields(pairs: Iterable[tuple[str, Any]]) -> list[list[str]]:
    return [[k, str(v)] for k, v in pairs if v not in (None, "")]


def _sections(items: Iterable[tuple[str, list[str]]]) -> list[dict[str, Any]]:
    return [{"title": t, "items": list(v)} for t, v in items if v]


def _props_section(title: str, props: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not props:
        return []
    return [{"title": title, "columns": ["key", "value"], "rows": [[k, str(v)] for k, v in sorted(props.items())]}]


def _schema_section(schema: Any) -> list[dict[str, Any]]:
    """A dataset's columns, one row each (nested ones by their dotted path)."""
    rows = [[path, c.type, c.description] for path, c in flat(from_facet({"fields": schema}) if schema else ())]
    return [{"title": "Schema", "columns": ["column", "type", "description"], "rows": rows}] if rows else []


def _runs_section(runs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each run (newest first) as its own list of fields: id, state, result, times, I/O, failure."""
    if not runs:
        return []
    records = []
    for r in reversed(runs):
        start, end = r.get("start_ms"), r.get("end_ms")
        records.append(
            _fields(
                [
                    ("run id", r["run_id"]),
                    ("state", r.get("state")),
                    ("result", r.get("result") or "(live: no result yet)"),
                    ("type", r.get("type")),
                    ("start", _time(start)),
                    ("end", _time(end)),
                    ("duration", _duration(start, end)),
                    ("records in / out", f"{r.get('records_in', 0)} / {r.get('records_out', 0)}"),
                    ("bytes in / out", f"{_bytes(r.get('bytes_in', 0))} / {_bytes(r.get('bytes_out', 0))}"),
                    ("restarts", r.get("restarts")),
                    ("failure", r.get("failure")),
                    ("url", r.get("url")),
                ]
            )
        )
    return [{"title": f"Runs ({len(runs)}, newest first)", "records": records}]


def _task_name(tasks: list[Mapping[str, Any]], task_id: str) -> str:
    return next((f"{t['name']} ({task_id})" for t in tasks if t["id"] == task_id), task_id)


def _dataset_label(name: str, namespace: str, path: str) -> tuple[str, str]:
    """A short title (the last path segment, topic or table) and where it lives."""
    body = path or name
    parts = [p for p in body.split("/") if p]
    where = namespace if "://" in namespace else (namespace or name.split(":", 1)[0])
    if len(parts) > 1:
        parent = parts[:-1]
        lead = "…/" if len(parent) > 2 else ("/" if body.startswith("/") else "")
        where = f"{where} · {lead}{'/'.join(parent[-2:])}"
    return _short(parts[-1] if parts else body, 40), _short(where, 56)


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _wrap(text: str, width: int, max_lines: int) -> list[str]:
    lines = textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = _short(lines[-1] + " …", width)
    return lines


# --- DOT ----------------------------------------------------------------------------------------


def dot(doc: Mapping[str, Any]) -> str:
    """Graphviz DOT text of the graph (render it with ``dot -Tsvg``)."""
    v = view(doc)
    ids = {key: f"n{i}" for i, key in enumerate(v.nodes)}
    out = [
        "digraph lineage {",
        '  graph [rankdir=LR, fontname="Helvetica", fontsize=12, bgcolor="transparent", nodesep=0.3, '
        "ranksep=0.8, pad=0.25];",
        '  node [fontname="Helvetica", fontsize=11, shape=box, style="rounded,filled", penwidth=1.4, margin="0.15,0.07"];',
        '  edge [color="#5f6368", arrowsize=0.7, penwidth=1.1];',
    ]
    in_cluster = {k for c in v.clusters for k in c.nodes}
    for i, c in enumerate(v.clusters):
        fill, stroke = COLOURS[c.status]
        out.append(f"  subgraph {_q(c.key)} {{")
        out.append(
            f'    id="c{i}"; class="job flink {c.status}"; label=<<B>{_h(c.title)}</B><BR/>'
            f'<FONT POINT-SIZE="9" COLOR="#5f6368">Flink job · operators</FONT>>; '
            f'style="rounded,filled"; fillcolor="{fill}"; color="{stroke}"; penwidth=1.6; fontname="Helvetica";'
        )
        for key in c.nodes:
            out.append("    " + _dot_node(v.nodes[key], ids[key]))
        out.append("  }")
    for key, n in v.nodes.items():
        if key not in in_cluster:
            out.append("  " + _dot_node(n, ids[key]))
    for a, b, style in v.edges:
        if style == "unresolved":
            out.append(f'  {_q(a)} -> {_q(b)} [style=dashed, arrowhead=none, color="#e37400"];')
        else:
            out.append(f"  {_q(a)} -> {_q(b)};")
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_node(n: Node, node_id: str) -> str:
    fill, stroke = COLOURS[n.status]
    shape = {"dataset": "cylinder", "unresolved": "note"}.get(n.kind, "box")
    style = {"unresolved": "filled,dashed", "dataset": "filled"}.get(n.kind, "rounded,filled")
    label = f"<B>{_h(n.title)}</B>" + "".join(
        f'<BR/><FONT POINT-SIZE="9" COLOR="#3c4043">{_h(x)}</FONT>' for x in n.lines
    )
    classes = n.kind if n.kind == n.status else f"{n.kind} {n.status}"
    return (
        f'{_q(n.key)} [id="{node_id}", class="{classes}", shape={shape}, style="{style}", '
        f'fillcolor="{fill}", color="{stroke}", tooltip={_q(n.tooltip)}, label=<{label}>];'
    )


def _q(text: str) -> str:
    """A DOT quoted string: ``"`` escaped, a backslash doubled (so a trailing one cannot escape the
    closing quote), ``&`` as ``&amp;`` (Graphviz decodes HTML entities in strings)."""
    return '"' + text.replace("&", "&amp;").replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _h(text: str) -> str:
    """Text for a DOT HTML-like label."""
    return html.escape(text, quote=True).replace("\n", " ")


# --- SVG ----------------------------------------------------------------------------------------

TITLE_PX, LINE_PX = 11, 9  # font sizes of a box's title and of its other lines
PAD_X, PAD_Y, LINE_GAP = 12.0, 7.0, 3.0
CYLINDER_RY = 5.0  # half the height of a dataset cylinder's top and bottom ellipses
EDGE_COLOUR = "#5f6368"
CLUSTER_SUBTITLE = "Flink job · operators"


def _text_width(text: str, px: int, bold: bool = False) -> float:
    """A generous estimate of the drawn width of Helvetica text (no font metrics at hand)."""
    return len(text) * px * (0.64 if bold else 0.58)


def _size(n: Node) -> tuple[float, float]:
    """Width and height of a node's box: its title and lines, padded (a cylinder's rims added)."""
    width = max([_text_width(n.title, TITLE_PX, bold=True), *(_text_width(x, LINE_PX) for x in n.lines)])
    height = TITLE_PX + len(n.lines) * (LINE_PX + LINE_GAP) + 2 * PAD_Y
    return width + 2 * PAD_X, height + (3 * CYLINDER_RY if n.kind == "dataset" else 0)


def arrange(v: View) -> Layout:
    """Where the view's boxes, clusters and edges go (sized for their text)."""
    return layout(
        {k: _size(n) for k, n in v.nodes.items()},
        [(a, b) for a, b, _ in v.edges],
        {c.key: c.nodes for c in v.clusters},
        {
            c.key: max(_text_width(c.title, TITLE_PX, bold=True), _text_width(CLUSTER_SUBTITLE, LINE_PX)) + 2 * PAD_X
            for c in v.clusters
        },
    )


def svg(v: View) -> str:
    """The view laid out (:func:`arrange`) and drawn as one SVG element: a ``g.node`` per node, a
    ``g.cluster`` per cluster and a ``g.edge`` per edge, each with its key as ``<title>`` (an edge's:
    ``from->to``)."""
    placed = arrange(v)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{placed.width:.0f}" height="{placed.height:.0f}" '
        f'viewBox="0 0 {placed.width:.1f} {placed.height:.1f}" font-family="Helvetica,Arial,sans-serif">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto"><path d="M0,0L10,5L0,10z" fill="{EDGE_COLOUR}"/></marker></defs>',
    ]
    for i, c in enumerate(v.clusters):
        fill, stroke = COLOURS[c.status]
        b = placed.clusters[c.key]
        out.append(
            f'<g id="c{i}" class="cluster job flink {c.status}"><title>{_e(c.key)}</title>'
            f'<path d="{_rounded(b, 8)}" fill="{fill}" stroke="{stroke}" stroke-width="1.6"/>'
            f"{_text(b.x + b.w / 2, b.y + 16, c.title, TITLE_PX, bold=True)}"
            f"{_text(b.x + b.w / 2, b.y + 28, CLUSTER_SUBTITLE, LINE_PX, colour=EDGE_COLOUR)}</g>"
        )
    for a, b_, style in v.edges:
        route = placed.routes[(a, b_)]
        look = (
            'stroke="#e37400" stroke-dasharray="5 4"'
            if style == "unresolved"
            else f'stroke="{EDGE_COLOUR}" marker-end="url(#arrow)"'
        )
        out.append(
            f'<g class="edge"><title>{_e(a)}-&gt;{_e(b_)}</title>'
            f'<path d="{_curve(route)}" fill="none" stroke-width="1.1" {look}/></g>'
        )
    for i, (key, n) in enumerate(v.nodes.items()):
        out.append(_svg_node(n, f"n{i}", placed.nodes[key]))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _svg_node(n: Node, node_id: str, b: Box) -> str:
    fill, stroke = COLOURS[n.status]
    top = b.y + PAD_Y + (2 * CYLINDER_RY if n.kind == "dataset" else 0)
    if n.kind == "dataset":
        ry = CYLINDER_RY
        rx, x2, y1, y2 = b.w / 2, b.x + b.w, b.y + ry, b.y + b.h - ry
        shape = (
            f"M{b.x:.1f},{y1:.1f}A{rx:.1f},{ry} 0 0 1 {x2:.1f},{y1:.1f}L{x2:.1f},{y2:.1f}"
            f"A{rx:.1f},{ry} 0 0 1 {b.x:.1f},{y2:.1f}Z M{b.x:.1f},{y1:.1f}A{rx:.1f},{ry} 0 0 0 {x2:.1f},{y1:.1f}"
        )
        dash = ""
    elif n.kind == "unresolved":
        fold, x2, y2 = 8.0, b.x + b.w, b.y + b.h
        shape = (
            f"M{b.x:.1f},{b.y:.1f}H{x2 - fold:.1f}L{x2:.1f},{b.y + fold:.1f}V{y2:.1f}H{b.x:.1f}Z "
            f"M{x2 - fold:.1f},{b.y:.1f}V{b.y + fold:.1f}H{x2:.1f}"
        )
        dash = ' stroke-dasharray="4 3"'
    else:
        shape, dash = _rounded(b, 6), ""
    texts = [_text(b.x + b.w / 2, top + TITLE_PX - 1, n.title, TITLE_PX, bold=True)]
    for i, line in enumerate(n.lines):
        baseline = top + TITLE_PX + (i + 1) * (LINE_PX + LINE_GAP)
        texts.append(_text(b.x + b.w / 2, baseline, line, LINE_PX, colour="#3c4043"))
    classes = n.kind if n.kind == n.status else f"{n.kind} {n.status}"
    return (
        f'<g id="{node_id}" class="node {classes}"><title>{_e(n.key)}</title>'
        f'<path d="{shape}" fill="{fill}" stroke="{stroke}" stroke-width="1.4"{dash}/>{"".join(texts)}</g>'
    )


def _rounded(b: Box, r: float) -> str:
    x2, y2 = b.x + b.w, b.y + b.h
    return (
        f"M{b.x + r:.1f},{b.y:.1f}H{x2 - r:.1f}A{r},{r} 0 0 1 {x2:.1f},{b.y + r:.1f}V{y2 - r:.1f}"
        f"A{r},{r} 0 0 1 {x2 - r:.1f},{y2:.1f}H{b.x + r:.1f}A{r},{r} 0 0 1 {b.x:.1f},{y2 - r:.1f}"
        f"V{b.y + r:.1f}A{r},{r} 0 0 1 {b.x + r:.1f},{b.y:.1f}Z"
    )


def _curve(route: list[tuple[float, float]]) -> str:
    """A smooth path through the route's points: each stretch an S-curve leaving and entering level."""
    (x, y), parts = route[0], [f"M{route[0][0]:.1f},{route[0][1]:.1f}"]
    for qx, qy in route[1:]:
        d = (qx - x) / 2
        parts.append(f"C{x + d:.1f},{y:.1f} {qx - d:.1f},{qy:.1f} {qx:.1f},{qy:.1f}")
        x, y = qx, qy
    return "".join(parts)


def _text(x: float, y: float, text: str, px: int, bold: bool = False, colour: str = "#202124") -> str:
    weight = ' font-weight="bold"' if bold else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="middle" font-size="{px}"{weight} fill="{colour}">{_e(text)}</text>'
    )


# --- Mermaid ------------------------------------------------------------------------------------


def mermaid(doc: Mapping[str, Any]) -> str:
    """Mermaid flowchart text of the graph (GitHub, GitLab and mermaid.live draw it)."""
    v = view(doc)
    ids = {key: f"n{i}" for i, key in enumerate(v.nodes)}
    out = ["flowchart LR"]
    for status, (fill, stroke) in COLOURS.items():
        dash = ",stroke-dasharray:4 3" if status == "unresolved" else ""
        out.append(f"  classDef {status} fill:{fill},stroke:{stroke},color:#202124{dash}")
    in_cluster = {k for c in v.clusters for k in c.nodes}
    for i, c in enumerate(v.clusters):
        out.append(f'  subgraph c{i}["{_m(c.title)}"]')
        for key in c.nodes:
            out.append("    " + _mermaid_node(v.nodes[key], ids[key]))
        out.append("  end")
        out.append(f"  class c{i} {c.status}")
    for key, n in v.nodes.items():
        if key not in in_cluster:
            out.append("  " + _mermaid_node(n, ids[key]))
    for a, b, style in v.edges:
        if a in ids and b in ids:
            out.append(f"  {ids[a]} {'-.-' if style == 'unresolved' else '-->'} {ids[b]}")
    for key, n in v.nodes.items():
        out.append(f"  class {ids[key]} {n.status}")
    return "\n".join(out) + "\n"


def _mermaid_node(n: Node, node_id: str) -> str:
    label = "<br/>".join([f"<b>{_m(n.title)}</b>", *(_m(x) for x in n.lines)])
    shape = {"dataset": ('[("', '")]'), "unresolved": ('>"', '"]'), "operator": ('("', '")')}.get(n.kind, ('["', '"]'))
    return f"{node_id}{shape[0]}{label}{shape[1]}"


def _m(text: str) -> str:
    """Text inside a quoted Mermaid label: entity codes for the characters Mermaid would parse."""
    out = []
    for ch in text.replace("\n", " "):
        out.append(f"#{ord(ch)};" if ch in '"#<>&;`[]{}()|' else ch)
    return "".join(out)


# --- HTML ---------------------------------------------------------------------------------------


def html_page(doc: Mapping[str, Any], title: str = "lakeflow lineage") -> str:
    """One self-contained page: the laid-out SVG, the node details, inline CSS and JS."""
    v = view(doc)
    picture = svg(v)
    # keyed by the SVG <title> of each node and cluster: its key
    data = json.dumps({"nodes": v.details}, sort_keys=True, ensure_ascii=False)
    data = data.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    s = v.summary
    counts = [
        f"{s['flink_jobs']} Flink job{'s' if s['flink_jobs'] != 1 else ''}",
        f"{s['compaction_jobs']} compaction job{'s' if s['compaction_jobs'] != 1 else ''}",
        f"{s['runs']} run{'s' if s['runs'] != 1 else ''}",
        f"{s['datasets']} dataset{'s' if s['datasets'] != 1 else ''}",
        f"{s['unresolved']} unresolved reference{'s' if s['unresolved'] != 1 else ''}",
    ]
    failed = "".join(f"<li>job <code>{_e(jid)}</code> could not be read: {_e(err)}</li>" for jid, err in v.failed_jobs)
    legend = "".join(
        f'<span class="key"><i style="background:{COLOURS[k][0]};border-color:{COLOURS[k][1]}"></i>{label}</span>'
        for k, label in (
            ("success", "finished"),
            ("failure", "failed"),
            ("live", "running"),
            ("skipped", "cancelled"),
            ("dataset", "dataset"),
            ("unresolved", "unresolved"),
        )
    )
    return _PAGE.format(
        title=_e(title),
        counts=_e(" · ".join(counts)),
        legend=legend,
        failed=f'<ul class="failed">{failed}</ul>' if failed else "",
        svg=picture,
        data=data,
        css=_CSS,
        js=_JS,
    )


def _e(text: str) -> str:
    return html.escape(text, quote=True)


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
<header>
<h1>{title}</h1>
<p class="counts">{counts}</p>
<p class="legend">{legend}<button type="button" id="fit" aria-pressed="true">fit to window</button></p>
{failed}
</header>
<main>
<div id="graph" class="fit">
{svg}</div>
<aside id="details" aria-live="polite"><p class="hint">Click a job, operator, dataset or unresolved reference to see its details.</p></aside>
</main>
<script type="application/json" id="lineage-data">{data}</script>
<script>{js}</script>
</body>
</html>
"""

_CSS = """
html,body{height:100%}
body{margin:0;display:flex;flex-direction:column;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#202124;background:#fafafa}
header{padding:10px 16px;border-bottom:1px solid #dadce0;background:#fff}
h1{font-size:18px;margin:0 0 4px}
.counts{margin:0;color:#3c4043}
.legend{margin:6px 0 0;color:#5f6368;font-size:12px}
.key{margin-right:12px;white-space:nowrap}
.key i{display:inline-block;width:12px;height:12px;border:1.5px solid;border-radius:3px;vertical-align:-2px;margin-right:4px}
#fit{font:inherit;font-size:12px;margin-left:8px}
.failed{color:#d93025;margin:6px 0 0}
main{display:flex;flex:1 1 auto;min-height:0}
#graph{flex:1 1 auto;overflow:auto;padding:8px;min-width:0}
#graph.fit svg{max-width:100%;height:auto}
#graph g.node,#graph g.cluster{cursor:pointer}
#graph g.node:focus,#graph g.cluster:focus{outline:none}
#graph g.selected>path,#graph g.selected>polygon,#graph g.selected>ellipse,#graph g.selected a>path,#graph g.selected a>polygon{stroke-width:3.5}
#details{flex:0 0 440px;overflow:auto;border-left:1px solid #dadce0;background:#fff;padding:12px 16px;box-sizing:border-box}
#details h2{font-size:16px;margin:0 0 8px;overflow-wrap:anywhere}
#details .kind{margin:0;color:#5f6368;font-size:12px;text-transform:uppercase;letter-spacing:.04em}
#details h3{font-size:13px;margin:14px 0 4px}
#details dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 10px;margin:0}
#details dl.run{margin:0 0 8px;padding:6px 8px;border:1px solid #dadce0;border-radius:6px;font-size:13px}
#details dt{color:#5f6368}
#details dd{margin:0;overflow-wrap:anywhere}
#details ul{margin:0;padding-left:18px}
#details li{overflow-wrap:anywhere}
#details table{border-collapse:collapse;font-size:12px}
#details td,#details th{border:1px solid #dadce0;padding:2px 4px;vertical-align:top;text-align:left}
#details .runs{overflow-x:auto}
.hint{color:#5f6368}
"""

_JS = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("lineage-data").textContent).nodes;
  var panel = document.getElementById("details");
  var selected = null;
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function show(key, group) {
    var d = data[key];
    if (!d) return;
    panel.replaceChildren(el("p", d.kind, "kind"), el("h2", d.name));
    if (d.fields.length) {
      var dl = el("dl", null, "fields");
      d.fields.forEach(function (f) { dl.append(el("dt", f[0]), el("dd", f[1])); });
      panel.append(dl);
    }
    d.sections.forEach(function (s) {
      panel.append(el("h3", s.title));
      if (s.items) {
        var ul = el("ul");
        s.items.forEach(function (i) { ul.append(el("li", i)); });
        panel.append(ul);
      } else if (s.records) {
        s.records.forEach(function (r) {
          var dl = el("dl", null, "run");
          r.forEach(function (f) { dl.append(el("dt", f[0]), el("dd", f[1])); });
          panel.append(dl);
        });
      } else {
        var wrap = el("div", null, "runs"), table = el("table"), head = el("tr");
        s.columns.forEach(function (c) { head.append(el("th", c)); });
        table.append(head);
        s.rows.forEach(function (r) {
          var tr = el("tr");
          r.forEach(function (c) { tr.append(el("td", c)); });
          table.append(tr);
        });
        wrap.append(table);
        panel.append(wrap);
      }
    });
    panel.dataset.node = key;
    if (selected) selected.classList.remove("selected");
    selected = group;
    group.classList.add("selected");
  }
  document.querySelectorAll("#graph g.node, #graph g.cluster").forEach(function (g) {
    var t = g.querySelector("title");
    if (!t || !data[t.textContent]) return;
    var key = t.textContent;
    g.setAttribute("tabindex", "0");
    g.setAttribute("role", "button");
    g.addEventListener("click", function (ev) { ev.stopPropagation(); show(key, g); });
    g.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); show(key, g); }
    });
  });
  var fit = document.getElementById("fit"), graph = document.getElementById("graph");
  fit.addEventListener("click", function () {
    var on = graph.classList.toggle("fit");
    fit.setAttribute("aria-pressed", String(on));
    fit.textContent = on ? "fit to window" : "actual size";
  });
})();
"""
