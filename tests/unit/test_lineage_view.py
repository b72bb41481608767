"""The lineage picture: ``lakeflow harvest --format html|dot|mermaid`` and ``lakeflow lineage view``.

Unit tests: they start no process. The real-process tests: tests/integration/test_lineage_view.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from xml.etree import ElementTree

import pytest

from lakeflow.cli.main import main
from lakeflow.lineage import openlineage as ol
from lakeflow.lineage import render
from lakeflow.lineage.datasets import catalog_alias, from_location

SVG = "http://www.w3.org/2000/svg"


def _store(directory: Path, scenario: dict, run_id: str = "0199b0a4-6f1c-7000-8000-000000000001",
           day: int = 22, rows: int = 40) -> Path:
    """A compaction run of the scenario's raw table into an Iceberg table, in a lineage store."""
    raw = from_location(scenario["location"])
    ice = from_location("/tmp/lakeflow-harvest-recording/warehouse/iot/sensor_readings_compacted")
    alias = catalog_alias(scenario["catalog_uri"], "local", "iot", "sensor-readings")
    common = dict(run_id=run_id, job_namespace="lakeflow", job_name="compact.iot.sensor-readings-compacted")
    ol.write_event(directory, ol.run_event("START", event_time=datetime(2026, 11, day, 1, tzinfo=timezone.utc),
                                           inputs=[ol.input_dataset(raw, [alias])], outputs=[ol.output_dataset(ice)],
                                           **common))
    ol.write_event(directory, ol.run_event(
        "COMPLETE", event_time=datetime(2026, 11, day, 1, 2, tzinfo=timezone.utc),
        inputs=[ol.input_dataset(raw, [alias], rows=rows, size=rows * 100, files=2)],
        outputs=[ol.output_dataset(ice, rows=rows - 1, size=rows * 20, files=1)], **common))
    return directory


def _harvest(stub, tmp_path: Path, fmt: str, *extra: str, name: str = "h") -> Path:
    out = tmp_path / f"{name}.{fmt}"
    assert main(["harvest", "--rest-url", stub.url, "--format", fmt, "--output", str(out), *extra]) == 0
    return out


@pytest.fixture
def scenario_files(recorded_jobmanager, recorded_gateway, recorded_scenario, tmp_path):
    """The recorded scenario harvested (through the SQL Gateway, with a compaction run) as JSON and HTML."""
    extra = ("--sql-gateway-url", recorded_gateway.url, "--lineage-dir", str(_store(tmp_path / "lineage",
                                                                                     recorded_scenario)))
    doc = json.loads(_harvest(recorded_jobmanager, tmp_path, "json", *extra).read_text())
    return doc, _harvest(recorded_jobmanager, tmp_path, "html", *extra)


def expected_nodes(doc: dict) -> set[str]:
    """The node of every job (by name) and every dataset of a harvest."""
    return {f"{j['engine']}:{j['name']}" for j in doc["jobs"]} | {f"dataset:{d['name']}" for d in doc["datasets"]}


def test_dot_and_mermaid_draw_the_same_graph(scenario_files, recorded_jobmanager, recorded_gateway, recorded_scenario,
                                             tmp_path):
    doc, _ = scenario_files
    extra = ("--sql-gateway-url", recorded_gateway.url, "--lineage-dir", str(tmp_path / "lineage"))
    dot_text = _harvest(recorded_jobmanager, tmp_path, "dot", *extra).read_text()
    assert dot_text == render.dot(doc) and dot_text.startswith("digraph lineage {\n")
    for key in expected_nodes(doc):
        assert f'\n  "{key}" [id="n' in dot_text
    assert dot_text.count(" -> ") == len(doc["edges"]) + len({(j["name"], u) for j in doc["jobs"]
                                                              for u in j["unresolved"]})
    mermaid = _harvest(recorded_jobmanager, tmp_path, "mermaid", *extra).read_text()
    assert mermaid.startswith("flowchart LR\n") and mermaid == render.mermaid(doc)
    assert mermaid.count(" --> ") == len(doc["edges"])
    assert mermaid.count(" -.- ") == len({(j["name"], u) for j in doc["jobs"] for u in j["unresolved"]})
    assert '[("<b>sensor-readings</b>' in mermaid and '["<b>harvest-resubmitted</b>' in mermaid


def test_names_are_escaped_everywhere(tmp_path):
    odd = 'file:///data/a "quoted" <b>&amp; dir\\'
    doc = {"jobs": [{"engine": "flink", "name": 'job "x" <script>', "job_id": "j1", "state": "FAILED",
                     "inputs": [odd], "outputs": [], "unresolved": ["</script><script>alert(1)</script>"],
                     "skipped": [], "evidence": {odd: "plan"}}],
           "runs": [{"engine": "flink", "flow": 'job "x" <script>', "run_id": "j1", "state": "FAILED",
                     "result": "FAILURE", "type": "STREAMING", "start_ms": 1, "end_ms": 2, "restarts": 0,
                     "failure": "x < y & z", "records_in": 0, "records_out": 0, "bytes_in": 0, "bytes_out": 0,
                     "inputs": [odd], "outputs": []}],
           "datasets": [{"name": odd, "namespace": "file", "path": odd[7:], "aliases": [], "platform_instance": None}],
           "edges": [[f"dataset:{odd}", 'flink:job "x" <script>']], "failed_jobs": [{"job_id": "z", "error": "<b>"}]}
    titles = {t.text for t in ElementTree.fromstring(render.svg(render.view(doc))).iter(f"{{{SVG}}}title")}
    assert {f"dataset:{odd}", 'flink:job "x" <script>'} <= titles
    page = render.html_page(doc)
    script = page[page.index('<script type="application/json"'):]
    assert "</script><script>alert" not in page and script.count("</script>") == 2
    assert "<b>&amp;" not in page.split("<svg", 1)[0]  # the failed job's error is escaped too
    assert "#34;" in render.mermaid(doc) and '"quoted"' not in render.mermaid(doc)


def test_lineage_view_draws_a_saved_harvest_with_the_newer_store(scenario_files, recorded_scenario, tmp_path, capsys):
    doc, _ = scenario_files
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(doc))
    newer = _store(tmp_path / "newer", recorded_scenario)  # the same run, and a newer one
    _store(newer, recorded_scenario, run_id="0199b0a4-6f1c-7000-8000-000000000002", day=23, rows=80)
    out = tmp_path / "view.json"
    assert main(["lineage", "view", "--harvest", str(saved), "--lineage-dir", str(newer), "--format", "json",
                 "--output", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert {j["name"] for j in merged["jobs"] if j["engine"] == "flink"} == {j["name"] for j in doc["jobs"]
                                                                             if j["engine"] == "flink"}
    assert len([r for r in merged["runs"] if r["engine"] == "spark"]) == 2
    assert sorted(d["name"] for d in merged["datasets"]) == sorted(d["name"] for d in doc["datasets"])  # folded
    assert sorted(map(tuple, merged["edges"])) == sorted(map(tuple, doc["edges"]))
    html_out = tmp_path / "view.html"
    assert main(["lineage", "view", "--harvest", str(saved), "--lineage-dir", str(newer), "--output",
                 str(html_out)]) == 0
    assert f"wrote {html_out}" in capsys.readouterr().err
    text = html_out.read_text()
    assert "0199b0a4-6f1c-7000-8000-000000000002" in text and "<svg" in text

    store_only = tmp_path / "store.mmd"
    assert main(["lineage", "view", "--lineage-dir", str(newer), "--format", "mermaid", "--output",
                 str(store_only)]) == 0
    assert "lakeflow.compact.iot.sensor-readings-compacted" in store_only.read_text()
    assert main(["lineage", "view", "--harvest", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_lineage_view_without_a_harvest_or_a_store_says_what_to_give(tmp_path, monkeypatch, capsys):
    for name in ("LINEAGE_DIR", "LAKEFLOW_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LAKEFLOW_ENV_FILE", str(tmp_path / "none.env"))
    monkeypatch.chdir(tmp_path)  # no ./.lakeflow/lineage here
    assert main(["lineage", "view", "--format", "json"]) == 2
    assert "nothing to draw: give --harvest FILE" in capsys.readouterr().err


def test_the_page_needs_no_graphviz(recorded_jobmanager, tmp_path, monkeypatch):
    """The layout is Python's (grandalf): with nothing at all on PATH the page is still drawn."""
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot, no other program
    page = _harvest(recorded_jobmanager, tmp_path, "html").read_text()
    svg = ElementTree.fromstring(page[page.index("<svg"):page.index("</svg>") + len("</svg>")])
    nodes = {g.find(f"{{{SVG}}}title").text for g in svg.iter(f"{{{SVG}}}g") if "node" in g.get("class").split()}
    assert nodes and all(t.startswith(("flink:", "dataset:", "unresolved:")) for t in nodes)


def _assert_readable(doc: dict) -> render.Layout:
    """No two node boxes overlap, no box overlaps a cluster it is not in, and each edge of the
    (acyclic) lineage runs from a box to one wholly to its right."""
    v = render.view(doc)
    placed = render.arrange(v)
    assert set(placed.nodes) == set(v.nodes) and set(placed.clusters) == {c.key for c in v.clusters}
    boxes = sorted(placed.nodes.items())
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            assert not box_a.overlaps(box_b), (a, box_a, b, box_b)
    members = {c.key: set(c.nodes) for c in v.clusters}
    for c, cbox in placed.clusters.items():
        for key, box in placed.nodes.items():
            inside = cbox.x < box.x and box.x + box.w < cbox.x + cbox.w and cbox.y < box.y and (
                box.y + box.h < cbox.y + cbox.h)
            assert inside if key in members[c] else not cbox.overlaps(box), (c, key)
    for a, b, _ in v.edges:
        src, dst = placed.nodes[a], placed.nodes[b]
        assert src.x + src.w < dst.x, (a, b)
        route = placed.routes[(a, b)]
        assert route[0] == pytest.approx((src.x + src.w, src.y + src.h / 2))
        assert route[-1] == pytest.approx((dst.x, dst.y + dst.h / 2))
        assert all(p[0] < q[0] for p, q in zip(route, route[1:]))  # left to right all the way
    assert 0 < max(b.x + b.w for b in placed.nodes.values()) < placed.width
    assert 0 < max(b.y + b.h for b in placed.nodes.values()) < placed.height
    return placed


def test_the_recorded_lineage_is_laid_out_readably(scenario_files, recorded_jobmanager, tmp_path):
    doc, _ = scenario_files
    _assert_readable(doc)
    vertex = json.loads(_harvest(recorded_jobmanager, tmp_path, "json", "--operator-granularity", "vertex",
                                 name="vertex").read_text())
    assert len(_assert_readable(vertex).clusters) == len({t["flow"] for t in vertex["tasks"]}) > 0


def test_a_wide_lineage_is_laid_out_readably():
    """A chain of 12 tables, each copied by two jobs and read by a fan of 6 more, one job reading
    three tables: long edges, wide columns, names of very different lengths."""
    jobs, edges = [], []
    for i in range(12):
        for j, out in ((f"copy-{i}", i + 1), (f"copy-{i}-{'x' * (i * 7)}", i + 1), *((f"fan-{i}-{k}", None)
                                                                                     for k in range(6))):
            jobs.append({"engine": "flink", "name": j, "job_id": j, "state": "FINISHED", "inputs": [f"t{i}"],
                         "outputs": [f"t{out}"] if out else [], "unresolved": [], "skipped": [], "evidence": {}})
            edges.append([f"dataset:t{i}", f"flink:{j}"])
            if out:
                edges.append([f"flink:{j}", f"dataset:t{out}"])
    jobs.append({"engine": "flink", "name": "join", "job_id": "join", "state": "RUNNING",
                 "inputs": ["t0", "t6", "t12"], "outputs": [], "unresolved": ["KafkaSink: no topic"],
                 "skipped": [], "evidence": {}})
    edges += [[f"dataset:t{i}", "flink:join"] for i in (0, 6, 12)]
    doc = {"jobs": jobs, "runs": [], "datasets": [{"name": f"t{i}"} for i in range(13)], "edges": edges}
    placed = _assert_readable(doc)
    assert len(placed.nodes) == 12 * 8 + 1 + 13 + 1 and len(placed.routes) == len(edges) + 1
