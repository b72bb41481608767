"""The synthetic sensors' generator (lakeflow/ingest/sensors.py): records of the declared schema, made
as each field's ``x-lakeflow-generate`` hint says, in SQL and in Python; the hints' errors.

Unit tests: they start no process. The SQL on Flink: tests/integration/test_ingest_generator.py."""

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


def test_the_sql_makes_the_default_sensor_as_before() -> None:
    """The default path's SQL: one typed column per declared field, then one CONCAT keeping their order,
    doubles fixed-point with 2 places — what made it as fast as Flink's own json sink."""
    generator = Generator(load_schema(), 100, "run-1")
    columns = generator.columns_sql("ticks")
    assert columns.endswith("FROM (SELECT seq, timestamp_ms, MOD(seq, 100) AS idx FROM ticks)")
    assert "CONCAT('sensor-', LPAD(CAST(idx + 1 AS STRING), 3, '0')) AS `sensor_id`" in columns
    assert "'run-1' AS `run_id`" in columns and "seq AS `seq`" in columns
    assert ("GREATEST(CAST(20.0 AS DOUBLE), LEAST(CAST(95.0 AS DOUBLE), (CAST(35.0 AS DOUBLE) + CAST(30.0 AS DOUBLE) "
            "* MOD(idx * 571, 1000) / CAST(1000.0 AS DOUBLE)) - CAST(8.0 AS DOUBLE) * SIN(") in columns
    assert "DECIMAL" not in columns  # DOUBLE arithmetic throughout: a DECIMAL division cost most of the job's CPU
    assert "ELT(CAST(MOD(idx, 8) AS INT) + 1, 'greenhouse-north', " in columns
    json_sql = generator.json_sql("records")
    positions = [json_sql.index(f'"{name}":') for name in load_schema().names]
    assert positions == sorted(positions)
    assert json_sql.count(", 10, 2)") == 3 and json_sql.count("LAKEFLOW_FIXED(") == 3 and json_sql.count("CONCAT(") == 1
    assert "RAND()" not in json_sql and "FROM records" in json_sql


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
    its integer field is the tick's seq: the key stays unique, the SQL makes the same."""
    schema = keyed(["device_id", "n"], device_id={"type": "string"}, n={"type": "integer"})
    made = records(schema, 12, sensors=5)
    assert [r["device_id"] for r in made[:6]] == [f"device_id-{i:03d}" for i in (1, 2, 3, 4, 5, 1)]
    assert [r["n"] for r in made] == list(range(12))
    assert len({(r["device_id"], r["n"]) for r in made}) == 12
    columns = Generator(schema, 5, "run-1").columns_sql("ticks")
    assert "CONCAT('device_id-', LPAD(CAST(idx + 1 AS STRING), 3, '0')) AS `device_id`" in columns
    assert "seq AS `n`" in columns


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


def test_the_nested_sql_builds_typed_values_and_one_json_document() -> None:
    generator = Generator(vibration(), 5, "run-1")
    columns = generator.columns_sql("ticks")
    assert "AS ROW<`lat` DOUBLE, `lon` FLOAT, `fix` BOOLEAN>) AS `gps`" in columns
    assert "CAST(ARRAY[" in columns and "AS ARRAY<ROW<`at` TIMESTAMP_LTZ(6), `rms` DECIMAL(6, 3)>>) AS `samples`" in columns
    assert "CAST(MAP['key1', SUBSTR(" in columns and "AS MAP<STRING, STRING>) AS `tags`" in columns
    assert "CAST(GREATEST(-999.9, LEAST(999.9, LEAST(CAST(100.0 AS DOUBLE), " in columns and "AS DECIMAL(4, 1)) AS `battery`" in columns
    json_sql = generator.json_sql("records")
    for access in ("`gps`.`lat`", "`accel`[2]", "`samples`[3].`rms`", "`tags`['key2']"):
        assert access in json_sql
    assert "`accel`[3]" not in json_sql
    assert "DATE_FORMAT(`measured_at`, 'yyyy-MM-dd''T''HH:mm:ss.SSS'), 'Z\",\"counter\":'" in json_sql
    assert json_sql.count("CONCAT(") == 1


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
