"""Arrow engine, reading: part files → one Arrow table, with the semantics the engine contract
states (:mod:`lakeflow.compaction.engine`: Spark's PERMISSIVE ``multiLine`` reader).

Fast path: the Flink sink writes ``[r1,\\nr2,\\n…rN]``, one record per line. Raw newlines cannot
occur inside JSON strings, so such a file is turned into newline-delimited JSON by dropping the
brackets and the commas ending lines, and many files at once are parsed by pyarrow's
multi-threaded JSON reader. A chunk that fails, or yields other than one row per line, falls back
to parsing file by file: again fast path first, then Python's ``json`` with per-field checks —
which is how files in any other layout, malformed files and mistyped records are handled. A bad
record's faulty fields are null, as in Spark; a malformed file is reported by index (:func:`parse`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from lakeflow.compaction.engine import FileSummary
from lakeflow.readings import FIELDS, NAMES, TIME

FILE = "_file"  # index of the row's file in the batch
CHUNK_BYTES = 32 * 1024 * 1024  # raw bytes parsed per pyarrow call
_TYPES = {str: pa.string(), int: pa.int64(), float: pa.float64()}
SCHEMA = pa.schema([pa.field(n, _TYPES[t]) for n, t in FIELDS])
_PARSE = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore")
_INT64 = (-(2**63), 2**63 - 1)
_SPACE = frozenset(b" \t\r\n")
_COMMA, _NEWLINE, _BLANK, _BRACE = ord(","), ord("\n"), ord(" "), ord("{")
_STRINGS = frozenset(n for n, t in FIELDS if t is str)
_WS = re.compile(r"[ \t\n\r]*")
_SCAN = json.JSONDecoder().raw_decode  # (text, position) → (value, end); ValueError when not JSON
# strings Spark takes for a double (its allowNonNumericNumbers option)
_NON_NUMERIC = {
    "NaN": math.nan,
    "Infinity": math.inf,
    "+Infinity": math.inf,
    "+INF": math.inf,
    "-Infinity": -math.inf,
    "-INF": -math.inf,
}


def parse(blobs: Sequence[bytes]) -> tuple[pa.Table, set[int]]:
    """The rows of every file (``FILE``: its index in ``blobs``), and the indexes of malformed files."""
    tables: list[pa.Table] = []
    malformed: set[int] = set()
    chunk: list[tuple[int, memoryview, int]] = []
    size = 0

    def flush() -> None:
        nonlocal size
        if chunk:
            table = ndjson(chunk)
            if table is None:
                for one in chunk:
                    single = ndjson([one])
                    tables.append(single if single is not None else _python(one[0], blobs[one[0]], malformed))
            else:
                tables.append(table)
        chunk.clear()
        size = 0

    for i, blob in enumerate(blobs):
        lines = as_lines(blob)
        if lines is None:
            tables.append(_python(i, blob, malformed))
            continue
        if lines[1]:
            chunk.append((i, lines[0], lines[1]))
            size += len(blob)
            if size >= CHUNK_BYTES:
                flush()
    flush()
    schema = SCHEMA.append(pa.field(FILE, pa.int32()))
    return pa.concat_tables([t for t in tables if t.num_rows] or [schema.empty_table()]), malformed


def file_summaries(rows: pa.Table, malformed: set[int]) -> dict[int, FileSummary]:
    """Per file index that produced rows (or is malformed): what it held."""
    good = good_mask(rows)
    empty = pc.is_null(rows[NAMES[0]])
    for n in NAMES[1:]:
        empty = pc.and_(empty, pc.is_null(rows[n]))
    grouped = (
        pa.table(
            {
                FILE: rows[FILE],
                "bad": pc.invert(good).cast(pa.int64()),
                "empty": empty.cast(pa.int64()),
                "ts": pc.if_else(good, rows[TIME], pa.scalar(None, pa.int64())),
            }
        )
        .group_by(FILE)
        .aggregate([("bad", "count"), ("bad", "sum"), ("empty", "sum"), ("ts", "min"), ("ts", "max")])
    )
    out = {
        i: FileSummary.of(rows=1, bad_rows=1, empty_rows=1, min_ms=None, max_ms=None)  # as Spark: one null row
        for i in malformed
    }
    for r in grouped.to_pylist():
        out[r[FILE]] = FileSummary.of(
            rows=r["bad_count"],
            bad_rows=r["bad_sum"],
            empty_rows=r["empty_sum"],
            min_ms=r["ts_min"],
            max_ms=r["ts_max"],
        )
    return out


def good_mask(rows: pa.Table) -> pa.ChunkedArray:
    """True where every field is present and well typed."""
    mask = pc.is_valid(rows[NAMES[0]])
    for n in NAMES[1:]:
        mask = pc.and_(mask, pc.is_valid(rows[n]))
    return mask


def as_lines(blob: bytes) -> tuple[memoryview, int] | None:
    """A file in the sink's layout: its records' text (commas ending lines still in) and their
    count; None for any other layout. No copy of the file is made."""
    start, end = blob.find(b"["), blob.rfind(b"]")
    if start < 0 or end < start or blob[:start].strip() or blob[end + 1 :].strip():
        return None
    first, last = start + 1, end - 1
    while first <= last and blob[first] in _SPACE:
        first += 1
    while last >= first and blob[last] in _SPACE:
        last -= 1
    if first > last:
        return memoryview(b""), 0
    lines = blob.count(b"\n", first, last)
    # Every line one record: it starts with '{' and all but the last end with ','. Anything else
    # takes the Python path: a blank line could hide a line holding two records, and pyarrow 16
    # crashes the process (SIGSEGV) on a line starting with 'null'.
    if blob[first] != _BRACE or blob.count(b",\n{", first, last) != lines:
        return None
    return memoryview(blob)[first : last + 1], lines + 1


def ndjson(chunk: Sequence[tuple[int, memoryview, int]]) -> pa.Table | None:
    """Parse files in the sink's layout together, as NDJSON; None unless each line made one row."""
    expected = sum(n for _, _, n in chunk)
    try:
        table = pj.read_json(
            pa.BufferReader(_without_line_end_commas(bytearray(b"\n").join(r for _, r, _ in chunk))),
            parse_options=_PARSE,
        )
        for name in _STRINGS:
            table[name].validate(full=True)  # pyarrow takes invalid UTF-8 into strings as is
    except pa.ArrowInvalid:
        return None
    if table.num_rows != expected:
        return None
    index = np.repeat(np.array([i for i, _, _ in chunk], dtype=np.int32), [n for _, _, n in chunk])
    return table.select(NAMES).append_column(FILE, pa.array(index))


def _without_line_end_commas(text: bytearray) -> np.ndarray:
    """``text``, changed in place: each comma that ends a line becomes a space (2× ``replace``)."""
    out = np.frombuffer(text, np.uint8)
    before = np.flatnonzero(out[1:] == _NEWLINE)  # positions of the characters before newlines
    out[before[out[before] == _COMMA]] = _BLANK
    return out


def _python(index: int, blob: bytes, malformed: set[int]) -> pa.Table:
    """One file parsed in Python with per-field checks."""
    try:
        records = _records(blob.decode(json.detect_encoding(blob)))
    except (ValueError, IndexError, RecursionError):  # incl. UnicodeDecodeError, JSONDecodeError
        records = None
    if records is None:
        malformed.add(index)
        records = []
    columns = {n: pa.array([_field(r.get(n), t) for r in records], _TYPES[t]) for n, t in FIELDS}
    columns[FILE] = pa.array([index] * len(records), pa.int32())
    return pa.table(columns)


def _records(text: str) -> list[dict[str, Any]] | None:
    """The records of the file's first JSON value, as Spark reads them: what follows that value is
    ignored; an array with an element that is not an object, or a scalar, is malformed (None)."""
    pos = _skip(text, 0)
    if pos == len(text):
        return []
    if text[pos] == "{":
        return [_record(text, pos)[0]]
    if text[pos] != "[":
        return None
    records: list[dict[str, Any]] = []
    pos = _skip(text, pos + 1)
    if text[pos] == "]":
        return records
    while text[pos] == "{":
        record, pos = _record(text, pos)
        records.append(record)
        pos = _skip(text, pos)
        if text[pos] == "]":
            return records
        if text[pos] != ",":
            return None
        pos = _skip(text, pos + 1)
    return None


def _record(text: str, pos: int) -> tuple[dict[str, Any], int]:
    """The object at ``pos`` and where it ends. A string field holding another JSON value keeps
    that value's source text, as Spark does (``1.50`` stays ``"1.50"``)."""
    record, end = _SCAN(text, pos)
    if all(isinstance(record.get(n), (str, type(None))) for n in _STRINGS):
        return record, end
    record = {}
    pos = _skip(text, pos + 1)
    while text[pos] == '"':  # (a valid object: _SCAN took it)
        key, pos = _SCAN(text, pos)
        start = _skip(text, _skip(text, pos) + 1)
        value, pos = _SCAN(text, start)
        record[key] = text[start:pos] if key in _STRINGS and value is not None and not isinstance(value, str) else value
        pos = _skip(text, pos)
        if text[pos] == "}":
            break
        pos = _skip(text, pos + 1)
    return record, end


def _skip(text: str, pos: int) -> int:
    """The position of the first character at or after ``pos`` that is not JSON whitespace."""
    match = _WS.match(text, pos)
    assert match is not None  # the pattern matches the empty string too
    return match.end()


def _field(value: Any, kind: type) -> Any:
    """``value`` as the schema's ``kind``, or None when Spark would not take it."""
    if value is None:
        return None
    if kind is str:  # (a str: see _record) lone surrogates become '?', as Java encodes them
        return value if value.isascii() else value.encode("utf-8", "replace").decode()
    if isinstance(value, bool):
        return None
    if kind is int:
        return value if isinstance(value, int) and _INT64[0] <= value <= _INT64[1] else None
    if isinstance(value, str):
        return _NON_NUMERIC.get(value)
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # Java's BigInteger.doubleValue()
            return math.inf if value > 0 else -math.inf
    return value if isinstance(value, float) else None
