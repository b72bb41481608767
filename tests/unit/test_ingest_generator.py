"""The synthetic sensors' generator (lakeflow/ingest/sensors.py): records of the declared schema, made
as each field's ``x-lakeflow-generate`` hint says, in Python and as the spec ``SensorRecords`` makes them from
on the JVM; the hints' errors.

Unit tests: they start no process. The JVM's records: tests/integration/test_ingest_generator.py."""

from __future__ import annotations

import json
import random
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lakeflow.ingest.flink_types import sql_fields
from lakeflow.ingest.sensors import DailyCycle, Generator, PerDevice, parse_hint
from lakeflow.schema import SchemaError, TableSchema, load_schema
from lakeflow.schema.declared import parse_schema
from lakeflow.schema.records import RecordContract

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_764_324_000_123  # 2025-11-28T10:00:00.123Z

# A user's vibration sensor: nested struct, arrays, a map, decimals, an ISO-8601 event time, its own key.
VIBRATION = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "vibration",
    "type": "object",
    "properties": {
        "device_id": {"type": "string", "x-lakeflow-generate": {"kind": "device", "prefix": "vib-"}},
        "measured_at": {"type": "string", "format": "date-time"},
        "counter": {"type": "integer", "x-iceberg-type": "int"},
        "gps": {"type": "object", "required": ["lat", "lon"], "properties": {
            "lat": {"type": "number", "x-lakeflow-generate": {"kind": "daily-cycle", "low": 52.0, "spread": 1.0,
                                                              "places": 5}},
            "lon": {"type": "number", "x-iceberg-type": "float"},
            "fix": {"type": "boolean"}}},
        "accel": {"type": "array", "maxItems": 2, "items": {"type": "number"}},
        "samples": {"type": "array", "items": {"type": "object", "required": ["at"], "properties": {
            "at": {"type": "string", "format": "date-time"},
            "rms": {"type": "number", "x-iceberg-type": "decimal(6,3)"}}}},
        "tags": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 4}},
        "battery": {"type": "number", "x-iceberg-type": "decimal(4,1)",
                    "x-lakeflow-generate": {"kind": "daily-cycle", "low": 80.0, "spread": 20.0, "noise": 5.0,
                                            "max": 100.0}},
        "site": {"type": "string", "x-lakeflow-generate": {"kind": "per-device", "values": ["north", "süd"]}},
        "day": {"type": "string", "format": "date"},
        "local": {"type": "string", "x-iceberg-type": "timestamp"},
        "level": {"type": "integer", "x-lakeflow-generate": {"kind": "per-device", "values": [1, 2, 3]}},
    },
    "required": ["device_id", "measured_at", "gps"],
    "x-lakeflow": {"event-time": "measured_at", "key": ["device_id", "counter"]},
}


def vibration(**overrides: Any) -> TableSchema:
    properties = {**VIBRATION["properties"], **overrides}
    return parse_schema(json.dumps({**VIBRATION, "properties": properties}))


def records(schema: TableSchema, n: int = 50, sensors: int = 5) -> list[dict]:
    generator, rng = Generator(schema, sensors, "run-1"), random.Random(7)
    return [generator.record(seq, T0 + seq, rng) for seq in range(n)]


def test_the_default_sensor_comes_from_its_schema_files_hints() -> None:
    schema = load_schema()
    made = records(schema, 64, sensors=8)
    assert [list(r) for r in made] == [list(schema.names)] * 64
    hints = {name: parse_hint(schema.rules[name].generate, name) for name in schema.names}
    for r in made:
        device = r["seq"] % 8
        assert r["sensor_id"] == f"sensor-{device + 1:03d}" and r["run_id"] == "run-1"
        assert r["timestamp_ms"] == T0 + r["seq"]
        places = hints["location"]
        assert isinstance(places, PerDevice) and r["location"] == places.values[device]
        for name in ("temperature", "humidity", "pressure"):
            cycle = hints[name]
            assert isinstance(cycle, DailyCycle)
            assert abs(r[name] - cycle.base(device)) <= abs(cycle.amplitude) + cycle.noise / 2 + 0.01, (name, r)
            assert r[name] == round(r[name], 2)
        assert 20.0 <= r["humidity"] <= 95.0
    assert sorted(r["seq"] for r in made) == list(range(64))
    contract = RecordContract(schema.contract())
    for r in made:
        contract.check(r)


def test_device_ids_are_numbered_from_one_and_widen_past_999() -> None:
    def ids(sensors: int, *seqs: int) -> list[str]:
        generator, rng = Generator(load_schema(), sensors, "r"), random.Random()
        return [generator.record(seq, T0, rng)["sensor_id"] for seq in seqs]

    assert ids(5, 0, 4, 5) == ["sensor-001", "sensor-005", "sensor-001"]
    assert ids(1000, 0, 999) == ["sensor-0001", "sensor-1000"]


def test_the_spec_makes_the_default_sensor_from_its_hints() -> None:
    """What ``SensorRecords`` takes: one member per declared field in order, its name as JSON text, each
    leaf its kind, its hint's generator and parameters; doubles fixed-point with 2 places."""
    spec = json.loads(Generator(load_schema(), 100, "run-1").spec())
    members = spec["object"]
    assert [key for key, _ in members] == [json.dumps(name) for name in load_schema().names]
    leaves = {json.loads(key): leaf for key, leaf in members}
    assert leaves["sensor_id"] == {"kind": "string", "make": "device", "prefix": "sensor-", "width": 3, "maxLength": None}
    assert leaves["run_id"] == {"kind": "string", "make": "constant", "text": "run-1", "maxLength": None}
    assert leaves["seq"]["make"] == "sequence" and leaves["timestamp_ms"]["make"] == "event-time"
    assert leaves["humidity"] == {"kind": "double", "make": "daily-cycle", "low": 35.0, "spread": 30.0, "prime": 571,
                                  "amplitude": -8.0, "noise": 2.0, "min": 20.0, "max": 95.0, "maxLength": None,
                                  "precision": 10, "scale": 2}
    assert leaves["location"]["values"][:2] == ["greenhouse-north", "greenhouse-south"]


def test_a_nested_user_schema_makes_records_that_fit_its_contract() -> None:
    schema = vibration()
    made = records(schema)
    contract = RecordContract(schema.contract())
    for r in made:
        contract.check(json.loads(json.dumps(r), parse_float=Decimal))
    first = made[0]
    assert list(first) == list(schema.names)
    assert first["device_id"] == "vib-001" and first["measured_at"] == "2025-11-28T10:00:00.123Z"
    assert first["day"] == "2025-11-28" and first["local"] == "2025-11-28T10:00:00.123"
    assert [r["counter"] for r in made[:3]] == [0, 1, 2]  # a key field: the tick's seq
    assert len(first["accel"]) == 2 and len(first["samples"]) == 3  # maxItems 2; else 3 items
    assert list(first["tags"]) == ["key1", "key2"] and all(len(v) <= 4 for v in first["tags"].values())
    assert {r["site"] for r in made} == {"north", "süd"} and {r["level"] for r in made} == {1, 2, 3}
    assert all(0 <= r["battery"] <= 100 and r["battery"] == round(r["battery"], 1) for r in made)
    assert all(52.0 <= r["gps"]["lat"] <= 53.0 for r in made) and {type(r["gps"]["fix"]) for r in made} == {bool}
    assert all(0 <= s["rms"] <= 999.999 for r in made for s in r["samples"])


def keyed(key: list[str], **properties: dict) -> TableSchema:
    """A user's schema without hints: key ``key``, event time ``at`` (epoch milliseconds) beside ``properties``."""
    return parse_schema(json.dumps({"type": "object", "required": ["at"], "x-lakeflow": {"event-time": "at", "key": key},
                                    "properties": {"at": {"type": "integer"}, **properties}}))


def test_a_string_key_field_beside_the_sequence_is_a_device() -> None:
    """Unhinted, the key's string field cycles through the devices (as a hinted ``device`` does) and
    its integer field is the tick's seq: the key stays unique, the spec says the same."""
    schema = keyed(["device_id", "n"], device_id={"type": "string"}, n={"type": "integer"})
    made = records(schema, 12, sensors=5)
    assert [r["device_id"] for r in made[:6]] == [f"device_id-{i:03d}" for i in (1, 2, 3, 4, 5, 1)]
    assert [r["n"] for r in made] == list(range(12))
    assert len({(r["device_id"], r["n"]) for r in made}) == 12
    leaves = {json.loads(key): leaf for key, leaf in json.loads(Generator(schema, 5, "run-1").spec())["object"]}
    assert leaves["device_id"]["make"] == "device" and leaves["n"] == {"kind": "long", "make": "sequence", "maxLength": None}


@pytest.mark.parametrize(("key", "other"), [
    (["device_id"], None),  # the key's only field
    (["device_id", "at"], None),  # the event time is no sequence
    (["device_id", "n"], {"type": "integer", "x-lakeflow-generate": {"kind": "per-device", "values": [1, 2]}}),
    (["device_id", "n"], {"type": "string"}),  # no string is told from another
])
def test_a_string_key_field_is_the_sequence_when_nothing_else_makes_the_key_unique(key: list[str], other: Any) -> None:
    schema = keyed(key, device_id={"type": "string"}, **({"n": other} if other else {}))
    made = records(schema, 6)
    assert [r["device_id"] for r in made] == [str(seq) for seq in range(6)]


def test_a_key_field_hinted_sequence_leaves_the_string_ones_to_the_devices() -> None:
    schema = keyed(["device_id", "n"], device_id={"type": "string"},
                   n={"type": "string", "x-lakeflow-generate": {"kind": "sequence"}})
    made = records(schema, 6, sensors=2)
    assert [(r["device_id"], r["n"]) for r in made[:3]] == [("device_id-001", "0"), ("device_id-002", "1"),
                                                          ("device_id-001", "2")]


def test_the_nested_spec_nests_objects_and_arrays() -> None:
    leaves = {json.loads(key): leaf for key, leaf in json.loads(Generator(vibration(), 5, "run-1").spec())["object"]}
    assert [key for key, _ in leaves["gps"]["object"]] == ['"lat"', '"lon"', '"fix"']
    assert leaves["gps"]["object"][1][1] == {"kind": "float", "make": "daily-cycle", "low": 50.0, "spread": 0.0, "prime": 1,
                                             "amplitude": 0.0, "noise": 100.0, "min": None, "max": None,
                                             "maxLength": None, "precision": 10, "scale": 2}
    assert len(leaves["accel"]["array"]) == 2 and len(leaves["samples"]["array"]) == 3  # maxItems 2; else 3 items
    assert [key for key, leaf in leaves["tags"]["object"]] == ['"key1"', '"key2"']
    assert leaves["tags"]["object"][0][1]["maxLength"] == 4
    assert leaves["battery"] == {"kind": "decimal", "make": "daily-cycle", "low": 80.0, "spread": 20.0, "prime": 1,
                                 "amplitude": 0.0, "noise": 5.0, "min": None, "max": 100.0, "maxLength": None,
                                 "precision": 4, "scale": 1, "limit": 999.9}
    assert leaves["site"]["values"] == ["north", "süd"] and leaves["level"]["values"] == ["1", "2", "3"]
    assert leaves["gps"]["object"][2][1]["make"] == "coin"


def test_lineage_names_the_declared_fields_with_flink_sql_types() -> None:
    assert dict(sql_fields(vibration())) == {
        "device_id": "STRING", "measured_at": "TIMESTAMP_LTZ(6)", "counter": "INT",
        "gps": "ROW<`lat` DOUBLE, `lon` FLOAT, `fix` BOOLEAN>", "accel": "ARRAY<DOUBLE>",
        "samples": "ARRAY<ROW<`at` TIMESTAMP_LTZ(6), `rms` DECIMAL(6, 3)>>", "tags": "MAP<STRING, STRING>",
        "battery": "DECIMAL(4, 1)", "site": "STRING", "day": "DATE", "local": "TIMESTAMP(6)", "level": "BIGINT"}
    assert sql_fields(load_schema())[2:4] == [("seq", "BIGINT"), ("timestamp_ms", "BIGINT")]


@pytest.mark.parametrize(("field", "problem"), [
    ({"type": "integer", "x-lakeflow-generate": {"kind": "run-id"}}, "x-lakeflow-generate run-id makes a string, not a long"),
    ({"type": "string", "x-lakeflow-generate": {"kind": "weather"}}, "kind: Input tag 'weather' found"),
    ({"type": "number", "x-lakeflow-generate": {"kind": "daily-cycle", "low": 1, "hight": 2}}, "hight: Extra inputs"),
    ({"type": "number", "x-lakeflow-generate": {"kind": "daily-cycle"}}, "low: Field required"),
    ({"type": "number", "x-lakeflow-generate": {"kind": "per-device", "values": [1, "two"]}},
     "value 'two' does not fit: field extra: expected a number, got a string"),
    ({"type": "string", "maxLength": 3, "x-lakeflow-generate": {"kind": "per-device", "values": ["long"]}},
     "field extra: longer than 3 characters"),
    ({"type": "string", "x-lakeflow-generate": {"kind": "device", "prefix": 'a"b'}}, "may hold no '\"'"),
    ({"type": "integer", "x-iceberg-type": "int", "x-lakeflow-generate": {"kind": "daily-cycle", "low": 3e9}},
     "makes numbers up to 3e+09, beyond an int"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "x-lakeflow-generate": {"kind": "device"}},
     "applies to fields of primitive types, not a struct"),
])
def test_a_hint_that_cannot_make_its_field_is_an_error_naming_it(field: dict, problem: str) -> None:
    with pytest.raises(SchemaError, match=re.escape(problem)) as caught:
        Generator(vibration(extra=field), 5, "run-1")
    assert "extra" in str(caught.value)


def test_an_unsafe_run_id_is_refused() -> None:
    with pytest.raises(ValueError, match="run_id"):
        Generator(load_schema(), 5, 'x", "evil')


def test_no_ingestion_module_names_a_field_of_the_default_sensor() -> None:
    """The default sensor's realism is its schema file's (hints), not code's."""
    fields = [n for n in load_schema().names if n not in ("seq", "timestamp_ms", "run_id", "location")]
    files = [*(ROOT / "lakeflow" / "ingest").glob("*.py"), ROOT / "jobs" / "sensor_ingest.py", ROOT / "lakeflow" / "demo.py",
             *(ROOT / "java" / "lakeflow" / "flink").glob("*.java"), *(ROOT / "bench").glob("bench_ingest*.py")]
    named = {f"{p.relative_to(ROOT)}: {m[0]}" for p in files for m in re.finditer(rf"\b({'|'.join(fields)})\b", p.read_text())}
    assert fields and not named
