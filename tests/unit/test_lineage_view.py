"""The lineage picture: ``lakeflow harvest --format html|dot|mermaid`` and ``lakeflow lineage view``.

Unit tests: they start no process. The real-process tests: tests/integration/test_lineage_view.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from xml.etree import ElementTree

import pytest

from lakeflow.cli import main
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
