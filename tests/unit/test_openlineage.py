"""OpenLineage events built with openlineage-python: every event lakeflow writes (the compaction's
run events in the lineage store, ``lakeflow harvest --format openlineage``) and sends
(``--openlineage-url``, to a recording stand-in of a Marquez / DataHub lineage endpoint) validates
against the OpenLineage JSON schema, offline (``tests/contracts/openlineage/``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

from lakeflow.cli.main import main
from lakeflow.lineage import openlineage as ol
from lakeflow.lineage.datasets import catalog_alias, from_location
from lakeflow.lineage.store import read_events
from tests.standins.http_stub import FixedServer, QuietHandler, serve, stop, url_of

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = [*sorted((ROOT / "tests" / "contracts" / "openlineage").glob("*.json")),
           *sorted((ROOT / "docs" / "openlineage").glob("*.json"))]
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


# --- the schema check ---------------------------------------------------------------------------

def _registry() -> tuple[Registry, dict[str, dict]]:
    docs = {}
    for path in SCHEMAS:
        doc = json.loads(path.read_text())
        docs[doc["$id"]] = doc
    return Registry().with_resources((i, Resource.from_contents(d)) for i, d in docs.items()), docs


REGISTRY, DOCUMENTS = _registry()


def _validator(ref: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": ref}, registry=REGISTRY, format_checker=FormatChecker())


def schema_errors(event: dict[str, Any]) -> list[str]:
    """Every way ``event`` breaks the OpenLineage schema: the RunEvent against the core spec, then
    each facet against the document its ``_schemaURL`` names (a facet whose schema is unknown is an
    error), under the key that document declares."""
    errors = [f"RunEvent: {e.json_path}: {e.message}" for e in _validator(f"{CORE}#/$defs/RunEvent").iter_errors(event)]
    if event.get("schemaURL") != f"{CORE}#/$defs/RunEvent":
        errors.append(f"schemaURL {event.get('schemaURL')!r} is not the RunEvent of {CORE}")
    facet_maps = [("run", (event.get("run") or {}).get("facets")), ("job", (event.get("job") or {}).get("facets"))]
    for side in ("inputs", "outputs"):
        for i, d in enumerate(event.get(side) or ()):
            facet_maps.append((f"{side}[{i}]", d.get("facets")))
            facet_maps.append((f"{side}[{i}]", d.get("inputFacets" if side == "inputs" else "outputFacets")))
    for where, facets in facet_maps:
        for key, facet in (facets or {}).items():
            url = str(facet.get("_schemaURL", "")) if isinstance(facet, dict) else ""
            doc_id, _, pointer = url.partition("#")
            if doc_id not in DOCUMENTS:
                errors.append(f"{where} facet {key}: no schema document for _schemaURL {url!r}")
                continue
            if key not in DOCUMENTS[doc_id].get("properties", {}):
                errors.append(f"{where} facet {key}: {doc_id} declares {sorted(DOCUMENTS[doc_id]['properties'])}")
            errors += [f"{where} facet {key}: {e.json_path}: {e.message}"
                       for e in _validator(f"{doc_id}#{pointer}").iter_errors(facet)]
    return errors


def assert_valid(events: list[dict[str, Any]]) -> None:
    assert events
    problems = {i: schema_errors(e) for i, e in enumerate(events)}
    assert not any(problems.values()), {i: p for i, p in problems.items() if p}


def test_the_schema_documents_are_the_ones_the_events_name():
    assert CORE in DOCUMENTS
    for facet in ("LakeflowRunFacet", "LakeflowCompactionRunFacet"):  # lakeflow's: $id = the _schemaURL stamped
        assert DOCUMENTS[f"{ol.FACETS_URL}/{facet}.json"]["$id"] == f"{ol.FACETS_URL}/{facet}.json"
    event = ol.to_dict(ol.run_event("START", run_id="0199b0a4-6f1c-7000-8000-00000000000c", job_namespace="n",
                                    job_name="j"))
    assert event["schemaURL"] == f"{CORE}#/$defs/RunEvent" and not schema_errors(event)


@pytest.mark.parametrize("break_it, expected", [
    (lambda e: e["run"].pop("runId"), "'runId' is a required property"),
    (lambda e: e["run"].update(runId="not-a-uuid"), "is not a 'uuid'"),
    (lambda e: e.update(eventType="DONE"), "is not one of"),
    (lambda e: e.update(eventTime="yesterday"), "is not a 'date-time'"),
    (lambda e: e["run"]["facets"]["errorMessage"].pop("_producer"), "'_producer' is a required property"),
    (lambda e: e["run"]["facets"]["errorMessage"].pop("programmingLanguage"), "'programmingLanguage' is a required"),
    (lambda e: e["inputs"][0]["facets"]["symlinks"]["identifiers"][0].pop("type"), "'type' is a required property"),
    (lambda e: e["outputs"][0]["outputFacets"]["outputStatistics"].update(rowCount="many"), "is not of type 'integer'"),
    (lambda e: e["run"]["facets"].update(mine={"_producer": "x", "_schemaURL": "https://example.com/x.json"}),
     "no schema document"),
    (lambda e: e["run"]["facets"].update(oops=e["run"]["facets"]["errorMessage"]), "declares ['errorMessage']"),
])
def test_the_schema_check_catches_broken_events(break_it, expected):
    raw, ice = from_location("/data/raw"), from_location("/data/ice")
    event = ol.to_dict(ol.run_event(
        "FAIL", run_id="0199b0a4-6f1c-7000-8000-00000000000d", job_namespace="lakeflow", job_name="j",
        inputs=[ol.input_dataset(raw, [catalog_alias("http://c", "w", "iot", "raw")], rows=1)],
        outputs=[ol.output_dataset(ice, rows=1, size=2, files=1)],
        run_facets={"errorMessage": ol.error_message("boom", "python")}))
    assert not schema_errors(event)
    break_it(event)
    assert any(expected in p for p in schema_errors(event)), schema_errors(event)


# --- the compaction's events (lakeflow.compaction.lineage, real catalog) -------------------------

def _compaction(tmp_path: Path):
    from lakeflow.catalog.local import LocalCatalog
    from lakeflow.compaction.commit import iceberg_catalog, open_target
    from lakeflow.compaction.config import load_config
    from lakeflow.compaction.report import CompactionReport
    from lakeflow.compaction.source import raw_table

    env = {"LAKEFLOW_HOME": str(tmp_path / "home"), "LAKEFLOW_ENV_FILE": str(tmp_path / "none.env")}
    config = load_config(env=env)
    raw = raw_table(LocalCatalog(config.settings.home).register(("iot",), "sensor-readings"))
    target = open_target(iceberg_catalog(config.settings), ("iot",), config.target_table, raw.location, config.schema)
    return config, raw, target, CompactionReport(run_id=config.run_id, source=raw.location, target=config.target_name)


def test_compaction_events_are_openlineage_python_models_and_validate(tmp_path):
    from openlineage.client.event_v2 import RunEvent

    from lakeflow.compaction.lineage import LineageRun, lineage_run

    config, raw, target, report = _compaction(tmp_path)
    assert isinstance(LineageRun(config, raw, target, report).event("START", {}, False), RunEvent)
    with lineage_run(config, raw, target, report):
        report.files_in, report.rows_in, report.rows_out, report.bytes_in, report.bytes_out = 3, 10, 9, 300, 120
        report.quarantined.append({"file": "part-0-1.json", "reason": "not JSON"})
    config2, raw2, target2, report2 = _compaction(tmp_path)  # a second run id, which fails
    with pytest.raises(RuntimeError, match="boom"):
        with lineage_run(config2, raw2, target2, report2):
            raise RuntimeError("boom")
    events = list(read_events(config.settings.lineage_dir))
    assert sorted(e["eventType"] for e in events) == ["COMPLETE", "FAIL", "START", "START"]
    assert_valid(events)
    done = next(e for e in events if e["eventType"] == "COMPLETE")
    assert done["run"]["facets"]["lakeflow_compaction"]["quarantined"] == [{"file": "part-0-1.json",
                                                                           "reason": "not JSON"}]
    assert done["inputs"][0]["inputFacets"]["inputStatistics"] == {
        "_producer": ol.PRODUCER, "fileCount": 3, "rowCount": 10, "size": 300,
        "_schemaURL": "https://openlineage.io/spec/facets/1-0-0/InputStatisticsInputDatasetFacet.json"
                      "#/$defs/InputStatisticsInputDatasetFacet"}
    failed = next(e for e in events if e["eventType"] == "FAIL")
    assert failed["run"]["facets"]["errorMessage"]["message"] == "RuntimeError: boom"


# --- lakeflow harvest --format openlineage / --openlineage-url ----------------------------------

def _store(tmp_path: Path, scenario: dict) -> Path:
    store = tmp_path / "lineage"
    raw = from_location(scenario["location"])
    common = dict(run_id="0199b0a4-6f1c-7000-8000-000000000001", job_namespace="lakeflow", job_name="compaction")
    for kind, minute, rows in (("START", 0, None), ("COMPLETE", 1, 40)):
        ol.write_event(store, ol.run_event(
            kind, event_time=datetime(2026, 11, 22, 1, minute, tzinfo=timezone.utc),
            inputs=[ol.input_dataset(raw, [catalog_alias(scenario["catalog_uri"], "local", "iot", "sensor-readings")],
                                     rows=rows, size=rows and 4000)],
            outputs=[ol.output_dataset(from_location("/tmp/ice/iot/sensor_readings"), rows=rows, size=rows and 900)],
            **common))
    return store


def _harvest_events(stub, tmp_path: Path, *extra: str) -> tuple[int, list[dict]]:
    out = tmp_path / "events.jsonl"
    code = main(["harvest", "--rest-url", stub.url, "--format", "openlineage", "--output", str(out), *extra])
    return code, [json.loads(line) for line in out.read_text().splitlines()]


def test_harvested_events_validate_and_carry_the_compaction_figures(recorded_jobmanager, recorded_gateway,
                                                                    recorded_scenario, tmp_path):
    code, events = _harvest_events(recorded_jobmanager, tmp_path, "--sql-gateway-url", recorded_gateway.url,
                                   "--lineage-dir", str(_store(tmp_path, recorded_scenario)))
    assert code == 0
    assert_valid(events)
    assert len(events) == 7 + 6 + 2  # a START per run, an end per finished run; the compaction's two
    spark = [e for e in events if e["job"]["name"] == "compaction"]
    assert [e["eventType"] for e in spark] == ["START", "COMPLETE"]
    figures = spark[-1]["run"]["facets"]["lakeflow_run"]
    assert (figures["records_in"], figures["records_out"], figures["bytes_in"], figures["bytes_out"]) == (40, 40, 4000, 900)
    assert all(e["job"]["facets"]["jobType"]["integration"] in ("FLINK", "COMPACTION") for e in events)


@dataclass
class LineageEndpoint:
    """A recording stand-in of an OpenLineage HTTP endpoint (Marquez ``POST /api/v1/lineage``,
    DataHub ``POST /openapi/openlineage/api/v1/lineage``): stores each event, answers 201."""

    path: str = "/api/v1/lineage"
    api_key: Optional[str] = None
    fail_first: int = 0  # answer 503 (Retry-After: 0) to the first N posts
    status: int = 201
    events: list[dict[str, Any]] = field(default_factory=list)
    posts: int = 0
    server: Any = None

    @property
    def url(self) -> str:
        return url_of(self.server)

    def start(self) -> "LineageEndpoint":
        endpoint = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                endpoint.posts += 1
                if self.path != endpoint.path:
                    return self._send(404, b'{"error": "not found"}')
                if self.headers.get("Content-Type") != "application/json":
                    return self._send(415, b'{"error": "json only"}')
                if endpoint.api_key and self.headers.get("Authorization") != f"Bearer {endpoint.api_key}":
                    return self._send(401, b'{"error": "unauthorized"}')
                if endpoint.posts <= endpoint.fail_first:
                    return self._send(503, b'{"error": "busy"}', (("Retry-After", "0"),))
                if endpoint.status >= 400:
                    return self._send(endpoint.status, b'{"error": "invalid event"}')
                endpoint.events.append(json.loads(body))
                return self._send(endpoint.status, b"")

            def _send(self, status: int, data: bytes, headers=()) -> None:
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = serve(Handler)
        return self

    def stop(self) -> None:
        stop(self.server)


@pytest.fixture
def endpoint():
    e = LineageEndpoint(api_key="ol-key-Zq81", fail_first=1).start()
    yield e
    e.stop()


def test_openlineage_url_posts_every_event_through_the_http_transport(recorded_jobmanager, recorded_scenario,
                                                                      endpoint, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENLINEAGE_API_KEY", "ol-key-Zq81")
    code, written = _harvest_events(recorded_jobmanager, tmp_path, "--openlineage-url", endpoint.url,
                                    "--lineage-dir", str(_store(tmp_path, recorded_scenario)))
    assert code == 0
    assert endpoint.events == written  # the 503 was retried; every event arrived once, as written
    assert_valid(endpoint.events)
    err = capsys.readouterr().err
    assert f"sent {len(written)} OpenLineage events to {endpoint.url}" in err and "ol-key-Zq81" not in err


def test_datahub_endpoint_and_any_output_format(recorded_jobmanager, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENLINEAGE_API_KEY", raising=False)
    datahub = LineageEndpoint(path="/openapi/openlineage/api/v1/lineage", status=200).start()
    try:
        out = tmp_path / "h.json"
        assert main(["harvest", "--rest-url", recorded_jobmanager.url, "--output", str(out), "--openlineage-url",
                     f"{datahub.url}/", "--openlineage-endpoint", "/openapi/openlineage/api/v1/lineage"]) == 0
        assert json.loads(out.read_text())["jobs"]  # the JSON output, and the events on the side
        assert len(datahub.events) == 13
        assert_valid(datahub.events)
    finally:
        datahub.stop()


def test_openlineage_url_failures_are_one_clear_error(recorded_jobmanager, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENLINEAGE_API_KEY", "ol-key-Zq81")
    refusing = LineageEndpoint(status=400).start()
    elsewhere = FixedServer(201).start()
    redirecting = FixedServer(307, (("Location", f"{elsewhere.url}/api/v1/lineage"),)).start()
    try:
        args = ["harvest", "--rest-url", recorded_jobmanager.url, "--output", str(tmp_path / "x"), "--max-retries", "0"]
        assert main([*args, "--openlineage-url", refusing.url]) == 2
        assert f"OpenLineage POST {refusing.url}/api/v1/lineage: HTTP 400" in capsys.readouterr().err
        host = redirecting.url.removeprefix("http://")
        assert main([*args, "--openlineage-url", f"http://me:pa55-Ww31@{host}"]) == 2
        err = capsys.readouterr().err
        assert f"OpenLineage POST http://me:***@{host}/api/v1/lineage" in err and "redirected to" in err
        assert "pa55-Ww31" not in err and "ol-key-Zq81" not in err
        assert elsewhere.received == []  # the key went to the configured origin only
    finally:
        for s in (refusing, elsewhere, redirecting):
            s.stop()


def test_the_file_transport_writes_what_is_sent(recorded_jobmanager, tmp_path):
    from openlineage.client.serde import Serde

    code, events = _harvest_events(recorded_jobmanager, tmp_path)
    assert code == 0
    text = (tmp_path / "events.jsonl").read_text()
    assert text == "".join(Serde.to_json(e) + "\n" for e in events)  # the library's own serialization
    assert not list(tmp_path.glob(".events.jsonl*"))  # written to a temporary file, renamed


def test_a_runs_events_of_the_same_time_are_read_start_first(tmp_path):
    """A run fast enough that its START and COMPLETE share a time stamp: the store still reads START first
    (the file names alone sort COMPLETE before START), and earlier times before later ones."""
    from lakeflow.lineage.store import write

    def event(kind: str, time: str, run: str) -> dict:
        return {"eventType": kind, "eventTime": time, "run": {"runId": run}, "job": {"namespace": "n", "name": "j"}}

    for e in (event("COMPLETE", "2026-12-02T09:00:00.123Z", "r1"), event("START", "2026-12-02T09:00:00.123Z", "r1"),
              event("FAIL", "2026-12-02T09:00:01.000Z", "r0"), event("START", "2026-12-02T09:00:00.500Z", "r0")):
        write(tmp_path, e)
    assert [(e["run"]["runId"], e["eventType"]) for e in read_events(tmp_path)] == [
        ("r1", "START"), ("r1", "COMPLETE"), ("r0", "START"), ("r0", "FAIL")]


def test_a_whole_second_named_without_its_milliseconds_is_read_first_of_its_second(tmp_path):
    """Earlier listeners named a whole second ``…T090000Z`` (ISO_INSTANT drops ``.000``), which sorts after
    every ``…T090000123Z`` of that second: the store reads it as ``.000``."""
    from lakeflow.lineage.store import write

    start = {"eventType": "START", "eventTime": "2026-12-02T09:00:00Z", "run": {"runId": "r"},
             "job": {"namespace": "flink", "name": "j"}}
    write(tmp_path, start)
    write(tmp_path, {**start, "eventType": "COMPLETE", "eventTime": "2026-12-02T09:00:00.007Z"})
    write(tmp_path, {**start, "eventType": "START", "eventTime": "2026-12-02T08:59:59.999Z", "run": {"runId": "q"}})
    assert sorted(p.name[:20] for p in tmp_path.glob("*.json"))[-1] == "20261202T090000Z-r-S"  # by name: last
    assert [(e["run"]["runId"], e["eventType"]) for e in read_events(tmp_path)] == [
        ("q", "START"), ("r", "START"), ("r", "COMPLETE")]
