"""A new user's first hour: ``lakeflow demo`` (``make demo``) end to end with real processes, Ctrl+C
stopping its cluster; the prerequisite checks the Makefile runs first; the compaction named by the
engine that ran it; every command saying what comes next.

Unit tests: they start no process. The real-process tests: tests/integration/test_demo.py."""

from __future__ import annotations

import sys
from pathlib import Path

from lakeflow import prereqs
from lakeflow.lineage.emit_json import document
from lakeflow.lineage.graph import build
from lakeflow.lineage.spark import merge

ROOT = Path(__file__).resolve().parents[2]


def test_python_outside_requires_python_is_named_with_what_to_install() -> None:
    assert prereqs.python_range() == ((3, 11), (3, 12))
    assert prereqs.python_problem((3, 11), "python3") is None
    for version in ((3, 10), (3, 12)):  # 3.10 has no typing.Self
        message = prereqs.python_problem(version, "/usr/bin/python3")
        assert message and "lakeflow needs Python 3.11; /usr/bin/python3 is 3.1" in message
        assert "make run PYTHON=python3.11" in message


def test_another_os_than_linux_is_refused_in_one_line() -> None:
    assert prereqs.os_problem("linux") is None
    message = prereqs.os_problem("darwin")
    assert message and "lakeflow needs Linux" in message and "/proc" in message and "darwin" in message
    assert "\n" not in message


def _events(engine: str | None) -> list[dict]:
    base = {"job": {"namespace": "lakeflow", "name": "compact.iot.t"}, "inputs": [], "outputs": []}
    end = {**base, "eventType": "COMPLETE", "eventTime": "2026-11-23T00:00:01Z", "run": {"runId": "r1", "facets": {}}}
    if engine:
        end["run"]["facets"]["processing_engine"] = {"name": engine, "version": "1"}
    return [{**base, "eventType": "START", "eventTime": "2026-11-23T00:00:00Z", "run": {"runId": "r1"}}, end]


def test_events_without_the_engine_say_compaction_only() -> None:
    (run,) = merge(_events(None))
    assert "engine" not in run.properties
    doc = document(build([], [run], vertex_granularity=False, rest_url=""))
    assert doc["flows"][0]["description"].startswith("compaction job (from")


def test_compaction_events_carry_the_engine_and_lakeflow_as_integration() -> None:
    from lakeflow.compaction.lineage import INTEGRATION, engine_facet

    assert INTEGRATION == "LAKEFLOW"
    facet = engine_facet("arrow")
    assert facet is not None and facet.name == "arrow" and facet.version[0].isdigit()
    assert engine_facet("") is None


def test_every_step_names_the_next_commands() -> None:
    from lakeflow.cli.compact import next_steps as after_compact
    from lakeflow.cli.lineage import next_steps as after_harvest

    sys.path.insert(0, str(ROOT / "jobs"))
    try:
        import sensor_ingest
    finally:
        sys.path.remove(str(ROOT / "jobs"))
    assert "make compact" in sensor_ingest.next_steps(False) and "lakeflow query" in sensor_ingest.next_steps(False)
    assert "make harvest" in sensor_ingest.next_steps(True)
    assert "lakeflow query" in after_compact()[0] and "lineage view" in after_compact()[1]
    assert after_harvest("html", "x/l.html").startswith("Next: open file:///") and "browser" in after_harvest("html", "p")
    assert "lineage view --harvest h.json" in after_harvest("json", "h.json")
