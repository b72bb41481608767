"""pyarrow side, reading: part files (JSON arrays of readings) → one Arrow table, with the same
semantics as Spark's ``multiLine`` reader under the explicit schema.

Fast path: the Flink sink writes ``[r1,\\nr2,\\n…rN]``, one record per line. Raw newlines cannot
occur inside JSON strings, so such a file is turned into newline-delimited JSON by dropping the
brackets and the commas ending lines, and many files at once are parsed by pyarrow's
multi-threaded JSON reader. A chunk that fails, or yields other than one row per line, falls back
to parsing file by file: again fast path first, then Python's ``json`` with per-field checks —
which is how files in any other layout, malformed files and mistyped records are handled.

Semantics (as Spark's PERMISSIVE mode): only a file's first JSON value counts (what follows it is
ignored); a file that does not start with JSON, a JSON scalar, or an array with an element that is
not an object is *malformed*; a top-level object is one record; a field that is missing, null or of
the wrong type is null (the record is then *bad*); unknown fields are ignored; string fields take
other values as their source text; doubles also take "NaN", "Infinity", "-INF"… strings. A file whose
only record has no schema field is malformed too (Spark cannot tell it from a parse failure).
"""

from __future__ import annotations

import json
import math
import re
from json.decoder import scanstring
from typing import Any, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from lakeflow.compaction.engine import FileSummary
from lakeflow.compaction.schema import FIELDS, NAMES, TIME

FILE = "_file"                # index of the row's file in the batch
CHUNK_BYTES = 32 * 1024 * 1024  # raw bytes parsed per pyarrow call
_TYPES = {"string": pa.string(), "bigint": pa.int64(), "double": pa.float64()}
SCHEMA = pa.schema([pa.field(n, _TYPES[t]) for n, t in FIELDS])
_PARSE = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_SPACE = frozenset(b" \t\r\n")
_COMMA, _NEWLINE, _BLANK, _BRACE = ord(","), ord("\n"), ord(" "), ord("{")
_STRINGS = frozenset(n for n, t in FIELDS if t == "string")
_WS = re.compile(r"[ \t\n\r]*")
_SCAN = json.JSONDecoder().scan_once  # (text, position) → (value, end); StopIteration when not JSON
# strings Spark takes for a double (its allowNonNumericNumbers option)
_NON_NUMERIC = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "+INF": math.inf,
                "-Infinity": -math.inf, "-INF": -math.inf}


def parse(blobs: Sequence[bytes]) -> tuple[pa.Table, set[int]]:
    """The rows of every file (``FILE``: its index in ``blobs``), and the indexes of malformed files."""
    tables: list[pa.Table] = []
    malformed: set[int] = set()
    chunk: list[tuple[int, memoryview, int]] = []
    size = 0

    def flush() -> None:
        nonlocal size
        if chunk:
            table = _ndjson(chunk)
            if table is None:
                for one in chunk:
                    single = _ndjson([one])
                    tables.append(single if single is not None else _python(one[0], blobs[one[0]], malformed))
            else:
                tables.append(table)
        chunk.clear()
        size = 0

    for i, blob in enumerate(blobs):
        lines = _as_lines(blob)
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


def summarize(rows: pa.Table, malformed: set[int]) -> dict[int, FileSummary]:
    """Per file index that produced rows (or is malformed): rows, bad rows, time range of good rows.
    As Spark's summary: a file whose only row has every field null counts as malformed."""
    good = good_mask(rows)
    empty = pc.is_null(rows[NAMES[0]])
    for n in NAMES[1:]:
        empty = pc.and_(empty, pc.is_null(rows[n]))
    grouped = pa.table({FILE: rows[FILE], "bad": pc.invert(good).cast(pa.int64()), "empty": empty.cast(pa.int64()),
                        "ts": pc.if_else(good, rows[TIME], pa.scalar(None, pa.int64()))}).group_by(FILE).aggregate(
        [("bad", "count"), ("bad", "sum"), ("empty", "sum"), ("ts", "min"), ("ts", "max")])
    out = {i: FileSummary(rows=1, bad_rows=1, malformed=True, min_ms=None, max_ms=None) for i in malformed}
    for r in grouped.to_pylist():
        out[r[FILE]] = FileSummary(rows=r["bad_count"], bad_rows=r["bad_sum"],
                                   malformed=r["bad_count"] == 1 and r["empty_sum"] == 1,
                                   min_ms=r["ts_min"], max_ms=r["ts_max"])
    return out


def good_mask(rows: pa.Table) -> pa.ChunkedArray:
    """True where every field is present and well typed."""
    mask = pc.is_valid(rows[NAMES[0]])
    for n in NAMES[1:]:
        mask = pc.and_(mask, pc.is_valid(rows[n]))
    return mask


def _as_lines(blob: bytes) -> Optional[tuple[memoryview, int]]:
    """A file in the sink's layout: its records' text (commas ending lines still in) and their
    count; None for any other layout. No copy of the file is made."""
    start, end = blob.find(b"["), blob.rfind(b"]")
    if start < 0 or end < start or blob[:start].strip() or blob[end + 1:].strip():
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
    return memoryview(blob)[first:last + 1], lines + 1


def _ndjson(chunk: Sequence[tuple[int, memoryview, int]]) -> Optional[pa.Table]:
    """Parse files in the sink's layout together, as NDJSON; None unless each line made one row."""
    expected = sum(n for _, _, n in chunk)
    try:
        table = pj.read_json(pa.BufferReader(_without_line_end_commas(bytearray(b"\n").join(r for _, r, _ in chunk))),
                             parse_options=_PARSE)
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
    except (ValueError, IndexError, StopIteration, RecursionError):  # incl. UnicodeDecodeError
        records = None
    if records is None:
        malformed.add(index)
        records = []
    columns = {n: pa.array([_field(r.get(n), t) for r in records], _TYPES[t]) for n, t in FIELDS}
    columns[FILE] = pa.array([index] * len(records), pa.int32())
    return pa.table(columns)


def _records(text: str) -> Optional[list[dict[str, Any]]]:
    """The records of the file's first JSON value, as Spark reads them: what follows that value is
    ignored; an array with an element that is not an object, or a scalar, is malformed (None)."""
    pos = _WS.match(text).end()
    if pos == len(text):
        return []
    if text[pos] == "{":
        return [_record(text, pos)[0]]
    if text[pos] != "[":
        return None
    records: list[dict[str, Any]] = []
    pos = _WS.match(text, pos + 1).end()
    if text[pos] == "]":
        return records
    while text[pos] == "{":
        record, pos = _record(text, pos)
        records.append(record)
        pos = _WS.match(text, pos).end()
        if text[pos] == "]":
            return records
        if text[pos] != ",":
            return None
        pos = _WS.match(text, pos + 1).end()
    return None


def _record(text: str, pos: int) -> tuple[dict[str, Any], int]:
    """The object at ``pos`` and where it ends. A string field holding another JSON value keeps
    that value's source text, as Spark does (``1.50`` stays ``"1.50"``)."""
    record, end = _SCAN(text, pos)
    if all(isinstance(record.get(n), (str, type(None))) for n in _STRINGS):
        return record, end
    record = {}
    pos = _WS.match(text, pos + 1).end()
    while text[pos] == '"':  # (a valid object: _SCAN took it)
        key, pos = scanstring(text, pos + 1)
        start = _WS.match(text, _WS.match(text, pos).end() + 1).end()
        value, pos = _SCAN(text, start)
        record[key] = text[start:pos] if key in _STRINGS and value is not None and not isinstance(value, str) else value
        pos = _WS.match(text, pos).end()
        if text[pos] == "}":
            break
        pos = _WS.match(text, pos + 1).end()
    return record, end


def _field(value: Any, kind: str) -> Any:
    """``value`` as the schema's ``kind``, or None when Spark would not take it."""
    if value is None:
        return None
    if kind == "string":  # (a str: see _record) lone surrogates become '?', as Java encodes them
        return value if value.isascii() else value.encode("utf-8", "replace").decode()
    if isinstance(value, bool):
        return None
    if kind == "bigint":
        return value if isinstance(value, int) and _INT64[0] <= value <= _INT64[1] else None
    if isinstance(value, str):
        return _NON_NUMERIC.get(value)
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # Java's BigInteger.doubleValue()
            return math.inf if value > 0 else -math.inf
    return value if isinstance(value, float) else None
