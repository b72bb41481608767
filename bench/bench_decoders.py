"""Decoder study (issue #33, item 3): which JSON decoder turns the sink's part files into a pyarrow
Table of a declared schema fastest while keeping the record contract.

Measures, on the same generated part files in the same run (``[r1,\\nr2,\\n…rN]\\n``, 100 records a
file, as lakeflow's Flink sink writes them), two schemas:

- **flat**: the default reading (``sensor_id``, ``run_id``, ``seq``, ``timestamp_ms``, three doubles,
  ``location``), ~180 bytes a record;
- **nested**: ``device_id``, ``seq``, ``event_time`` (timestamptz, RFC 3339 strings, 1 in 10 with a
  ``+01:00`` offset), ``battery`` (decimal(5,2) from a string), ``gps`` (struct of 3 doubles),
  ``accel`` (list<double>), ``tags`` (map<string,string>), ``ok`` (boolean), ~200 bytes a record.

Each candidate runs in its own process (one per round; candidates alternate within a round; the
median of the rounds is printed). The time counted is from the list of file paths to a pyarrow
Table of the declared Arrow schema (plus ``_file``), the bad records identified one by one and the
undeclared top-level fields counted — reading the files included (DuckDB reads them itself). The
peak RSS is the process tree's, sampled every 20 ms. A chunk the fast path cannot take (a reader
error) falls back to the exact path file by file, as the contract allows; the bench counts such
files (there should be none on this data).

Candidates (``--candidates``): ``pyarrow`` (today's approach: NDJSON chunks → ``pyarrow.json``),
``polars`` (``read_ndjson`` with a schema), ``msgspec`` (typed structs), ``orjson`` and ``simdjson``
(dicts → Arrow, typed in Python), ``duckdb`` (``read_json``, every field as JSON, ``json_type``
checks and casts in SQL), ``duckdb-lenient`` (``read_json`` with typed columns and no check: the
speed of a reader that coerces), ``exact`` (Python's ``json`` with per-field checks: the
reference and fallback path, timed on ``--exact-share`` of the files). Library-parallel ones run
with 1 and 2 threads; ``msgspec-2p``/``orjson-2p`` run the single-threaded decoder in 2 forked
processes (their Tables sent back over a pipe).

Before timing, ``--check`` (on by default) runs every candidate over conformance probes (mistyped,
missing, null, out-of-range, undeclared… one record each, between two valid ones) and compares
its rows, bad records and undeclared count with the exact path's; the table says how many probes
each keeps and which it breaks.

Run: ``build/bench-decoders-venv/bin/python bench/bench_decoders.py --records 1000000``
(the venv: ``python3.11 -m venv build/bench-decoders-venv`` + ``pip install pyarrow==<.venv's>
polars msgspec pysimdjson orjson duckdb numpy psutil``). Files go to a temp folder, removed at
the end (``--keep`` keeps them). Not a test: figures vary with the machine and its load, which is
printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

PER_FILE = 100
CHUNK_BYTES = 32 * 1024 * 1024  # raw bytes per fast-path call, as lakeflow.compaction.arrow.read
INT64 = (-(2**63), 2**63 - 1)

# A schema: [(name, type)], type one of "string" "long" "double" "boolean" "date" "timestamptz",
# ("decimal", P, S), ("struct", [(name, type)…]), ("list", type), ("map", type). Every field required.
SCHEMAS = {
    "flat": [("sensor_id", "string"), ("run_id", "string"), ("seq", "long"), ("timestamp_ms", "long"),
             ("temperature", "double"), ("humidity", "double"), ("pressure", "double"), ("location", "string")],
    "nested": [("device_id", "string"), ("seq", "long"), ("event_time", "timestamptz"),
               ("battery", ("decimal", 5, 2)),
               ("gps", ("struct", [("lat", "double"), ("lon", "double"), ("alt", "double")])),
               ("accel", ("list", "double")), ("tags", ("map", "string")), ("ok", "boolean")],
}
# (candidate, library-parallel?)
CANDIDATES = {"pyarrow": True, "pyarrow+msgspec": True, "polars": True, "duckdb": True, "duckdb-lenient": True, "msgspec": False,
              "orjson": False, "simdjson": False, "exact": False, "msgspec-2p": False, "orjson-2p": False}
RFC3339 = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$"
DATE = r"^\d{4}-\d{2}-\d{2}$"
NUMBER = r"^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$"  # a decimal given as a string: JSON number syntax


# ---------------------------------------------------------------------------------------------
# Input files


def flat_record(i: int, rnd: random.Random, run: str) -> dict:
    return {"sensor_id": f"sensor-{i % 50:03d}", "run_id": run, "seq": i, "timestamp_ms": 1700000000000 + i * 50,
            "temperature": round(18 + 4 * rnd.random(), 3), "humidity": round(40 + 5 * rnd.random(), 3),
            "pressure": round(1000 + rnd.random(), 3), "location": f"room-{i % 5}"}


def nested_record(i: int, rnd: random.Random, run: str) -> dict:
    ms = i * 37
    sec, milli = divmod(ms, 1000)
    mm, ss = divmod(sec % 3600, 60)
    offset = i % 10 == 0
    hour = (10 + sec // 3600) % 24
    if offset:  # the same instant written in +01:00
        stamp = f"2026-11-28T{(hour + 1) % 24:02d}:{mm:02d}:{ss:02d}.{milli:03d}+01:00" if hour < 23 else \
            f"2026-11-28T{hour:02d}:{mm:02d}:{ss:02d}.{milli:03d}Z"
    else:
        stamp = f"2026-11-28T{hour:02d}:{mm:02d}:{ss:02d}.{milli:03d}Z"
    return {"device_id": f"dev-{i % 1000:04d}", "seq": i, "event_time": stamp,
            "battery": f"{3 + rnd.random():.2f}",
            "gps": {"lat": round(52 + rnd.random(), 4), "lon": round(4 + rnd.random(), 4), "alt": round(30 * rnd.random(), 1)},
            "accel": [round(rnd.uniform(-0.1, 0.1), 3), round(rnd.uniform(-0.1, 0.1), 3), round(9.7 + 0.2 * rnd.random(), 3)],
            "tags": {"site": f"site-{i % 3}", "room": f"room-{i % 12}"}, "ok": i % 7 != 0}


def json_array(rows: list) -> bytes:
    """One part file, laid out as the sink (tests/support/fixtures_compaction.py's json_array)."""
    return ("[" + ",\n".join(json.dumps(r, separators=(",", ":")) for r in rows) + "]\n").encode()


def generate(folder: Path, schema: str, records: int, bad_every: int = 0) -> tuple[int, int]:
    """``records`` records of ``schema`` in files of PER_FILE; their count and bytes. With
    ``bad_every``, one record in that many is mistyped (``"seq":"123"``)."""
    folder.mkdir(parents=True, exist_ok=True)
    make = flat_record if schema == "flat" else nested_record
    rnd = random.Random(records)
    runs = [str(uuid.UUID(int=rnd.getrandbits(128))) for _ in range(4)]
    total = 0
    for n, start in enumerate(range(0, records, PER_FILE)):
        rows = [make(i, rnd, runs[n % 4]) for i in range(start, min(records, start + PER_FILE))]
        if bad_every:
            for r in rows:
                if r["seq"] % bad_every == bad_every // 2:
                    r["seq"] = str(r["seq"])
        blob = json_array(rows)
        (folder / f"part-{n % 4}-{n:07d}.json").write_bytes(blob)
        total += len(blob)
    return (records + PER_FILE - 1) // PER_FILE, total


# Conformance probes: (label, schema, change to the valid record, expected). A change is
# (path, JSON text) — the value's source text, or None to delete the field.
def _probes():
    P = []
    for label, path, text, ok in [
        ("long given \"5\"", "seq", '"5"', False), ("long given 5.0", "seq", "5.0", False),
        ("long given 1e2", "seq", "1e2", False), ("long given true", "seq", "true", False),
        ("long 2^63", "seq", "9223372036854775808", False), ("long -2^63", "seq", "-9223372036854775808", True),
        ("long null", "seq", "null", False), ("string given 5", "sensor_id", "5", False),
        ("string given object", "location", '{"a":1}', False), ("string escapes", "location", '"r\\u00e9\\n\\"x\\""', True),
        ("double given \"18.4\"", "temperature", '"18.4"', False), ("double given 18", "temperature", "18", True),
        ("double 1e400", "pressure", "1e400", False), ("double given true", "humidity", "true", False),
        ("double given \"NaN\"", "humidity", '"NaN"', False), ("field missing", "location", None, False),
        ("undeclared field", "extra", "1", True),
    ]:
        P.append((label, "flat", path, text, ok))
    for label, path, text, ok in [
        ("ts +02:00", "event_time", '"2026-11-28T12:00:00.5+02:00"', True),
        ("ts no offset", "event_time", '"2026-11-28T10:00:00.123"', False),
        ("ts date only", "event_time", '"2026-11-28"', False),
        ("ts space", "event_time", '"2026-11-28 10:00:00Z"', False),
        ("ts +0200", "event_time", '"2026-11-28T10:00:00+0200"', False),
        ("ts number", "event_time", "1764324000000", False),
        ("decimal number", "battery", "3.71", True), ("decimal \"3.7\"", "battery", '"3.7"', True),
        ("decimal \"3.711\"", "battery", '"3.711"', False), ("decimal \"1234.5\"", "battery", '"1234.5"', False),
        ("decimal \"abc\"", "battery", '"abc"', False), ("decimal true", "battery", "true", False),
        ("struct child \"52\"", "gps.lat", '"52"', False), ("struct child missing", "gps.alt", None, False),
        ("struct child null", "gps.lon", "null", False), ("struct given 5", "gps", "5", False),
        ("struct extra child", "gps.speed", "3", True),
        ("list of ints", "accel", "[1,2,3]", True), ("list [\"a\"]", "accel", '["a"]', False),
        ("list [null]", "accel", "[0.1,null]", False), ("list empty", "accel", "[]", True),
        ("map other keys", "tags", '{"x":"1","y":"2","z":"3"}', True), ("map value 1", "tags", '{"site":1}', False),
        ("map value null", "tags", '{"site":null}', False), ("map empty", "tags", "{}", True),
        ("map given list", "tags", '["a"]', False),
        ("bool given 1", "ok", "1", False), ("bool given \"true\"", "ok", '"true"', False),
        ("undeclared field", "extra", '{"k":[1]}', True), ("long given \"5\"", "seq", '"5"', False),
    ]:
        P.append((label, "nested", path, text, ok))
    return P


PROBES = _probes()


def probe_blob(schema: str, path: str, text: str | None) -> bytes:
    """A file of [valid, probed, valid] records."""
    make = flat_record if schema == "flat" else nested_record
    rnd = random.Random(7)
    rows = [make(i + 1, rnd, "00000000-0000-0000-0000-000000000001") for i in range(3)]
    marker = "\u0001PROBE\u0001"
    target, *rest = path.split(".")
    if rest:
        inner = dict(rows[1][target])
        inner.pop(rest[0], None)
        if text is not None:
            inner[rest[0]] = marker
        rows[1][target] = inner
    else:
        rows[1].pop(target, None) if text is None else rows[1].__setitem__(target, marker)
    blob = json_array(rows).decode()
    return blob.replace(json.dumps(marker), text).encode() if text is not None else blob.encode()


# ---------------------------------------------------------------------------------------------
# Arrow types and the checks every fast path shares


def arrow_type(t):
    import pyarrow as pa

    if isinstance(t, str):
        return {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_(),
                "date": pa.date32(), "timestamptz": pa.timestamp("us", "UTC")}[t]
    if t[0] == "decimal":
        return pa.decimal128(t[1], t[2])
    if t[0] == "struct":
        return pa.struct([(n, arrow_type(c)) for n, c in t[1]])
    if t[0] == "list":
        return pa.list_(arrow_type(t[1]))
    return pa.map_(pa.string(), arrow_type(t[1]))


def arrow_schema(spec):
    import pyarrow as pa

    return pa.schema([(n, arrow_type(t)) for n, t in spec] + [("_file", pa.int32())])


class Out:
    """A decoder's result: good rows (declared schema + _file), bad records [(file, row, fields)],
    undeclared top-level fields seen, files that took the exact path."""

    def __init__(self, table, bad, undeclared, fallback):
        self.table, self.bad, self.undeclared, self.fallback = table, bad, undeclared, fallback


class Fallback(Exception):
    """The fast path cannot take this chunk: parse its files with the exact path."""


def bad_rows(arr, t):
    """Numpy mask of the rows where ``arr`` (of the declared Arrow type ``t``) breaks the contract
    past typing: null (required), a non-finite double, a decimal over its precision, a null in a
    struct, list or map."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    bad = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else np.zeros(n, bool)
    if t == "double":
        fin = pc.is_finite(arr).fill_null(True).to_numpy(zero_copy_only=False)
        bad |= ~fin
    elif isinstance(t, tuple) and t[0] == "decimal":
        limit = pa.scalar(__import__("decimal").Decimal(10) ** (t[1] - t[2]), pa.decimal128(38, t[2]))
        over = pc.greater_equal(pc.abs(arr.cast(pa.decimal128(38, t[2]))), limit).fill_null(False)
        bad |= over.to_numpy(zero_copy_only=False)
    elif isinstance(t, tuple) and t[0] == "struct":
        for i, (_, ct) in enumerate(t[1]):
            bad |= bad_rows(pc.struct_field(arr, [i]), ct)
    elif isinstance(t, tuple) and t[0] in ("list", "map"):
        inner = pc.list_flatten(arr) if t[0] == "list" else arr.items.slice(
            arr.offsets[0].as_py(), arr.offsets[-1].as_py() - arr.offsets[0].as_py())
        eb = bad_rows(inner, t[1])
        if eb.any():
            parents = pc.list_parent_indices(arr).to_numpy()
            bad[parents[eb]] = True
    return bad


def finish(table, spec, files, counts, extra_bad=None):
    """Rows of files ``files`` (``counts`` rows each, in order) as read with the declared types:
    the good ones with ``_file``, the bad ones listed. ``extra_bad``: {field: mask} found earlier."""
    import numpy as np
    import pyarrow as pa

    n = table.num_rows
    per_field = dict(extra_bad or {})
    for name, t in spec:
        b = bad_rows(table.column(name), t)
        per_field[name] = per_field[name] | b if name in per_field else b
    anybad = np.zeros(n, bool)
    for b in per_field.values():
        anybad |= b
    fidx = np.repeat(np.asarray(files, np.int32), counts)
    table = table.select([name for name, _ in spec]).append_column("_file", pa.array(fidx))
    bad = []
    if anybad.any():
        starts = np.cumsum(counts) - counts
        first = np.repeat(starts, counts)
        for r in np.flatnonzero(anybad):
            bad.append((int(fidx[r]), int(r - first[r]), sorted(f for f, b in per_field.items() if b[r])))
        table = table.filter(pa.array(~anybad))
    return table, bad


def strings_to(arr, t, spec_pattern=None):
    """A string column → timestamptz/date/decimal, with a mask of the values that break the syntax."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not pa.types.is_string(arr.type):
        arr = arr.cast(pa.string())
    pattern = {"timestamptz": RFC3339, "date": DATE}.get(t, NUMBER) if isinstance(t, str) else NUMBER
    ok = pc.match_substring_regex(arr, pattern).fill_null(True)
    bad = ~ok.to_numpy(zero_copy_only=False)
    if bad.any():
        arr = pc.if_else(ok, arr, pa.scalar(None, pa.string()))
    try:
        if isinstance(t, tuple):  # decimal: exact value, within precision
            wide = arr.cast(pa.decimal128(38, 12))
            exact = pc.equal(wide, pc.round(wide, t[2])).fill_null(True).to_numpy(zero_copy_only=False)
            big = pc.greater_equal(pc.abs(wide), pa.scalar(__import__("decimal").Decimal(10) ** (t[1] - t[2]),
                                                               pa.decimal128(38, 12))).fill_null(False)
            bad |= ~exact | big.to_numpy(zero_copy_only=False)
            if bad.any():
                wide = pc.if_else(pa.array(~bad), wide, pa.scalar(None, wide.type))
            return wide.cast(arrow_type(t), safe=False), bad
        return arr.cast(arrow_type(t)), bad
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:  # e.g. month 13, > 26 integer digits
        raise Fallback(str(e))


def json_texts_to_map(texts, value_type):
    """A column of JSON object texts → map<string, value> (pyarrow's reader infers one column per
    key; struct_to_map), and a mask of rows with a value of another type."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    texts = texts.cast(pa.string())
    n = len(texts)
    nulls = texts.is_null() if texts.null_count else None
    joined = pc.binary_join_element_wise(texts.fill_null("{}") if nulls is not None else texts, "", "\n")
    offsets = np.frombuffer(joined.buffers()[1], np.int32)[joined.offset:joined.offset + n + 1]
    data = joined.buffers()[2][int(offsets[0]):int(offsets[-1])]
    try:
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(use_threads=False),
                             parse_options=pj.ParseOptions(newlines_in_values=False))
    except pa.ArrowInvalid as e:
        raise Fallback(str(e))
    if table.num_rows != n:
        raise Fallback("rows")
    struct = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], names=table.column_names,
                                        mask=nulls) if table.num_columns else pa.array([{}] * n, pa.struct([]))
    return struct_to_map(struct, value_type)


def struct_to_map(arr, value_type):
    """An inferred struct column (one child per key seen) → map<string, value>, entries in child order;
    a mask of rows with a value of another type."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n, k = len(arr), arr.type.num_fields
    bad = np.zeros(n, bool)
    children, names = [], []
    for i in range(k):
        c = pc.struct_field(arr, [i])
        name = arr.type.field(i).name
        if c.type != value_type:
            if pa.types.is_null(c.type):
                continue  # only nulls (JSON null or absent: indistinguishable here)
            bad |= c.is_valid().to_numpy(zero_copy_only=False)
            continue
        children.append(c)
        names.append(name)
    if not children:
        valid = np.zeros((n, 0), bool)
    else:
        valid = np.stack([c.is_valid().to_numpy(zero_copy_only=False) for c in children], axis=1)
    counts = valid.sum(axis=1)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    rows, cols = np.nonzero(valid)  # row-major: per row, children in order
    values = pa.concat_arrays(children) if children else pa.array([], value_type)
    take = cols.astype(np.int64) * n + rows
    items = values.take(pa.array(take))
    keys = pa.array(np.asarray(names, dtype=object)[cols] if len(cols) else [], pa.string())
    nulls = arr.is_null()
    result = pa.MapArray.from_arrays(pa.array(offsets), keys, items, mask=nulls if arr.null_count else None)
    return result, bad


# ---------------------------------------------------------------------------------------------
# The exact path: Python's json, every field checked (reference, and fallback of the fast paths)


class _Bad:
    """NaN / Infinity literals: no field's type."""


def _exact_value(v, t):
    """(value for Arrow, None) or (None, reason)."""
    import datetime as dt
    import decimal
    import math

    if v is None:
        return None, "null"
    if t == "string":
        if type(v) is not str:
            return None, "not a string"
        if not v.isascii():
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return None, "lone surrogate"
        return v, None
    if t == "long":
        return (v, None) if type(v) is int and INT64[0] <= v <= INT64[1] else (None, "not a 64-bit integer")
    if t == "double":
        if type(v) is float or type(v) is int or type(v) is decimal.Decimal:
            f = float(v) if type(v) is not int else (float(v) if abs(v) < 2**1024 else math.inf)
            return (f, None) if math.isfinite(f) else (None, "out of double range")
        return None, "not a number"
    if t == "boolean":
        return (v, None) if type(v) is bool else (None, "not a boolean")
    if t == "date":
        if type(v) is str and re.match(DATE, v):
            try:
                return dt.date.fromisoformat(v), None
            except ValueError:
                pass
        return None, "not a YYYY-MM-DD date"
    if t == "timestamptz":
        if type(v) is str and re.match(RFC3339, v):
            try:
                return dt.datetime.fromisoformat(v).astimezone(dt.timezone.utc), None
            except ValueError:
                pass
        return None, "not an RFC 3339 timestamp with offset"
    kind = t[0]
    if kind == "decimal":
        if type(v) is int or type(v) is decimal.Decimal or (type(v) is str and re.match(NUMBER, v)):
            d = decimal.Decimal(v)
            q = decimal.Decimal(1).scaleb(-t[2])
            try:
                r = d.quantize(q)
            except decimal.InvalidOperation:
                return None, "out of decimal range"
            if r != d:
                return None, f"more than {t[2]} fraction digits"
            if abs(r) >= decimal.Decimal(10) ** (t[1] - t[2]):
                return None, f"more than {t[1]} digits"
            return r, None
        return None, "not a decimal"
    if kind == "struct":
        if type(v) is not dict:
            return None, "not an object"
        out = {}
        for n, ct in t[1]:
            x, why = _exact_value(v.get(n), ct)
            if why:
                return None, f"{n}: {why}"
            out[n] = x
        return out, None
    if kind == "list":
        if type(v) is not list:
            return None, "not an array"
        out = []
        for e in v:
            x, why = _exact_value(e, t[1])
            if why:
                return None, f"element: {why}"
            out.append(x)
        return out, None
    if type(v) is not dict:
        return None, "not an object"
    out = []
    for key, e in v.items():
        x, why = _exact_value(e, t[1])
        if why:
            return None, f"value of {key!r}: {why}"
        out.append((key, x))
    return out, None


def exact_file(blob: bytes, spec):
    """(good rows as {field: value}, bad [(row, fields, reasons)], undeclared); None: malformed."""
    import decimal

    try:
        records = json.loads(blob, parse_float=decimal.Decimal, parse_constant=lambda s: _Bad())
    except ValueError:
        return None
    if type(records) is dict:
        records = [records]
    if type(records) is not list or any(type(r) is not dict for r in records):
        return None
    declared = {n for n, _ in spec}
    good, bad, undeclared = [], [], 0
    for i, r in enumerate(records):
        row, why = {}, {}
        for n, t in spec:
            x, reason = _exact_value(r.get(n), t)
            if reason:
                why[n] = reason
            row[n] = x
        undeclared += sum(1 for k in r if k not in declared)
        if why:
            bad.append((i, sorted(why), why))
        else:
            good.append(row)
    return good, bad, undeclared


def exact_parse(blobs, spec, indexes=None):
    """The exact path over ``blobs`` (file numbers ``indexes``) → Out."""
    import pyarrow as pa

    indexes = range(len(blobs)) if indexes is None else indexes
    cols = {n: [] for n, _ in spec}
    fidx, bad, undeclared = [], [], 0
    for i, blob in zip(indexes, blobs):
        r = exact_file(blob, spec)
        if r is None:
            bad.append((i, -1, ["<malformed file>"]))
            continue
        good, b, u = r
        undeclared += u
        bad.extend((i, row, fields) for row, fields, _ in b)
        for row in good:
            for n, _ in spec:
                cols[n].append(row[n])
        fidx.extend([i] * len(good))
    schema = arrow_schema(spec)
    table = pa.table([pa.array(cols[n], arrow_type(t)) for n, t in spec] + [pa.array(fidx, pa.int32())],
                     schema=schema)
    return Out(table, bad, undeclared, 0)


# ---------------------------------------------------------------------------------------------
# Candidates. Each: (paths, spec, threads) → Out.


def read_blobs(paths):
    out = []
    for p in paths:
        with open(p, "rb") as f:
            out.append(f.read())
    return out


def sink_lines(blob: bytes):
    """(records' text, count) for a file in the sink's layout, None otherwise (read.py's as_lines)."""
    start, end = blob.find(b"["), blob.rfind(b"]")
    if start != 0 or end < start or blob[end + 1:].strip():
        return None
    first, last = start + 1, end - 1
    if first > last:
        return memoryview(b""), 0
    lines = blob.count(b"\n", first, last)
    if blob[first] != 0x7B or blob.count(b",\n{", first, last) != lines:
        return None
    return memoryview(blob)[first:last + 1], lines + 1


def ndjson_chunks(blobs):
    """Chunks of ~CHUNK_BYTES: (file indexes, record counts, NDJSON bytes); files in another
    layout go to the exact path: yielded as (indexes, None, None)."""
    import numpy as np

    idx, counts, parts, size = [], [], [], 0

    def flush():
        text = bytearray(b"\n").join(parts)
        out = np.frombuffer(text, np.uint8)
        before = np.flatnonzero(out[1:] == 10)
        out[before[out[before] == 44]] = 32  # the comma ending a line → a space
        return list(idx), list(counts), text

    for i, blob in enumerate(blobs):
        lines = sink_lines(blob)
        if lines is None:
            yield [i], None, None
            continue
        if lines[1]:
            idx.append(i)
            counts.append(lines[1])
            parts.append(lines[0])
            size += len(blob)
            if size >= CHUNK_BYTES:
                yield flush()
                idx, counts, parts, size = [], [], [], 0
    if parts:
        yield flush()


def chunked(blobs, spec, fast, slow=None):
    """Run ``fast(indexes, counts, ndjson) → (table, bad, undeclared)`` over NDJSON chunks; a
    chunk it refuses is retried file by file, then the exact path — or given whole to
    ``slow(blobs, spec, indexes) → Out`` when there is one."""
    import pyarrow as pa

    tables, bad, undeclared, fallback = [], [], 0, 0
    for idx, counts, text in ndjson_chunks(blobs):
        if counts is None:
            o = exact_parse([blobs[idx[0]]], spec, idx)
            tables.append(o.table); bad += o.bad; undeclared += o.undeclared; fallback += 1
            continue
        try:
            t, b, u = fast(idx, counts, text)
            tables.append(t); bad += b; undeclared += u
            continue
        except Fallback:
            if slow is not None:
                o = slow([blobs[i] for i in idx], spec, idx)
                tables.append(o.table); bad += o.bad; undeclared += o.undeclared; fallback += len(idx)
                continue
        for i in idx:  # file by file
            one = list(ndjson_chunks([blobs[i]]))[0]
            try:
                t, b, u = fast([i], one[1], one[2])
                tables.append(t); bad += b; undeclared += u
            except Fallback:
                o = exact_parse([blobs[i]], spec, [i])
                tables.append(o.table); bad += o.bad; undeclared += o.undeclared; fallback += 1
    return Out(pa.concat_tables(tables) if tables else arrow_schema(spec).empty_table(), bad, undeclared, fallback)


def cand_pyarrow_msgspec(paths, spec, threads):
    """As pyarrow, but a chunk pyarrow refuses goes whole to msgspec (per record, exact)."""
    return cand_pyarrow(paths, spec, threads, slow=msgspec_parse)


def cand_pyarrow(paths, spec, threads, slow=None):
    """Today's approach: NDJSON chunks → pyarrow.json.read_json (explicit schema, undeclared
    fields an error → exact path counts them; maps: an inferred struct → map), post-checks."""
    import pyarrow as pa
    import pyarrow.json as pj

    blobs = read_blobs(paths)
    has_map = any(isinstance(t, tuple) and t[0] == "map" for _, t in spec)

    def read_type(t):
        if t in ("timestamptz", "date"):
            return pa.string()
        if isinstance(t, tuple) and t[0] == "map":
            return pa.struct([])
        if isinstance(t, tuple) and t[0] == "struct":
            return pa.struct([(n, read_type(c)) for n, c in t[1]])
        if isinstance(t, tuple) and t[0] == "list":
            return pa.list_(read_type(t[1]))
        return arrow_type(t)

    schema = pa.schema([(n, read_type(t)) for n, t in spec])
    opts = pj.ParseOptions(explicit_schema=schema, newlines_in_values=False,
                           unexpected_field_behavior="infer" if has_map else "error")
    ropts = pj.ReadOptions(use_threads=threads > 1)
    declared = {n for n, _ in spec}

    def fast(idx, counts, text):
        if has_map and b"null" in text:  # a null map value reads as an absent key: let the exact path judge
            raise Fallback("null")
        try:
            table = pj.read_json(pa.BufferReader(text), read_options=ropts, parse_options=opts)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise Fallback(str(e))
        if table.num_rows != sum(counts):
            raise Fallback("rows")
        extra, undeclared = {}, 0
        for name in table.column_names:
            if name not in declared:
                undeclared += table.num_rows - table.column(name).null_count  # (JSON nulls not counted)
        cols = []
        for name, t in spec:
            col = table.column(name)
            if t == "string":
                try:
                    col.validate(full=True)  # pyarrow takes invalid UTF-8 in as is
                except pa.ArrowInvalid as e:
                    raise Fallback(str(e))
            if t in ("timestamptz", "date"):
                col, extra[name] = strings_to(col, t)
            elif isinstance(t, tuple) and t[0] == "map":
                if has_map and isinstance(col.type, pa.StructType):
                    col, extra[name] = struct_to_map(col, arrow_type(t[1]))
            cols.append(col)
        if has_map:  # (nested unknown fields were inferred into structs: drop them)
            cols = [c if not isinstance(t, tuple) or t[0] != "struct" else _select_struct(c, t)
                    for c, (_, t) in zip(cols, spec)]
        t2 = pa.table(cols, names=[n for n, _ in spec])
        t2, bad = finish(t2, spec, idx, counts, extra)
        return t2, bad, undeclared

    return chunked(blobs, spec, fast, slow)


def _select_struct(col, t):
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if col.type.num_fields == len(t[1]):
        return col
    kids = [pc.struct_field(col, [col.type.get_field_index(n)]) for n, _ in t[1]]
    return pa.StructArray.from_arrays(kids, names=[n for n, _ in t[1]], mask=col.is_null() if col.null_count else None)


def cand_polars(paths, spec, threads):
    """polars.read_ndjson over the same NDJSON chunks, explicit schema; timestamps/decimals/maps
    read as strings and converted in Arrow."""
    import io

    import polars as pl
    import pyarrow as pa

    blobs = read_blobs(paths)

    def ptype(t):
        if t == "string" or t in ("timestamptz", "date") or (isinstance(t, tuple) and t[0] in ("decimal", "map")):
            return pl.String
        if t == "long":
            return pl.Int64
        if t == "double":
            return pl.Float64
        if t == "boolean":
            return pl.Boolean
        if t[0] == "struct":
            return pl.Struct({n: ptype(c) for n, c in t[1]})
        return pl.List(ptype(t[1]))

    schema = {n: ptype(t) for n, t in spec}

    has_map = any(isinstance(t, tuple) and t[0] == "map" for _, t in spec)

    def fast(idx, counts, text):
        if has_map and b"null" in text:  # a null map value reads as an absent key: let the exact path judge
            raise Fallback("null")
        try:
            df = pl.read_ndjson(io.BytesIO(text), schema=schema)
        except Exception as e:  # polars' ComputeError, SchemaError…
            raise Fallback(str(e))
        if df.height != sum(counts):
            raise Fallback("rows")
        extra = {}
        table = df.to_arrow()
        cols = []
        for name, t in spec:
            col = table.column(name)
            if t in ("timestamptz", "date") or (isinstance(t, tuple) and t[0] == "decimal"):
                col, extra[name] = strings_to(col, t)
            elif isinstance(t, tuple) and t[0] == "map":  # polars has no map type: the object comes as JSON text
                col, extra[name] = json_texts_to_map(col, arrow_type(t[1]))
            else:
                col = _large_to_small(col).cast(arrow_type(t))
            cols.append(col)
        t2 = pa.table(cols, names=[n for n, _ in spec])
        t2, bad = finish(t2, spec, idx, counts, extra)
        return t2, bad, 0  # undeclared fields: not visible

    return chunked(blobs, spec, fast)


def _large_to_small(col):
    """Polars' string_view / large types → plain Arrow types, recursively."""
    import pyarrow as pa

    def norm(t):
        if pa.types.is_string_view(t) or pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_struct(t):
            return pa.struct([(f.name, norm(f.type)) for f in t])
        if pa.types.is_large_list(t) or pa.types.is_list(t):
            return pa.list_(norm(t.value_type))
        return t

    return col.cast(norm(col.type))


def _msgspec_types(spec):
    """msgspec structs for the schema: strict; top level forbids unknown fields (→ exact path, which counts them)."""
    import datetime
    import decimal
    from typing import Annotated

    import msgspec

    Long = Annotated[int, msgspec.Meta(ge=INT64[0], le=INT64[1])]

    def mtype(t, name):
        if t == "string":
            return str
        if t == "long":
            return Long
        if t == "double":
            return float
        if t == "boolean":
            return bool
        if t == "date":
            return datetime.date
        if t == "timestamptz":
            return str  # checked and converted in Arrow (msgspec's datetime takes a space, +0200)
        if t[0] == "decimal":
            return decimal.Decimal
        if t[0] == "struct":
            return msgspec.defstruct(name, [(n, mtype(c, n)) for n, c in t[1]], gc=False)
        if t[0] == "list":
            return list[mtype(t[1], name)]
        return dict[str, mtype(t[1], name)]

    rec = msgspec.defstruct("Record", [(n, mtype(t, n)) for n, t in spec], forbid_unknown_fields=True, gc=False)
    return rec


def _columns_from_values(values, t, extra, name):
    """A Python list of one field's decoded values → Arrow array of the declared type."""
    import decimal

    import pyarrow as pa

    if t in ("timestamptz", "date") and values and type(values[0]) is str:
        arr, extra[name] = strings_to(pa.array(values, pa.string()), t)
        return arr
    if isinstance(t, tuple) and t[0] == "decimal":
        try:
            return pa.array(values, arrow_type(t))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            texts = [str(v) if type(v) in (decimal.Decimal, int, float) else (v if type(v) is str else None) for v in values]
            arr, extra[name] = strings_to(pa.array(texts, pa.string()), t)
            return arr
    if isinstance(t, tuple) and t[0] == "struct" and values and not isinstance(values[0], dict):
        kids, sub = [], {}
        for n, ct in t[1]:
            kids.append(_columns_from_values([getattr(v, n) for v in values], ct, sub, n))
        if sub:
            import numpy as np
            extra[name] = np.logical_or.reduce(list(sub.values()))
        return pa.StructArray.from_arrays(kids, fields=list(arrow_type(t)))
    try:
        return pa.array(values, arrow_type(t))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
        raise Fallback(str(e))


def msgspec_parse(blobs, spec, indexes=None):
    import msgspec
    import pyarrow as pa
    from operator import attrgetter

    rec = _msgspec_types(spec)
    dec = msgspec.json.Decoder(list[rec])
    names = [n for n, _ in spec]
    indexes = list(range(len(blobs))) if indexes is None else list(indexes)
    pos = {j: k for k, j in enumerate(indexes)}
    tables, bad, undeclared, fallback = [], [], 0, 0
    recs, fidx, counts, size = [], [], [], 0

    def flush():
        extra = {}
        get = attrgetter(*names)
        cols = list(zip(*map(get, recs))) if recs else [[] for _ in names]
        arrays = [_columns_from_values(list(c), t, extra, n) for c, (n, t) in zip(cols, spec)]
        t, b = finish(pa.table(arrays, names=names), spec, fidx, counts, extra)
        return t, b

    for i, blob in zip(indexes, blobs):
        try:
            got = dec.decode(blob)
        except (msgspec.ValidationError, msgspec.DecodeError):
            o = exact_parse([blob], spec, [i])
            tables.append(o.table); bad += o.bad; undeclared += o.undeclared; fallback += 1
            continue
        recs.extend(got)
        fidx.append(i)
        counts.append(len(got))
        size += len(blob)
        if size >= CHUNK_BYTES:
            try:
                t, b = flush()
                tables.append(t); bad += b
            except Fallback:
                o = exact_parse([blobs[pos[j]] for j in fidx], spec, fidx)
                tables.append(o.table); bad += o.bad; undeclared += o.undeclared; fallback += len(fidx)
            recs, fidx, counts, size = [], [], [], 0
    if recs:
        try:
            t, b = flush()
            tables.append(t); bad += b
        except Fallback:
            o = exact_parse([blobs[pos[j]] for j in fidx], spec, fidx)
            tables.append(o.table); bad += o.bad; undeclared += o.undeclared; fallback += len(fidx)
    return Out(pa.concat_tables(tables) if tables else arrow_schema(spec).empty_table(), bad, undeclared, fallback)


def cand_msgspec(paths, spec, threads):
    """msgspec.json.Decoder(list[Record]) per file (typed structs: exact typing, required fields,
    unknown fields an error), then columns → Arrow; timestamps as strings checked in Arrow."""
    return msgspec_parse(read_blobs(paths), spec)


def dicts_parse(blobs, spec, loads, indexes=None):
    """JSON → Python dicts (``loads``) → typed in Python per column → Arrow."""
    import decimal

    import numpy as np
    import pyarrow as pa

    names = [n for n, _ in spec]
    declared = set(names)
    nfields = len(names)
    indexes = list(range(len(blobs))) if indexes is None else list(indexes)
    tables, bad, undeclared, fallback = [], [], 0, 0
    recs, fidx, counts, size = [], [], [], 0

    def col_check(values, t):
        """(values for Arrow, per-row bad mask or None, extra mask-producing conversion)."""
        if t == "string":
            ok = all(type(v) is str for v in values)
        elif t == "long":
            ok = all(type(v) is int for v in values)
        elif t == "double":
            ok = all(type(v) is float or type(v) is int for v in values)
        elif t == "boolean":
            ok = all(type(v) is bool for v in values)
        elif t in ("timestamptz", "date"):
            ok = all(type(v) is str for v in values)
        elif t[0] == "decimal":
            ok = all(type(v) is str or type(v) is float or type(v) is int for v in values)
        else:
            ok = all(_exact_value(v, t)[1] is None for v in values)
        if ok:
            return None
        return np.array([_exact_value(v, t)[1] is not None for v in values])

    def flush():
        extra, arrays = {}, []
        for n, t in spec:
            values = [r.get(n) for r in recs]
            mask = col_check(values, t)
            if mask is not None:  # mistyped values: null them, flag their rows
                extra[n] = mask
                values = [None if m else v for v, m in zip(values, mask)]
            if t in ("timestamptz", "date"):
                arr, m2 = strings_to(pa.array(values, pa.string()), t)
                extra[n] = extra[n] | m2 if n in extra else m2
            elif isinstance(t, tuple) and t[0] == "decimal":
                texts = [v if type(v) is str else (repr(v) if v is not None else None) for v in values]
                arr, m2 = strings_to(pa.array(texts, pa.string()), t)
                extra[n] = extra[n] | m2 if n in extra else m2
            elif isinstance(t, tuple) and t[0] == "map":
                try:
                    arr = pa.array([list(v.items()) if v is not None else None for v in values], arrow_type(t))
                except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
                    raise Fallback(str(e))
            else:
                try:
                    arr = pa.array(values, arrow_type(t))
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
                    raise Fallback(str(e))
            arrays.append(arr)
        t, b = finish(pa.table(arrays, names=names), spec, fidx, counts, extra)
        u = sum(map(len, recs)) - nfields * len(recs)
        if u or b:  # missing fields make len() lie: count exactly
            u = sum(1 for r in recs for k in r if k not in declared)
        return t, b, u

    def run():
        nonlocal bad, undeclared
        try:
            t, b, u = flush()
            tables.append(t); bad += b; undeclared += u
            return 0
        except Fallback:
            pos = {j: k for k, j in enumerate(indexes)}
            o = exact_parse([blobs[pos[j]] for j in fidx], spec, fidx)
            tables.append(o.table); bad += o.bad; undeclared += o.undeclared
            return len(fidx)

    for i, blob in zip(indexes, blobs):
        try:
            got = loads(blob)
        except Exception:
            got = None
        if type(got) is not list or any(type(r) is not dict for r in got):
            o = exact_parse([blob], spec, [i])
            tables.append(o.table); bad += o.bad; undeclared += o.undeclared; fallback += 1
            continue
        recs.extend(got)
        fidx.append(i)
        counts.append(len(got))
        size += len(blob)
        if size >= CHUNK_BYTES:
            fallback += run()
            recs, fidx, counts, size = [], [], [], 0
    if recs:
        fallback += run()
    return Out(pa.concat_tables(tables) if tables else arrow_schema(spec).empty_table(), bad, undeclared, fallback)


def cand_orjson(paths, spec, threads):
    """orjson.loads per file → dicts; each column type-checked in Python (type(v) is …), → pa.array."""
    import orjson

    return dicts_parse(read_blobs(paths), spec, orjson.loads)


def cand_simdjson(paths, spec, threads):
    """pysimdjson (Parser.parse, recursive → Python objects) per file; then as orjson."""
    import simdjson

    parser = simdjson.Parser()
    return dicts_parse(read_blobs(paths), spec, lambda b: parser.parse(b, True))


def cand_exact(paths, spec, threads):
    """Python's json with per-field checks (the exact path)."""
    return exact_parse(read_blobs(paths), spec)


def _two_procs(paths, spec, fn):
    """``fn`` over each half of the files in 2 forked processes; Tables back as Arrow IPC."""
    import multiprocessing as mp

    import pyarrow as pa

    half = (len(paths) + 1) // 2
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        parts = pool.starmap(_proc_part, [(paths[:half], spec, fn, 0), (paths[half:], spec, fn, half)])
    tables, bad, und, fb = [], [], 0, 0
    for buf, b, u, f in parts:
        tables.append(pa.ipc.open_stream(buf).read_all()); bad += b; und += u; fb += f
    return Out(pa.concat_tables(tables), bad, und, fb)


def _proc_part(paths, spec, fn, base):
    import pyarrow as pa
    import pyarrow.compute as pc

    o = {"msgspec": cand_msgspec, "orjson": cand_orjson}[fn](paths, spec, 1)
    t = o.table.set_column(o.table.num_columns - 1, "_file", pc.add(o.table["_file"], pa.scalar(base, pa.int32())))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue(), [(f + base, r, x) for f, r, x in o.bad], o.undeclared, o.fallback


def cand_msgspec_2p(paths, spec, threads):
    return _two_procs(paths, spec, "msgspec")


def cand_orjson_2p(paths, spec, threads):
    return _two_procs(paths, spec, "orjson")


def _duck_sql(spec, source, threads, lenient):
    """The read_json query: lenient = typed columns; else every field as JSON, checked and cast."""
    def dtype(t):
        if isinstance(t, str):
            return {"string": "VARCHAR", "long": "BIGINT", "double": "DOUBLE", "boolean": "BOOLEAN",
                    "date": "DATE", "timestamptz": "TIMESTAMPTZ"}[t]
        if t[0] == "decimal":
            return f"DECIMAL({t[1]},{t[2]})"
        if t[0] == "struct":
            return "STRUCT(" + ", ".join(f'"{n}" {dtype(c)}' for n, c in t[1]) + ")"
        if t[0] == "list":
            return dtype(t[1]) + "[]"
        return f"MAP(VARCHAR, {dtype(t[1])})"

    if lenient:
        cols = ", ".join(f"'{n}': '{dtype(t)}'" for n, t in spec)
        return (f"SELECT *, '' AS _bad FROM read_json({source}, format='array', columns={{{cols}}}, filename=true)")

    NUM = "('BIGINT','UBIGINT','DOUBLE')"

    def check(j, t):
        """(SQL boolean: j — a JSON value — is a t, SQL value of type t, valid where check)."""
        jt = f"json_type({j})"
        if t == "string":
            return f"{jt} = 'VARCHAR'", f"({j} ->> '$')"
        if t == "long":
            return (f"({jt} = 'BIGINT' OR ({jt} = 'UBIGINT' AND TRY_CAST({j} AS BIGINT) IS NOT NULL))",
                    f"TRY_CAST({j} AS BIGINT)")
        if t == "double":
            return f"({jt} IN {NUM} AND isfinite(TRY_CAST({j} AS DOUBLE)))", f"TRY_CAST({j} AS DOUBLE)"
        if t == "boolean":
            return f"{jt} = 'BOOLEAN'", f"TRY_CAST({j} AS BOOLEAN)"
        if t == "date":
            return (f"({jt} = 'VARCHAR' AND regexp_full_match({j} ->> '$', '{DATE[1:-1]}') "
                    f"AND TRY_CAST({j} ->> '$' AS DATE) IS NOT NULL)", f"TRY_CAST({j} ->> '$' AS DATE)")
        if t == "timestamptz":
            return (f"({jt} = 'VARCHAR' AND regexp_full_match({j} ->> '$', '{RFC3339[1:-1]}') "
                    f"AND TRY_CAST({j} ->> '$' AS TIMESTAMPTZ) IS NOT NULL)", f"TRY_CAST({j} ->> '$' AS TIMESTAMPTZ)")
        if t[0] == "decimal":
            text = f"(CASE WHEN {jt} = 'VARCHAR' THEN {j} ->> '$' WHEN {jt} IN {NUM} THEN {j}::VARCHAR END)"
            p, s = t[1], t[2]
            return (f"(regexp_full_match({text}, '{NUMBER[1:-1]}') AND TRY_CAST({text} AS DECIMAL(38,12)) "
                    f"= TRY_CAST({text} AS DECIMAL({p},{s})))", f"TRY_CAST({text} AS DECIMAL({p},{s}))")
        if t[0] == "struct":
            parts = [check(f"json_extract({j}, '$.\"{n}\"')", c) for n, c in t[1]]
            ok = " AND ".join(f"coalesce({c}, false)" for c, _ in parts)
            val = "struct_pack(" + ", ".join(f'"{n}" := {v}' for (n, _), (_, v) in zip(t[1], parts)) + ")"
            return f"({jt} = 'OBJECT' AND {ok})", val
        if t[0] == "list":
            et = {"double": NUM, "long": "('BIGINT')", "string": "('VARCHAR')", "boolean": "('BOOLEAN')"}[t[1]]
            return (f"({jt} = 'ARRAY' AND coalesce(list_bool_and(list_transform(json_type({j}, '$[*]'), lambda x: x IN {et})), true))",
                    f"TRY_CAST({j} AS {dtype(t)})")
        et = {"string": "('VARCHAR')", "long": "('BIGINT')", "double": NUM, "boolean": "('BOOLEAN')"}[t[1]]
        return (f"({jt} = 'OBJECT' AND coalesce(list_bool_and(list_transform(json_type({j}, '$.*'), lambda x: x IN {et})), true))",
                f"TRY_CAST({j} AS {dtype(t)})")

    cols = ", ".join(f"'{n}': 'JSON'" for n, _ in spec)
    sel, bads = [], []
    for n, t in spec:
        ok, val = check(f'"{n}"', t)
        sel.append(f'CASE WHEN coalesce({ok}, false) THEN {val} END AS "{n}"')
        bads.append(f"CASE WHEN NOT coalesce({ok}, false) THEN '{n}' END")
    return (f"SELECT {', '.join(sel)}, concat_ws(',', {', '.join(bads)}) AS _bad, filename "
            f"FROM read_json({source}, format='array', columns={{{cols}}}, filename=true)")


def duck_parse(paths, spec, threads, lenient, folder=None):
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    con = duckdb.connect()
    con.execute(f"SET threads={threads}")
    source = f"'{folder}/*.json'" if folder else "[" + ", ".join(f"'{p}'" for p in paths) + "]"
    table = con.sql(_duck_sql(spec, source, threads, lenient)).to_arrow_table()
    con.close()
    index = {str(p): i for i, p in enumerate(paths)}
    fn = table.column("filename").dictionary_encode().combine_chunks()
    lookup = np.array([index.get(s, -1) for s in fn.dictionary.to_pylist()], np.int32)
    fidx = lookup[fn.indices.to_numpy()]
    badcol = table.column("_bad")
    good = pc.equal(badcol, "")
    bad = []
    if not pc.all(good).as_py():  # record index within its file: from the exact path for those files
        badfiles = sorted({int(f) for f in fidx[~good.to_numpy(zero_copy_only=False)]})
        for f in badfiles:
            o = exact_file(read_blobs([paths[f]])[0], spec)
            bad += [(f, r, fl) for r, fl, _ in (o[1] if o else [])]
    schema = arrow_schema(spec)
    cols = [table.column(n).cast(arrow_type(t)) for n, t in spec] + [pa.array(fidx, pa.int32())]
    out = pa.table(cols, schema=schema).filter(good)
    return Out(out, bad, 0, 0)  # undeclared fields: not visible


def cand_duckdb(paths, spec, threads, folder=None):
    """DuckDB read_json, every field as JSON; json_type checks + casts in SQL (per row: which fields)."""
    return duck_parse(paths, spec, threads, False, folder)


def cand_duckdb_lenient(paths, spec, threads, folder=None):
    """DuckDB read_json with typed columns: coerces ("5" → 5, 5.5 → 6, 3.711 → 3.71); no check."""
    return duck_parse(paths, spec, threads, True, folder)


FUNCS = {"pyarrow": cand_pyarrow, "pyarrow+msgspec": cand_pyarrow_msgspec, "polars": cand_polars, "msgspec": cand_msgspec, "orjson": cand_orjson,
         "simdjson": cand_simdjson, "duckdb": cand_duckdb, "duckdb-lenient": cand_duckdb_lenient,
         "exact": cand_exact, "msgspec-2p": cand_msgspec_2p, "orjson-2p": cand_orjson_2p}
IMPORTS = {"pyarrow": ["pyarrow.json"], "pyarrow+msgspec": ["pyarrow.json", "msgspec"], "polars": ["polars"], "msgspec": ["msgspec"], "orjson": ["orjson"],
           "simdjson": ["simdjson"], "duckdb": ["duckdb"], "duckdb-lenient": ["duckdb"], "exact": ["json"],
           "msgspec-2p": ["msgspec"], "orjson-2p": ["orjson"]}


# ---------------------------------------------------------------------------------------------
# Workers (one process per measurement)


def normalise(rows):
    """Rows as comparable Python values (map entries sorted)."""
    out = []
    for r in rows:
        out.append({k: (sorted(v) if isinstance(v, list) and v and isinstance(v[0], tuple) else v) for k, v in r.items()})
    return out


def worker_check(cand: str, threads: int, tmp: Path) -> dict:
    """Run the conformance probes; return {label: 'ok' | what went wrong}."""
    results = {}
    for n, (label, schema, path, text, ok) in enumerate(PROBES):
        spec = SCHEMAS[schema]
        blob = probe_blob(schema, path, text)
        folder = tmp / f"probe-{cand}-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        p = folder / "part-0.json"
        p.write_bytes(blob)
        ref = exact_parse([blob], spec)
        ref_bad = {(f, r) for f, r, _ in ref.bad}
        assert (not ref_bad) == ok, (label, ref.bad)
        key = f"{schema}: {label}"
        try:
            o = FUNCS[cand]([str(p)], spec, threads, folder) if cand.startswith("duckdb") else FUNCS[cand]([str(p)], spec, threads)
        except Exception as e:  # noqa: BLE001
            results[key] = f"crashed: {type(e).__name__}: {str(e)[:80]}"
            continue
        got_bad = {(f, r) for f, r, _ in o.bad}
        if got_bad != ref_bad:
            results[key] = "accepted (invalid kept)" if ref_bad and not got_bad else f"bad records {sorted(got_bad)} ≠ {sorted(ref_bad)}"
        elif normalise(o.table.to_pylist()) != normalise(ref.table.to_pylist()):
            results[key] = "values differ"
        elif o.undeclared != ref.undeclared:
            results[key] = f"undeclared {o.undeclared} ≠ {ref.undeclared}"
        else:
            results[key] = "ok" + (" (exact path)" if o.fallback else "")
    return results


def worker_verify(cand: str, threads: int, folder: Path, schema: str, files: int) -> str:
    """The candidate's table on the first ``files`` bench files equals the exact path's."""
    spec = SCHEMAS[schema]
    paths = sorted(str(p) for p in folder.glob("*.json"))[:files]
    if cand.startswith("duckdb"):
        sub = folder.parent / f"verify-{schema}-{cand}"
        sub.mkdir(exist_ok=True)
        for p in paths:
            shutil.copy(p, sub)
        paths = sorted(str(p) for p in sub.glob("*.json"))
        o = FUNCS[cand](paths, spec, threads, sub)
    else:
        o = FUNCS[cand](paths, spec, threads)
    ref = exact_parse(read_blobs(paths), spec)
    same = normalise(o.table.to_pylist()) == normalise(ref.table.to_pylist())
    same_bad = {(f, r) for f, r, _ in o.bad} == {(f, r) for f, r, _ in ref.bad}
    return "same" if same and same_bad else f"DIFFERS (bad={len(o.bad)} vs {len(ref.bad)}, same rows={same})"


def worker_time(cand: str, threads: int, folder: Path, schema: str, share: float) -> dict:
    """Time one candidate over the folder's files (``share`` of them)."""
    import gc
    import importlib

    t0 = time.perf_counter()
    import pyarrow  # noqa: F401
    t1 = time.perf_counter()
    for m in IMPORTS[cand]:
        importlib.import_module(m)
    t2 = time.perf_counter()
    spec = SCHEMAS[schema]
    paths = sorted(str(p) for p in folder.glob("*.json"))
    paths = paths[: max(1, int(len(paths) * share))]
    read = 0.0
    if not cand.startswith("duckdb"):  # time the read alone (the candidates read again: page cache)
        r0 = time.perf_counter()
        n_bytes = sum(len(b) for b in read_blobs(paths))
        read = time.perf_counter() - r0
    else:
        n_bytes = sum(os.path.getsize(p) for p in paths)
    gc.collect()
    gc.disable()  # as a compaction would during a parse: no cyclic garbage is made
    c0 = _cpu()
    s0 = time.perf_counter()
    if cand.startswith("duckdb"):
        o = FUNCS[cand](paths, spec, threads, folder if share >= 1 else None)
    else:
        o = FUNCS[cand](paths, spec, threads)
    s1 = time.perf_counter()
    c1 = _cpu()
    gc.enable()
    assert o.table.schema.equals(arrow_schema(spec)), (o.table.schema, arrow_schema(spec))
    return {"import_pa": t1 - t0, "import": t2 - t0, "read": read, "total": s1 - s0, "cpu": c1 - c0, "rows": o.table.num_rows,
            "bad": len(o.bad), "fallback": o.fallback, "bytes": n_bytes, "undeclared": o.undeclared}


def _cpu() -> float:
    """CPU seconds (user + system) of this process, its threads and its finished children."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


# ---------------------------------------------------------------------------------------------
# The driver


def tree_rss(pid: int) -> int:
    import psutil

    try:
        p = psutil.Process(pid)
        procs = [p] + p.children(recursive=True)
    except psutil.Error:
        return 0
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_worker(args: list[str], env_extra: dict) -> tuple[dict | str, int]:
    """A worker process: its JSON answer and the process tree's peak RSS."""
    env = {**os.environ, **env_extra}
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    peak = 0
    stop = threading.Event()

    def sample():
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, tree_rss(proc.pid))
            stop.wait(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    stop.set()
    th.join()
    if proc.returncode != 0:
        return f"failed: {err.strip().splitlines()[-1] if err.strip() else proc.returncode}", peak
    return json.loads(out.strip().splitlines()[-1]), peak


def thread_env(threads: int) -> dict:
    n = str(threads)
    return {"POLARS_MAX_THREADS": n, "OMP_NUM_THREADS": n, "ARROW_NUM_THREADS": n}  # ARROW_NUM_THREADS: pyarrow's CPU pool


def variants(cands):
    """(candidate, threads) to time."""
    out = []
    for c in cands:
        out.append((c, 1) if not c.endswith("-2p") else (c, 2))
        if CANDIDATES[c] and os.cpu_count() and os.cpu_count() > 1:
            out.append((c, 2))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--schemas", default="flat,nested")
    ap.add_argument("--candidates", default=",".join(CANDIDATES))
    ap.add_argument("--bad-every", type=int, default=0, help="one record in this many mistyped (\"seq\":\"5\")")
    ap.add_argument("--exact-share", type=float, default=0.1, help="share of the files the exact path is timed on")
    ap.add_argument("--no-check", action="store_true", help="skip the conformance probes and the verification")
    ap.add_argument("--tmp", default=None, help="folder for the generated files (default: a new temp folder)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        kind, cand, threads, *rest = a.worker
        if kind == "check":
            print(json.dumps(worker_check(cand, int(threads), Path(rest[0]))))
        elif kind == "verify":
            print(json.dumps(worker_verify(cand, int(threads), Path(rest[0]), rest[1], int(rest[2]))))
        else:
            print(json.dumps(worker_time(cand, int(threads), Path(rest[0]), rest[1], float(rest[2]))))
        return

    cands = [c for c in a.candidates.split(",") if c]
    schemas = [s for s in a.schemas.split(",") if s]
    base = Path(a.tmp) if a.tmp else Path(tempfile.mkdtemp(prefix="bench-decoders-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"# decoder study: {a.records:,} records per schema, {PER_FILE} a file, {a.rounds} rounds; "
          + (f"1 record in {a.bad_every:,} mistyped; " if a.bad_every else "")
          + 
          f"{os.cpu_count()} cores; load {os.getloadavg()[0]:.2f}/{os.getloadavg()[1]:.2f}/{os.getloadavg()[2]:.2f}")
    import importlib.metadata as md

    print("# " + ", ".join(f"{p} {md.version(p)}" for p in ("pyarrow", "polars", "msgspec", "pysimdjson", "orjson", "duckdb")
                           if _has(p)) + f"; Python {sys.version.split()[0]}")
    results: dict = {"checks": {}, "verify": {}, "times": {}, "load": []}
    try:
        sizes = {}
        for s in schemas:
            g0 = time.perf_counter()
            files, nbytes = generate(base / s, s, a.records, a.bad_every)
            sizes[s] = (files, nbytes)
            print(f"# {s}: {files:,} files, {nbytes / 1e6:,.1f} MB ({nbytes / a.records:.0f} B/record), "
                  f"generated in {time.perf_counter() - g0:.1f} s", flush=True)
        if not a.no_check:
            for c in cands:
                got, _ = run_worker(["--worker", "check", c, "1", str(base / "probes")], thread_env(1))
                results["checks"][c] = got
                for s in schemas:
                    v, _ = run_worker(["--worker", "verify", c, "1", str(base / s), s, "50"], thread_env(1))
                    results["verify"][f"{c}/{s}"] = v
            shutil.rmtree(base / "probes", ignore_errors=True)
        runs = variants(cands)
        for r in range(a.rounds):
            load = os.getloadavg()
            results["load"].append(load)
            order = runs if r % 2 == 0 else runs[::-1]  # alternate the order between rounds
            for s in schemas:
                for c, th in order:
                    share = a.exact_share if c == "exact" else 1.0
                    got, peak = run_worker(["--worker", "time", c, str(th), str(base / s), s, str(share)], thread_env(th))
                    if isinstance(got, dict):
                        got["peak"] = peak
                    results["times"].setdefault(f"{s}|{c}|{th}", []).append(got)
            print(f"# round {r + 1}/{a.rounds} done (load at its start {load[0]:.2f})", flush=True)
        results["load"].append(os.getloadavg())
        report(results, schemas, runs, cands, a)
        if a.json:
            Path(a.json).write_text(json.dumps(results, indent=1, default=str))
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)


def _has(pkg: str) -> bool:
    import importlib.metadata as md

    try:
        md.version(pkg)
        return True
    except md.PackageNotFoundError:
        return False


def report(results, schemas, runs, cands, a) -> None:
    print()
    for s in schemas:
        base = None
        rows = []
        for c, th in runs:
            got = results["times"].get(f"{s}|{c}|{th}", [])
            ok = [g for g in got if isinstance(g, dict)]
            if not ok:
                rows.append((c, th, None, got[0] if got else "not run"))
                continue
            med = {k: statistics.median(g[k] for g in ok) for k in ("total", "cpu", "read", "import", "import_pa", "peak")}
            g = ok[0]
            rows.append((c, th, {**med, "rows": g["rows"], "bytes": g["bytes"], "fallback": g["fallback"], "bad": g["bad"],
                                 "spread": (min(x["total"] for x in ok), max(x["total"] for x in ok))}, None))
            if c == "pyarrow" and th == 1:
                base = g["bytes"] / med["total"]
        print(f"## {s} schema ({a.records:,} records; exact timed on {a.exact_share:.0%} of the files)")
        print(f"{'candidate':<16}{'thr':>4}{'time s':>8}{'min–max':>14}{'cpu s':>7}{'MB/s':>8}{'Mrec/s':>8}{'× pyarrow':>10}"
              f"{'read s':>8}{'peak MiB':>9}{'import s':>9}{'fallbk':>7}{'bad':>6}  contract probes")
        for c, th, m, err in rows:
            checks = results["checks"].get(c, {})
            mine = {k: v for k, v in checks.items() if k.startswith(s + ":")} if isinstance(checks, dict) else {}
            broken = [k.split(": ", 1)[1] for k, v in mine.items() if not v.startswith("ok")]
            probes = f"{len(mine) - len(broken)}/{len(mine)}" if mine else "-"
            if m is None:
                print(f"{c:<16}{th:>4}  {err}")
                continue
            mbs = m["bytes"] / m["total"] / 1e6
            print(f"{c:<16}{th:>4}{m['total']:>8.2f}{m['spread'][0]:>7.2f}–{m['spread'][1]:<6.2f}{m['cpu']:>7.2f}{mbs:>8.1f}"
                  f"{m['rows'] / m['total'] / 1e6:>8.2f}{(m['bytes'] / m['total'] / base) if base else float('nan'):>10.2f}"
                  f"{m['read']:>8.2f}{m['peak'] / 2**20:>9.0f}{m['import']:>9.3f}{m['fallback']:>7}{m['bad']:>6}  {probes}")
        print()
    print("## contract probes broken (all others kept; 'exact path' = the fast path fell back for that file)")
    for c in cands:
        checks = results["checks"].get(c)
        if not isinstance(checks, dict):
            print(f"{c}: {checks}")
            continue
        broken = {k: v for k, v in checks.items() if not v.startswith("ok")}
        fell = [k for k, v in checks.items() if v == "ok (exact path)"]
        print(f"{c}: " + ("none" if not broken else "; ".join(f"{k} → {v}" for k, v in broken.items())))
        if fell:
            print(f"   fell back to the exact path on {len(fell)}/{len(checks)} probes")
    print("## verification on the first 50 bench files (rows identical to the exact path's)")
    print("   " + ", ".join(f"{k}: {v}" for k, v in results["verify"].items()))
    l0, l1 = results["load"][0], results["load"][-1]
    print(f"## load average at start {l0[0]:.2f}/{l0[1]:.2f}/{l0[2]:.2f}, at end {l1[0]:.2f}/{l1[1]:.2f}/{l1[2]:.2f}; "
          f"import of pyarrow alone: {statistics.median(g['import_pa'] for v in results['times'].values() for g in v if isinstance(g, dict)):.3f} s")


if __name__ == "__main__":
    main()
