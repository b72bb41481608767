"""Part files → rows under the record contract (lakeflow.compaction.parse): the fast path (pyarrow's
reader on the sink's layout) and the exact path (Python, record by record) give the same rows; a bad
record is set aside with its reason and its text, the file's others kept; malformed and empty files
are quarantined whole; undeclared fields are counted. Unit tests: no process is started."""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import pytest

from lakeflow.compaction.parse import EMPTY, FILE, MALFORMED, Parser, sink_layout
from lakeflow.schema import load_schema
from lakeflow.schema.declared import parse_schema
from lakeflow.schema.examples import example
from tests.unit.test_schema import DEVICE

NESTED = parse_schema(json.dumps({**DEVICE, "properties": {k: v for k, v in DEVICE["properties"].items()
                                                           if k != "tags"}}))  # no map: the fast path takes it
WITH_MAP = parse_schema(json.dumps(DEVICE))


def sink_file(records: list[dict]) -> bytes:
    """One part file as lakeflow's Flink writer lays it out."""
    return ("[" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in records) + "]\n").encode()


def indented(records: list[dict]) -> bytes:
    """The same records in another layout (only the exact path reads it)."""
    return json.dumps(records, indent=2).encode()


@pytest.mark.parametrize("schema", [load_schema(), NESTED, WITH_MAP], ids=["default", "nested", "map"])
def test_both_paths_give_the_same_rows(schema) -> None:
    records = [example(schema, n) for n in range(20)]
    parser = Parser(schema)
    fast = parser.parse([sink_file(records[:10]), sink_file(records[10:])])
    exact = parser.parse([indented(records[:10]), indented(records[10:])])
    assert sink_layout([sink_file(records), indented(records)]).ok.tolist() == [True, False]
    assert fast.rows.num_rows == 20 and not fast.bad
    assert fast.rows.to_pylist() == exact.rows.to_pylist()
    assert fast.rows.schema == exact.rows.schema
    assert {i: (s.records, s.bad) for i, s in fast.files.items()} == {0: (10, 0), 1: (10, 0)}
    assert fast.files[0].min_ms == exact.files[0].min_ms and fast.files[1].max_ms == exact.files[1].max_ms


def test_values_arrive_as_the_table_holds_them() -> None:
    record = example(NESTED, 3) | {"battery": "3.7", "event_time": "2026-11-28T10:00:00.123456789+01:00"}
    for blob in (sink_file([record]), indented([record])):
        (row,) = Parser(NESTED).parse([blob]).rows.to_pylist()
        assert row["battery"] == Decimal("3.70")
        assert row["event_time"].isoformat() == "2026-11-28T09:00:00.123456+00:00"  # cut to microseconds
        assert row["gps"] == {"lat": 3.5, "lon": 3.5} and row["accel"] == [3.5, 4.5]


@pytest.mark.parametrize("change, reason", [
    ({"seq": "5"}, "field seq: expected an integer, got a string"),
    ({"seq": 5.0}, "field seq: expected an integer, got a number"),
    ({"device_id": None}, "missing field device_id"),
    ({"device_id": "x" * 33}, "field device_id: longer than 32 characters"),
    ({"gps": {"lat": 1.0}}, "missing field gps.lon"),
    ({"accel": [1.0, "a"]}, "field accel[1]: expected a number, got a string"),
    ({"accel": [1.0, 2.0, 3.0, 4.0]}, "field accel: more than 3 items"),
    ({"accel": [1e39]}, "field accel[0]: number out of range for a float"),
    ({"battery": "3.711"}, "field battery: more than 2 decimal places for decimal(5,2)"),
    ({"battery": 1234.5}, "field battery: more than 5 digits for decimal(5,2)"),
    ({"event_time": "2026-11-28 10:00:00Z"}, "field event_time: expected a date-time with offset (RFC 3339), got a string"),
    ({"event_time": "2026-11-28T10:00:00"}, "field event_time: expected a date-time with offset (RFC 3339), got a string"),
    ({"day": "2026-02-30"}, "field day: 2026-02-30 is no day of the calendar"),
    ({"ok": "true"}, "field ok: expected a boolean, got a string"),
    ({"samples": [{"x": 2**31}]}, "field samples[0].x: integer out of range for an int"),
    ({"device_id": "\ud800"}, "field device_id: a lone surrogate escape (no Unicode character)"),  # (no UTF-8)
])
def test_a_bad_record_is_set_aside_with_its_reason_and_text(change: dict, reason: str) -> None:
    good = [example(NESTED, n) for n in range(3)]
    bad = {**good[1], **change}
    blob = sink_file([good[0], bad, good[2]])
    parsed = Parser(NESTED).parse([blob])
    assert [r["seq"] for r in parsed.rows.to_pylist()] == [0, 2]
    (b,) = parsed.bad
    assert (b.file, b.reason) == (0, reason)
    assert json.loads(b.text) == json.loads(json.dumps(bad))
    assert (parsed.files[0].records, parsed.files[0].bad) == (3, 1)


@pytest.mark.parametrize("blob, reason", [
    (b"", EMPTY), (b" \n\t", EMPTY), (b'[{"seq": 1}', MALFORMED), (b"7", MALFORMED), (b'[{"a": 1}, 2]', MALFORMED),
    (b'[{"a": 1}] trailing', MALFORMED), (b"\xff\xfe\x00", MALFORMED), (b'[{"x": NaN}]', MALFORMED),
])
def test_empty_and_malformed_files_are_quarantined_whole(blob: bytes, reason: str) -> None:
    parsed = Parser(NESTED).parse([sink_file([example(NESTED, 0)]), blob])
    assert parsed.files[1].reason == reason and parsed.rows.num_rows == 1
    assert parsed.rows.column(FILE).to_pylist() == [0]


def test_an_empty_array_holds_nothing_and_a_lone_object_is_one_record() -> None:
    parsed = Parser(NESTED).parse([b"[]", json.dumps(example(NESTED, 4)).encode(), b"[{}]"])
    assert parsed.files[0].records == 0 and parsed.files[0].reason is None
    assert parsed.files[1].records == 1 and parsed.rows.column("seq").to_pylist() == [4]
    assert parsed.files[2].bad == 1 and parsed.bad[0].reason == "missing field device_id"


def test_undeclared_fields_are_counted_on_both_paths() -> None:
    records = [example(NESTED, n) | ({"firmware": "2.1"} if n % 2 else {}) for n in range(6)]
    for blob in (sink_file(records), indented(records)):
        parsed = Parser(NESTED).parse([blob])
        assert parsed.undeclared == {"firmware": 3} and "firmware" not in parsed.rows.column_names


def test_rows_record_their_file() -> None:
    schema = load_schema()
    parsed = Parser(schema).parse([sink_file([example(schema, n) for n in range(k, k + 2)]) for k in (0, 2, 4)])
    assert parsed.rows.column(FILE).to_pylist() == [0, 0, 1, 1, 2, 2]
    assert parsed.rows.schema.field(FILE).type == pa.int32()


def test_the_sink_layout_is_checked_per_file_on_the_whole_chunk() -> None:
    schema = load_schema()
    good = sink_file([example(schema, n) for n in range(3)])
    variants = [good, good.rstrip(b"\n"), b"[]", b"", b"[{}]\n", good.replace(b",\n", b", \n", 1),
                good.replace(b",\n", b",\r\n", 1), b" " + good, good + b"x", sink_file([example(schema, 9)])]
    layout = sink_layout(variants)
    assert layout.ok.tolist() == [True, True, False, False, True, False, False, False, False, True]
    assert layout.records.tolist() == [3, 3, 1, 1]
    lines = bytes(layout.ndjson).split(b"\n")
    assert sum(1 for line in lines if line.strip()) == 8
    assert all(isinstance(json.loads(line), dict) for line in lines if line.strip())


def test_a_top_level_map_takes_the_fast_path_in_key_order(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [example(WITH_MAP, n) | {"tags": {"zone": f"z{n}", "site": "a"}} for n in range(6)]
    records[2]["tags"] = {}
    records[3].pop("tags")  # absent: null
    expected = Parser(WITH_MAP).parse([indented(records)]).rows.to_pylist()
    assert expected[0]["tags"] == [("site", "a"), ("zone", "z0")] and expected[2]["tags"] == []
    assert expected[3]["tags"] is None

    def no_exact(*args: object) -> None:
        raise AssertionError("the exact path was taken")

    with monkeypatch.context() as m:
        m.setattr(Parser, "_exact", no_exact)
        fast = Parser(WITH_MAP).parse([sink_file(records)])
    assert fast.rows.to_pylist() == expected


@pytest.mark.parametrize("tags, reason", [
    ({"site": 7}, "field tags.site: expected a string, got an integer"),
    ({"site": None}, "field tags.site: null value"),
    ({"site": {"x": "y"}}, "field tags.site: expected a string, got an object"),
])
def test_a_mistyped_map_value_falls_back_to_the_exact_path(tags: dict, reason: str) -> None:
    records = [example(WITH_MAP, n) for n in range(3)]
    records[1]["tags"] = tags
    parsed = Parser(WITH_MAP).parse([sink_file(records)])
    assert [b.reason for b in parsed.bad] == [reason] and parsed.rows.num_rows == 2
