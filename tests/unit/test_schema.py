"""The declared schema: a JSON Schema file → TableSchema (the mapping, the annotations, one-line errors
naming the field), and evolution planned as a table of cases (the Iceberg spec's promotions, the
anchors' refusals). Unit tests: no process is started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    TimestamptzType,
)

from lakeflow.schema import SchemaError, load_schema
from lakeflow.schema.declared import default_schema_text, parse_schema
from lakeflow.schema.evolution import TableLayout, plan, promotable
from lakeflow.schema.model import optional

ROOT = Path(__file__).resolve().parents[2]
DEVICE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "vibration",
    "type": "object",
    "properties": {
        "device_id": {"type": "string", "maxLength": 32},
        "seq": {"type": "integer"},
        "event_time": {"type": "string", "format": "date-time"},
        "battery": {"type": "string", "x-iceberg-type": "decimal(5,2)"},
        "gps": {"$ref": "#/$defs/position"},
        "accel": {"type": "array", "items": {"type": "number", "x-iceberg-type": "float"}, "maxItems": 3},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}},
        "ok": {"type": ["boolean", "null"]},
        "day": {"type": "string", "format": "date"},
        "samples": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer",
                                                                                      "x-iceberg-type": "int"}}}},
    },
    "required": ["device_id", "seq", "event_time", "ok"],
    "$defs": {"position": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                           "required": ["lat", "lon"]}},
    "x-lakeflow": {"key": ["device_id", "seq"], "partition-by": ["day", "bucket[4](device_id)"]},
}


def declared(doc: dict, **overrides: object) -> object:
    return parse_schema(json.dumps(doc), "test.schema.json", **overrides)  # type: ignore[arg-type]


def test_the_default_schema_is_todays_sensor_reading_with_run_id_optional() -> None:
    s = load_schema()
    assert s.names == ("sensor_id", "run_id", "seq", "timestamp_ms", "temperature", "humidity", "pressure", "location")
    assert not s.field("run_id").required and all(s.field(n).required for n in s.names if n != "run_id")
    assert (s.event_time, s.event_time_column, s.key) == ("timestamp_ms", "ts", ("sensor_id", "run_id", "seq"))
    table = s.iceberg_schema()
    assert [(f.field_id, f.name, f.required) for f in table.fields][-1] == (9, "ts", False)
    assert [f.field_id for f in table.fields] == list(range(1, 10))  # the ids tables made before 0.3 have
    assert str(s.partition_spec(table).fields[0].transform) == "day" and s.partition_spec(table).fields[0].name == "ts_day"


def test_a_user_schema_maps_as_documented() -> None:
    s = declared(DEVICE)
    types = {f.name: f.field_type for f in s.fields.fields}
    assert types["device_id"] == StringType() and types["seq"] == LongType()
    assert types["event_time"] == TimestamptzType() and types["battery"] == DecimalType(5, 2)
    assert [(f.name, f.field_type, f.required) for f in types["gps"].fields] == [
        ("lat", DoubleType(), True), ("lon", DoubleType(), True)]
    assert isinstance(types["accel"], ListType) and types["accel"].element_type == FloatType()
    assert isinstance(types["tags"], MapType) and types["tags"].value_type == StringType()
    assert types["ok"] == BooleanType() and not s.field("ok").required  # [boolean, null]: may be null
    assert types["day"] == DateType()
    assert types["samples"].element_type.fields[0].field_type == IntegerType()
    assert (s.event_time, s.event_time_column, s.derived_time) == ("event_time", "event_time", False)
    assert [str(t) for t in s.partition_by] == ["day", "bucket[4](device_id)"]
    assert s.sort_by == ("event_time", "device_id", "seq")
    assert s.rules["device_id"].max_length == 32 and s.rules["accel"].max_items == 3
    contract = s.contract()["fields"]
    assert contract[3] == {"name": "battery", "required": False, "type": {"kind": "decimal", "precision": 5, "scale": 2}}
    assert contract[5]["type"] == {"kind": "list", "items": {"kind": "float"}, "itemsRequired": True, "maxItems": 3}
    iceberg = s.iceberg_schema()
    assert not any(f.required for f in iceberg.fields) and iceberg.find_field("gps.lat").required is False


def test_settings_override_the_files_layout() -> None:
    s = declared(DEVICE, key=(), partition_by="hour, identity(device_id)")
    assert s.key == () and [str(t) for t in s.partition_by] == ["hour", "identity(device_id)"]
    assert declared(DEVICE, partition_by="none").partition_by == ()


@pytest.mark.parametrize("change, message", [
    (lambda d: d["properties"].update(x={"oneOf": [{"type": "string"}, {"type": "integer"}]}),
     "x: oneOf is not supported (a column has one type)"),
    (lambda d: d["properties"].update(x={"type": ["string", "integer"]}), 'x: expected one type (or [type, "null"])'),
    (lambda d: d["properties"].update(x={"type": "integer", "x-iceberg-type": "decimal(5,2)"}),
     "x: x-iceberg-type decimal(5,2) does not fit a JSON integer (expected one of int, long)"),
    (lambda d: d["properties"].update(x={"type": "number", "x-iceberg-type": "decimal(50,2)"}), "x: decimal(50,2): "),
    (lambda d: d["properties"].update(x={"type": "object"}),
     "x: an object needs properties (a struct) or an additionalProperties schema (a map)"),
    (lambda d: d["properties"].update(x={"$ref": "#/$defs/nothing"}), "x: reference #/$defs/nothing names nothing"),
    (lambda d: d["properties"]["gps"].update({"$ref": "other.json#/x"}), "gps: only local references"),
    (lambda d: d["x-lakeflow"].update(key=["gps"]), "the key field 'gps' is a struct"),
    (lambda d: d["x-lakeflow"].update(key=["nope"]), "the key field 'nope' is not a top-level field"),
    (lambda d: d["x-lakeflow"].update({"event-time": "ok"}), "the event-time field 'ok' is a boolean"),
    (lambda d: d["required"].remove("event_time"), "no event time: name it in x-lakeflow.event-time"),
    (lambda d: d["x-lakeflow"].update({"partition-by": ["week"]}), "partition term 'week': expected year, month"),
    (lambda d: d["x-lakeflow"].update(colour="blue"), "x-lakeflow: expected an object with some of"),
    (lambda d: d.update(required=["ghost"]), "required names fields it does not declare: ['ghost']"),
    (lambda d: d.update(type=7), "not a valid JSON Schema (draft 2020-12) at type"),
])
def test_an_unusable_schema_is_one_error_naming_the_field(change, message: str) -> None:
    doc = json.loads(json.dumps(DEVICE))
    change(doc)
    with pytest.raises(SchemaError) as raised:
        declared(doc)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_missing_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=f"^TABLE_SCHEMA={tmp_path}/none.json: cannot read it"):
        load_schema(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SchemaError, match=f"^{tmp_path}/bad.json: not JSON"):
        load_schema(tmp_path / "bad.json")


def test_the_documented_example_schema_loads() -> None:
    s = load_schema(ROOT / "docs" / "schemas" / "vibration-sensor.schema.json")
    assert s.event_time and s.key and s.partition_by


# --- evolution ----------------------------------------------------------------------------------

def table_of(doc: dict) -> tuple[Schema, TableLayout]:
    s = declared(doc)
    table = s.iceberg_schema()
    return table, TableLayout(s.event_time, s.key, s.partition_spec(table))


def planned(before: dict, after: dict) -> list[tuple[str, str, str]]:
    table, layout = table_of(before)
    return [(c.action, c.field, c.change) for c in plan(table, layout, declared(after))]


def edited(change) -> dict:
    doc = json.loads(json.dumps(DEVICE))
    change(doc)
    return doc


@pytest.mark.parametrize("change, expected", [
    (lambda d: None, []),
    (lambda d: d["properties"].update(rssi={"type": "integer"}), [("apply", "rssi", "add long")]),
    (lambda d: d["$defs"]["position"]["properties"].update(alt={"type": "number"}), [("apply", "gps.alt", "add double")]),
    (lambda d: d["properties"]["samples"]["items"]["properties"].update(y={"type": "number"}),
     [("apply", "samples[].y", "add double")]),                                         # inside a list of structs
    (lambda d: d["properties"].update(tags={"type": "object", "additionalProperties": {
        "type": "object", "properties": {"v": {"type": "string"}}}}),
     [("refuse", "tags{}", "string → struct<v: string>")]),
    (lambda d: d["properties"]["samples"]["items"]["properties"]["x"].update({"x-iceberg-type": "long"}),
     [("apply", "samples[].x", "int → long")]),                                          # the spec's promotion, nested
    (lambda d: d["properties"]["accel"]["items"].update({"x-iceberg-type": "double"}),
     [("apply", "accel[]", "float → double")]),
    (lambda d: d["properties"]["battery"].update({"x-iceberg-type": "decimal(7,2)"}),
     [("apply", "battery", "decimal(5,2) → decimal(7,2)")]),
    (lambda d: d["properties"]["battery"].update({"x-iceberg-type": "decimal(4,2)"}),
     [("convert", "battery", "decimal(5,2) → decimal(4,2)")]),                          # declared narrower: fits
    (lambda d: d["properties"]["battery"].update({"x-iceberg-type": "decimal(7,3)"}),
     [("refuse", "battery", "decimal(5,2) → decimal(7,3)")]),                           # a scale never changes
    (lambda d: d["properties"]["seq"].update({"x-iceberg-type": "int"}), [("convert", "seq", "long → int")]),
    (lambda d: d["properties"]["seq"].update(type="string"), [("refuse", "seq", "long → string")]),
    (lambda d: d["properties"]["accel"]["items"].update(type="string", **{"x-iceberg-type": "string"}),
     [("refuse", "accel[]", "float → string")]),
    (lambda d: d["properties"].update(gps={"type": "array", "items": {"type": "number"}}),
     [("refuse", "gps", "struct<lat: double, lon: double> → list<double>")]),
    (lambda d: d["properties"].pop("day"), [("convert", "day", "no longer declared")]),
    (lambda d: (d["properties"].pop("day"), d["x-lakeflow"].update(drop=["day"])), [("apply", "day", "drop")]),
    (lambda d: (d["properties"].pop("seq"), d["required"].remove("seq"), d["x-lakeflow"].update(drop=["seq"],
                                                                                                key=["device_id"])),
     [("refuse", "seq", "drop"), ("apply", "device_id", "key (device_id, seq) → (device_id)")]),
    (lambda d: d["properties"].update(place=dict(d["properties"].pop("day"), **{"x-renamed-from": "day"})),
     [("apply", "place", "rename day → place")]),
    (lambda d: d["required"].remove("device_id"), []),                                  # the contract only
    (lambda d: d["x-lakeflow"].update({"partition-by": ["hour"]}),
     [("refuse", "partitioning", "day(event_time), bucket[4](device_id) → hour(event_time)")]),
])
def test_evolution_is_planned_change_by_change(change, expected: list[tuple[str, str, str]]) -> None:
    assert planned(DEVICE, edited(change)) == expected


def test_dropping_the_event_time_or_a_partition_source_is_refused() -> None:
    def no_event_time(d: dict) -> None:
        d["properties"].update(when={"type": "string", "format": "date-time"})
        d["required"] = [r if r != "event_time" else "when" for r in d["required"]]
        d["properties"].pop("event_time")
        d["x-lakeflow"].update({"event-time": "when", "drop": ["event_time"]})

    changes = planned(DEVICE, edited(no_event_time))
    assert ("refuse", "event_time", "drop") in changes and ("refuse", "when", "event time event_time → when") in changes


def test_the_promotion_table_is_the_specs() -> None:
    assert promotable(IntegerType(), LongType()) and promotable(FloatType(), DoubleType())
    assert promotable(DecimalType(9, 2), DecimalType(12, 2))
    assert not promotable(DecimalType(9, 2), DecimalType(12, 3))  # pyiceberg's own check lets a scale change pass
    assert not promotable(StringType(), LongType()) and not promotable(LongType(), StringType())
    assert not promotable(LongType(), DoubleType()) and not promotable(DateType(), TimestamptzType())


def test_a_table_made_before_the_declared_schema_gets_the_default_unchanged() -> None:
    """A 0.2 table: the reading's nine columns, optional, ids 1…9, day(ts); it recorded no layout, so it
    takes the declared one (Target.layout) and the default schema changes nothing."""
    s = load_schema()
    legacy = Schema(*optional(s.iceberg_schema().as_struct()).fields)
    assert plan(legacy, TableLayout(s.event_time, s.key, s.partition_spec(legacy)), s) == []


def test_the_default_schema_text_is_the_packaged_file() -> None:
    assert json.loads(default_schema_text())["title"] == "sensor-reading"
