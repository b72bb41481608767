"""A new user's first hour: ``lakeflow demo`` (``make demo``) end to end with real processes, Ctrl+C
stopping its cluster; the prerequisite checks the Makefile runs first; the compaction named by the
engine that ran it; every command saying what comes next.

Unit tests: they start no process. The real-process tests: tests/integration/test_demo.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

from lakeflow import prereqs
from lakeflow.lineage.emit_json import document
from lakeflow.lineage.graph import build
from lakeflow.lineage.stored_runs import merge


def test_the_kafka_demo_produces_readings_its_job_accepts() -> None:
    """What the demo's producer writes fits the default schema's record contract (what KafkaReadings
    checks), its values around the hints' baselines; the job's settings load as SOURCE=kafka."""
    from lakeflow import demo
    from lakeflow.ingest.kafka import KafkaInput
    from lakeflow.ingest.sensors import DailyCycle, parse_hint
    from lakeflow.schema import load_schema
    from lakeflow.schema.records import RecordContract
    from lakeflow.settings import load_settings
    from lakeflow.streams import load_pipeline

    schema = load_schema()
    contract = RecordContract(schema.contract())
    readings = [json.loads(m) for m in demo.synthetic_readings(50)]
    assert [list(r) for r in readings] == [list(schema.names)] * 50
    assert [r["seq"] for r in readings] == list(range(50)) and len({r["run_id"] for r in readings}) == 1
    cycles = {name: parse_hint(rules.generate, name) for name, rules in schema.rules.items()}
    cycles = {name: hint for name, hint in cycles.items() if isinstance(hint, DailyCycle)}
    assert len(cycles) == 3
    for r in readings:
        contract.check(r)
        for name, cycle in cycles.items():
            assert abs(r[name] - cycle.base(r["seq"] % demo.SENSORS)) <= abs(cycle.amplitude) + cycle.noise / 2 + 0.01
    topic = demo.Topic("127.0.0.1:39092", demo.TOPIC)
    assert str(topic) == "kafka://127.0.0.1:39092/sensor-readings"
    settings = load_settings(demo.kafka_environment(topic), env_file=Path(os.devnull))
    source = KafkaInput.from_settings(settings)
    (stream,) = load_pipeline(settings).streams()
    assert source is not None and (source.bootstrap_servers, stream.topics, source.stop_at_latest) == (
        "127.0.0.1:39092", ("sensor-readings",), True)
    assert f"{source.namespace}/{stream.topics[0]}" == str(topic)  # the name the page shows


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
    from lakeflow.cli.ingest import next_steps as after_ingest
    from lakeflow.cli.lineage import next_steps as after_harvest

    assert "make compact" in after_ingest(False) and "lakeflow query" in after_ingest(False)
    assert "make harvest" in after_ingest(True)
    assert "lakeflow query" in after_compact()[0] and "lineage view" in after_compact()[1]
    assert after_harvest("html", "x/l.html").startswith("Next: open file:///") and "browser" in after_harvest("html", "p")
    assert "lineage view --harvest h.json" in after_harvest("json", "h.json")
