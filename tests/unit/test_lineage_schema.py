"""The table's schema in lineage: the compaction's run events carry OpenLineage's ``schema`` facet (the
raw table's declared fields, the Iceberg table's schema as the run left it), the harvest reads it back
(and the schema lakeflow's sink declares to Flink's native lineage), and writes it as DataHub's
``schemaMetadata``, in the JSON document, the re-emitted OpenLineage events and the page.

Schemas here are user-style ones declared as a JSON Schema text (nested struct, list of structs, map,
decimal, ISO-8601 timestamps), besides lakeflow's default sensor reading."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pyiceberg.types import BinaryType

from lakeflow.cli.main import main
from lakeflow.compaction.lineage import columns
from lakeflow.lineage import openlineage as ol
from lakeflow.lineage import render
from lakeflow.lineage.columns import Column, flat
from lakeflow.lineage.datasets import DatasetId, catalog_alias, from_location
from lakeflow.lineage.emit_datahub import schema_metadata
from lakeflow.lineage.emit_json import with_compaction_runs
from lakeflow.lineage.graph import Dataset
from lakeflow.lineage.store import JOB_NAMESPACE, read_events, write
from lakeflow.schema.declared import load_schema, parse_schema
from tests.unit.test_openlineage import assert_valid, schema_errors

VIBRATION = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "vibration sensor",
    "type": "object",
    "x-lakeflow": {"event-time": "measured_at", "key": ["device_id", "seq"], "partition-by": "day"},
    "required": ["device_id", "seq", "measured_at"],
    "properties": {
        "device_id": {"type": "string", "description": "the device's serial number"},
        "seq": {"type": "integer"},
        "measured_at": {"type": "string", "format": "date-time", "description": "when it was measured"},
        "battery": {"type": "number", "x-iceberg-type": "decimal(5,2)", "description": "volts"},
        "gps": {"type": "object", "description": "where it is",
                "properties": {"lat": {"type": "number", "description": "degrees north"}, "lon": {"type": "number"}}},
        "samples": {"type": "array", "items": {"type": "object", "properties": {
            "axis": {"type": "string"}, "g": {"type": "number", "x-iceberg-type": "float"}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "zones": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "since": {"type": "string", "format": "date-time"}}}},
    },
}
SCHEMA = parse_schema(json.dumps(VIBRATION), "vibration.schema.json")
V2 = "[version=2.0].[type=struct]"
SCHEMA_FACET = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json"


# --- the facet the compaction writes --------------------------------------------------------------

def test_iceberg_fields_become_the_facets_nested_columns():
    raw = ol.input_dataset(from_location("/raw"), columns=columns(SCHEMA.fields.fields))
    event = ol.run_event("START", run_id=str(uuid.uuid4()), job_namespace="n", job_name="j", inputs=[raw])
    facet = ol.to_dict(event)["inputs"][0]["facets"]["schema"]
    assert facet["_schemaURL"] == f"{SCHEMA_FACET}#/$defs/SchemaDatasetFacet"
    fields = {f["name"]: f for f in facet["fields"]}
    assert list(fields) == ["device_id", "seq", "measured_at", "battery", "gps", "samples", "labels", "zones"]
    assert fields["device_id"] == {"name": "device_id", "type": "string", "description": "the device's serial number"}
    assert (fields["seq"]["type"], fields["measured_at"]["type"], fields["battery"]) == (
        "long", "timestamptz", {"name": "battery", "type": "decimal(5,2)", "description": "volts"})
    assert fields["gps"] == {"name": "gps", "type": "struct<lat: double, lon: double>", "description": "where it is",
                             "fields": [{"name": "lat", "type": "double", "description": "degrees north"},
                                        {"name": "lon", "type": "double"}]}
    assert fields["samples"] == {"name": "samples", "type": "list<struct<axis: string, g: float>>", "fields": [
        {"name": "_element", "type": "struct<axis: string, g: float>",
         "fields": [{"name": "axis", "type": "string"}, {"name": "g", "type": "float"}]}]}
    assert fields["labels"]["fields"] == [{"name": "key", "type": "string"}, {"name": "value", "type": "string"}]
    assert fields["zones"]["fields"][1] == {"name": "value", "type": "struct<since: timestamptz>",
                                            "fields": [{"name": "since", "type": "timestamptz"}]}


def _compaction(tmp_path: Path, schema_text: str | None):
    from lakeflow.catalog.local import LocalCatalog
    from lakeflow.compaction.commit import iceberg_catalog, open_target
    from lakeflow.compaction.config import load_config
    from lakeflow.compaction.report import CompactionReport
    from lakeflow.compaction.source import raw_table

    env = {"LAKEFLOW_HOME": str(tmp_path / "home"), "LAKEFLOW_ENV_FILE": str(tmp_path / "none.env")}
    if schema_text is not None:
        (tmp_path / "table.schema.json").write_text(schema_text)
        env["TABLE_SCHEMA"] = str(tmp_path / "table.schema.json")
    config = load_config(env=env)
    raw = raw_table(LocalCatalog(config.settings.home).register(("iot",), "sensor-readings"))
    target = open_target(iceberg_catalog(config.settings), ("iot",), config.target_table, raw.location, config.schema)
    return config, raw, target, CompactionReport(run_id=config.run_id, source=raw.location, target=config.target_name)


def test_the_compactions_events_carry_both_tables_schemas_and_validate(tmp_path):
    from lakeflow.compaction.lineage import lineage_run

    config, raw, target, report = _compaction(tmp_path, json.dumps(VIBRATION))
    with lineage_run(config, raw, target, report):
        with target.table.update_schema() as update:  # the table evolves in the run (another writer's type too)
            update.add_column("firmware", BinaryType(), doc="added by the run")
        report.files_in = 1  # the run consumed a file
    events = {e["eventType"]: e for e in read_events(config.settings.lineage_dir)}
    assert_valid(list(events.values()))
    declared = [f["name"] for f in events["START"]["inputs"][0]["facets"]["schema"]["fields"]]
    assert declared == list(SCHEMA.names)
    assert events["COMPLETE"]["inputs"][0]["facets"]["schema"] == events["START"]["inputs"][0]["facets"]["schema"]
    assert "schema" not in events["START"]["outputs"][0]["facets"]  # the table's schema: once the run is done
    written = events["COMPLETE"]["outputs"][0]["facets"]["schema"]["fields"]
    assert [f["name"] for f in written] == [*SCHEMA.names, "firmware"]
    assert written[-1] == {"name": "firmware", "type": "binary", "description": "added by the run"}
    assert written[4]["fields"][0] == {"name": "lat", "type": "double", "description": "degrees north"}


def test_a_run_that_found_nothing_new_writes_no_event(tmp_path):
    """A service over idle tables would otherwise add two files a table each period to the store."""
    from lakeflow.compaction.lineage import lineage_run

    config, raw, target, report = _compaction(tmp_path, None)
    with lineage_run(config, raw, target, report):
        pass
    assert report.status == "complete" and list(read_events(config.settings.lineage_dir)) == []
    with lineage_run(config, raw, target, report):
        report.files_in = 2
    assert [e["eventType"] for e in read_events(config.settings.lineage_dir)] == ["START", "COMPLETE"]


def test_the_default_schemas_derived_time_column_is_the_iceberg_tables_only(tmp_path):
    from lakeflow.compaction.lineage import lineage_run

    config, raw, target, report = _compaction(tmp_path, None)
    with pytest.raises(RuntimeError, match="boom"):
        with lineage_run(config, raw, target, report):
            raise RuntimeError("boom")
    (failed,) = [e for e in read_events(config.settings.lineage_dir) if e["eventType"] == "FAIL"]
    assert_valid([failed])
    raw_fields = [f["name"] for f in failed["inputs"][0]["facets"]["schema"]["fields"]]
    table_fields = {f["name"]: f for f in failed["outputs"][0]["facets"]["schema"]["fields"]}
    assert raw_fields == list(load_schema().names) and "ts" not in raw_fields
    assert table_fields["ts"]["type"] == "timestamptz" and "epoch milliseconds" in table_fields["ts"]["description"]


def test_the_schema_check_catches_a_broken_schema_facet():
    table = ol.output_dataset(from_location("/t"), columns=columns(SCHEMA.fields.fields))
    event = ol.to_dict(ol.run_event("START", run_id=str(uuid.uuid4()), job_namespace="n", job_name="j",
                                    outputs=[table]))
    assert not schema_errors(event)
    del event["outputs"][0]["facets"]["schema"]["fields"][4]["fields"][0]["name"]
    assert any("'name' is a required property" in p for p in schema_errors(event))


# --- DataHub's schemaMetadata -----------------------------------------------------------------------

def test_schema_metadata_names_nested_fields_by_v2_paths():
    raw = from_location("/data/raw")
    aspect = schema_metadata(Dataset(raw, schema=columns(SCHEMA.fields.fields)), raw.name)
    assert {k: aspect[k] for k in ("schemaName", "platform", "version")} == {
        "schemaName": "/data/raw", "platform": "urn:li:dataPlatform:file", "version": 0}
    assert aspect["created"] == aspect["lastModified"] == {"time": 0, "actor": "urn:li:corpuser:unknown"}
    raw_schema = aspect["platformSchema"]["com.linkedin.schema.OtherSchema"]["rawSchema"]
    assert aspect["hash"] == hashlib.sha1(raw_schema.encode()).hexdigest()
    assert [f["name"] for f in json.loads(raw_schema)] == list(SCHEMA.names)
    fields = {f["fieldPath"]: f for f in aspect["fields"]}
    assert list(fields) == [
        f"{V2}.[type=string].device_id",
        f"{V2}.[type=long].seq",
        f"{V2}.[type=timestamptz].measured_at",
        f"{V2}.[type=decimal].battery",
        f"{V2}.[type=struct].gps",
        f"{V2}.[type=struct].gps.[type=double].lat",
        f"{V2}.[type=struct].gps.[type=double].lon",
        f"{V2}.[type=array].[type=struct].samples",
        f"{V2}.[type=array].[type=struct].samples.[type=string].axis",
        f"{V2}.[type=array].[type=struct].samples.[type=float].g",
        f"{V2}.[type=map].[type=string].labels",
        f"{V2}.[type=map].[type=struct].zones",
        f"{V2}.[type=map].[type=struct].zones.[type=timestamptz].since",
    ]

    def kind(path: str) -> tuple[str, dict]:
        ((name, details),) = fields[f"{V2}.{path}"]["type"]["type"].items()
        return name.removeprefix("com.linkedin.schema."), details

    assert kind("[type=string].device_id") == ("StringType", {})
    assert kind("[type=decimal].battery") == ("NumberType", {})
    assert kind("[type=timestamptz].measured_at") == ("TimeType", {})
    assert kind("[type=struct].gps") == ("RecordType", {})
    assert kind("[type=array].[type=struct].samples") == ("ArrayType",
                                                          {"nestedType": ["struct<axis: string, g: float>"]})
    assert kind("[type=map].[type=struct].zones") == ("MapType", {"keyType": "string",
                                                                  "valueType": "struct<since: timestamptz>"})
    battery = fields[f"{V2}.[type=decimal].battery"]
    assert battery == {"fieldPath": f"{V2}.[type=decimal].battery", "nullable": True, "description": "volts",
                       "type": {"type": {"com.linkedin.schema.NumberType": {}}}, "nativeDataType": "decimal(5,2)",
                       "recursive": False, "isPartOfKey": False}
    assert fields[f"{V2}.[type=struct].gps.[type=double].lat"]["description"] == "degrees north"
    assert all(f["nullable"] for f in aspect["fields"])  # a table's columns are all optional


def test_flink_sql_types_map_too():
    cols = (Column("id", "BIGINT NOT NULL"), Column("pos", "ROW<`lat` DOUBLE>"), Column("tags", "ARRAY<STRING>"),
            Column("m", "MAP<STRING, DECIMAL(9, 2)>"), Column("at", "TIMESTAMP_LTZ(6)"), Column("odd", "GEOMETRY"))
    fields = {f["fieldPath"]: f for f in schema_metadata(Dataset(DatasetId("file", "/t"), schema=cols), "/t")["fields"]}
    assert fields[f"{V2}.[type=bigint].id"]["nullable"] is False
    assert fields[f"{V2}.[type=struct].pos"]["type"] == {"type": {"com.linkedin.schema.RecordType": {}}}
    assert fields[f"{V2}.[type=array].[type=string].tags"]["type"] == {
        "type": {"com.linkedin.schema.ArrayType": {"nestedType": ["STRING"]}}}
    assert fields[f"{V2}.[type=map].[type=decimal].m"]["type"] == {
        "type": {"com.linkedin.schema.MapType": {"keyType": "STRING", "valueType": "DECIMAL(9, 2)"}}}
    assert "com.linkedin.schema.TimeType" in fields[f"{V2}.[type=timestamp_ltz].at"]["type"]["type"]
    assert "com.linkedin.schema.NullType" in fields[f"{V2}.[type=geometry].odd"]["type"]["type"]


# --- the harvest carries a stored run's schema to its outputs ---------------------------------------

T0 = datetime(2026, 11, 22, 0, 10, tzinfo=timezone.utc)


def _compaction_events(store: Path, raw: DatasetId, alias: DatasetId, table: DatasetId, table_columns) -> None:
    declared = columns(SCHEMA.fields.fields)
    common = dict(run_id="0199b0a4-6f1c-7000-8000-0000000000a1", job_namespace="lakeflow", job_name="compact.t")
    ol.write_event(store, ol.run_event("START", event_time=T0, outputs=[ol.output_dataset(table)],
                                       inputs=[ol.input_dataset(raw, [alias], columns=declared)], **common))
    ol.write_event(store, ol.run_event(
        "COMPLETE", event_time=T0.replace(minute=11), inputs=[ol.input_dataset(raw, [alias], rows=3, columns=declared)],
        outputs=[ol.output_dataset(table, rows=3, columns=table_columns)], **common))


def _harvest(stub, tmp_path: Path, store: Path, fmt: str) -> str:
    out = tmp_path / f"h.{fmt}"
    assert main(["harvest", "--rest-url", stub.url, "--lineage-dir", str(store), "--format", fmt,
                 "--output", str(out)]) == 0
    return out.read_text()


def test_the_harvest_writes_a_stored_runs_schema_everywhere(recorded_jobmanager, recorded_scenario, tmp_path):
    store = tmp_path / "lineage"
    raw = from_location(recorded_scenario["location"])  # the recorded Flink jobs' raw table: one dataset
    alias = catalog_alias(recorded_scenario["catalog_uri"], "local", "iot", "sensor-readings")
    table = from_location(str(tmp_path / "ice" / "iot" / "vibration"))
    _compaction_events(store, raw, alias, table, columns(SCHEMA.iceberg_schema().fields))

    mcps = json.loads(_harvest(recorded_jobmanager, tmp_path, store, "datahub"))
    aspects = {m["entityUrn"]: json.loads(m["aspect"]["value"]) for m in mcps if m["aspectName"] == "schemaMetadata"}
    assert set(aspects) == {raw.datahub_urn(), table.datahub_urn()}
    paths = [f["fieldPath"] for f in aspects[raw.datahub_urn()]["fields"]]
    assert f"{V2}.[type=array].[type=struct].samples.[type=float].g" in paths
    assert aspects[table.datahub_urn()]["schemaName"] == table.name

    doc = json.loads(_harvest(recorded_jobmanager, tmp_path, store, "json"))
    by_name = {d["name"]: d for d in doc["datasets"]}
    assert [c["name"] for c in by_name[str(raw)]["schema"]] == list(SCHEMA.names)
    assert not [d for d in doc["datasets"] if d["schema"] and d["name"] not in (str(raw), str(table))]

    events = [json.loads(line) for line in _harvest(recorded_jobmanager, tmp_path, store, "openlineage").splitlines()]
    assert_valid(events)
    flink_writes = [o for e in events if e["job"]["namespace"] == "flink" for o in e["outputs"]
                    if o["name"] == raw.name]
    assert flink_writes and all(o["facets"]["schema"]["fields"][4]["name"] == "gps" for o in flink_writes)

    page = render.view(doc).details[f"dataset:{raw}"]
    (section,) = [s for s in page["sections"] if s["title"] == "Schema"]
    assert ["gps.lat", "double", "degrees north"] in section["rows"]
    assert ["samples.g", "float", ""] in section["rows"] and ["zones.since", "timestamptz", ""] in section["rows"]


def _sink_table(ds: DatasetId, fields: list[dict]) -> dict:
    """The table lakeflow's sink declares, as lakeflow's listener writes it: lakeflow_table and schema facets."""
    facet = {"_producer": ol.PRODUCER, "_schemaURL": f"{ol.FACETS_URL}/LakeflowTableDatasetFacet.json"
             "#/$defs/LakeflowTableDatasetFacet", "catalog": "local", "catalogUri": "file:///c", "warehouse": "local",
             "namespace": "iot", "table": "sensor-readings"}
    schema = {"_producer": ol.PRODUCER, "_schemaURL": f"{SCHEMA_FACET}#/$defs/SchemaDatasetFacet", "fields": fields}
    return {"namespace": ds.namespace, "name": ds.name, "facets": {"lakeflow_table": facet, "schema": schema}}


def _pushed(store: Path, minute: int, inputs=(), outputs=()) -> None:
    """A Flink job's run as lakeflow's listener pushes it: START with its datasets, then COMPLETE."""
    run = {"runId": str(uuid.uuid4()), "facets": {}}
    for kind, at in (("START", minute), ("COMPLETE", minute + 1)):
        write(store, {"eventType": kind, "eventTime": f"2026-11-22T00:{at:02d}:00.000Z", "producer": ol.PRODUCER,
                      "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent", "run": run,
                      "job": {"namespace": JOB_NAMESPACE, "name": "ingest", "facets": {}},
                      "inputs": list(inputs) if kind == "START" else [],
                      "outputs": list(outputs) if kind == "START" else []})


def test_the_schema_lakeflows_sink_declares_stands_until_a_compaction_describes_the_table(recorded_jobmanager,
                                                                                         tmp_path):
    store, raw = tmp_path / "lineage", from_location("/data/raw")
    topic = DatasetId("kafka://k:9092", "readings")
    topic_schema = {"_producer": ol.PRODUCER, "_schemaURL": f"{SCHEMA_FACET}#/$defs/SchemaDatasetFacet",
                    "fields": [{"name": "v", "type": "STRING"}]}
    _pushed(store, 0, [{"namespace": topic.namespace, "name": topic.name, "facets": {"schema": topic_schema}}],
            [_sink_table(raw, [{"name": "device_id", "type": "STRING"}, {"name": "gps", "type": "ROW<`lat` DOUBLE>"}])])

    def schemas() -> dict[str, list]:
        return {d["name"]: d["schema"] for d in json.loads(_harvest(recorded_jobmanager, tmp_path, store, "json"))[
            "datasets"]}

    first = schemas()
    assert first[str(raw)] == [{"name": "device_id", "type": "STRING"}, {"name": "gps", "type": "ROW<`lat` DOUBLE>"}]
    assert first[str(topic)] == []  # a topic's schema is its own source's (DataHub's Kafka source)
    _compaction_events(store, raw, catalog_alias("file:///c", "local", "iot", "sensor-readings"),
                       from_location("/data/ice"), ())
    _pushed(store, 30, outputs=[_sink_table(raw, [{"name": "device_id", "type": "STRING"}])])  # after the compaction
    second = schemas()
    assert [c["name"] for c in second[str(raw)]] == list(SCHEMA.names)  # a compaction's, though the sink's is newer
    assert second[str(from_location("/data/ice"))] == []


def test_lineage_view_takes_the_stores_newer_schema():
    harvest = {"datasets": [{"name": "file:/raw", "aliases": [], "schema": [{"name": "a", "type": "STRING"}]},
                            {"name": "file:/other", "aliases": [], "schema": [{"name": "o", "type": "long"}]}]}
    store = {"datasets": [{"name": "file:/raw", "aliases": [], "schema": [{"name": "a", "type": "string"},
                                                                          {"name": "b", "type": "long"}]},
                          {"name": "file:/other", "aliases": [], "schema": []}]}
    merged = {d["name"]: d["schema"] for d in with_compaction_runs(harvest, store)["datasets"]}
    assert merged == {"file:/raw": store["datasets"][0]["schema"], "file:/other": [{"name": "o", "type": "long"}]}


def test_flat_paths_go_through_lists_and_maps():
    assert [p for p, _ in flat(columns(SCHEMA.fields.fields))] == [
        "device_id", "seq", "measured_at", "battery", "gps", "gps.lat", "gps.lon", "samples", "samples.axis",
        "samples.g", "labels", "zones", "zones.since"]
