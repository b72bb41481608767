"""Part files → the declared schema's rows, under the record contract (:mod:`lakeflow.schema.records`);
both engines parse with this module (the Spark engine in its executors).

A part file holds one JSON array of record objects (a lone object is one record) and nothing else;
an *empty* file holds no JSON at all and a *malformed* one anything else (a truncated array, a scalar,
an element that is not an object, trailing text): both are quarantined whole. Each record is checked
against the contract: a record breaking it is set aside with its reason and its text as sent, the
file's other records kept; fields the schema does not declare are left out and counted.

Fast path: the Flink sink writes ``[r1,\\nr2,\\n…rN]``, one record per line. Such files are turned into
newline-delimited JSON without a copy per file and parsed many at a time by pyarrow's multi-threaded
JSON reader under the schema (dates and timestamps read as text, checked and cast); the contract's
remaining rules (required nested fields, finite floats, lengths, formats) are checked on the columns.
A chunk that fails anywhere is parsed file by file, and a file that still fails goes the exact path:
Python's ``json`` (numbers as ``Decimal``, so nothing is rounded twice) and the contract record by record.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from lakeflow.schema.arrow import conform, reader_schema, record_schema
from lakeflow.schema.model import TableSchema
from lakeflow.schema.records import Invalid, RecordContract

FILE = "_file"  # index of the row's file in the batch
CHUNK_BYTES = 32 * 1024 * 1024  # raw bytes parsed per pyarrow call
EMPTY = "empty file (no JSON content)"
MALFORMED = "not a JSON array of record objects (malformed or truncated JSON)"
_SPACE = frozenset(b" \t\r\n")
_COMMA, _NEWLINE, _BLANK, _BRACE = ord(","), ord("\n"), ord(" "), ord("{")
_WS = re.compile(r"[ \t\n\r]*")
_DATE = r"^\d{4}-\d{2}-\d{2}$"
_TIMESTAMPTZ = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$"
_TIMESTAMP = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?$"
_FORMATS = {"date": _DATE, "timestamptz": _TIMESTAMPTZ, "timestamp": _TIMESTAMP}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_no_constant)


@dataclass
class FileSummary:
    """What one part file held: its records, those breaking the contract, the event-time range of the
    good ones (epoch ms), or why it is quarantined whole."""

    records: int = 0
    bad: int = 0
    min_ms: int | None = None
    max_ms: int | None = None
    reason: str | None = None  # EMPTY or MALFORMED: quarantined whole


@dataclass(frozen=True)
class BadRecord:
    file: int  # the file's index in the batch
    reason: str
    text: str  # the record as the file holds it


@dataclass
class Parsed:
    """A batch's good rows (the declared fields + :data:`FILE`), what each file held, its bad records
    and the undeclared top-level fields seen (name → records carrying it)."""

    rows: pa.Table
    files: dict[int, FileSummary]
    bad: list[BadRecord] = field(default_factory=list)
    undeclared: Counter[str] = field(default_factory=Counter)


class Parser:
    """The parse of one schema (built once per task)."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.contract = RecordContract(schema.contract())
        self.spec = schema.contract()["fields"]
        self.record_schema = record_schema(schema.fields)
        self.reader = reader_schema(schema.fields)
        self.options = (
            None
            if self.reader is None
            else pj.ParseOptions(explicit_schema=self.reader, unexpected_field_behavior="infer")
        )
        self.time = schema.event_time
        self.time_is_ms = schema.derived_time

    def parse(self, blobs: Sequence[bytes]) -> Parsed:
        """Parse the files ``blobs`` (their index in it is their :data:`FILE`)."""
        out = Parsed(rows=self.empty(), files={})
        tables: list[pa.Table] = []
        chunk: list[tuple[int, memoryview, int]] = []
        size = 0

        def flush() -> None:
            nonlocal size
            if chunk:
                fast = self._fast(chunk, out.undeclared)
                if fast is None:
                    for one in chunk:
                        single = self._fast([one], out.undeclared)
                        tables.append(single if single is not None else self._exact(one[0], blobs[one[0]], out))
                else:
                    tables.append(fast)
            chunk.clear()
            size = 0

        for i, blob in enumerate(blobs):
            lines = as_lines(blob) if self.options is not None else None
            if lines is None:
                tables.append(self._exact(i, blob, out))
            elif lines[1]:
                chunk.append((i, lines[0], lines[1]))
                size += len(blob)
                if size >= CHUNK_BYTES:
                    flush()
            else:
                out.files[i] = FileSummary()  # []
        flush()
        kept = [t for t in tables if t.num_rows]
        out.rows = pa.concat_tables(kept) if kept else self.empty()
        self._summarise(out)
        return out

    def empty(self) -> pa.Table:
        return self.record_schema.append(pa.field(FILE, pa.int32())).empty_table()

    def event_ms(self, rows: pa.Table) -> pa.ChunkedArray:
        """The rows' event times in epoch milliseconds."""
        column = rows.column(self.time)
        if self.time_is_ms:
            return column
        return pc.divide(pc.cast(column, pa.int64()), 1000)

    def _summarise(self, out: Parsed) -> None:
        rows = out.rows
        if rows.num_rows:
            grouped = (
                pa.table({FILE: rows.column(FILE), "t": self.event_ms(rows)})
                .group_by(FILE)
                .aggregate([("t", "count"), ("t", "min"), ("t", "max")])
            )
            for r in grouped.to_pylist():
                s = out.files.setdefault(r[FILE], FileSummary())
                s.records += r["t_count"]
                s.min_ms, s.max_ms = r["t_min"], r["t_max"]
        for b in out.bad:
            s = out.files.setdefault(b.file, FileSummary())
            s.records += 1
            s.bad += 1

    # --- the fast path ---------------------------------------------------------------------------

    def _fast(self, chunk: Sequence[tuple[int, memoryview, int]], undeclared: Counter[str]) -> pa.Table | None:
        """Files in the sink's layout parsed together; None unless every record of every one is good."""
        assert self.options is not None and self.reader is not None
        expected = sum(n for _, _, n in chunk)
        try:
            table = pj.read_json(
                pa.BufferReader(_without_line_end_commas(bytearray(b"\n").join(r for _, r, _ in chunk))),
                parse_options=self.options,
            )
            if table.num_rows != expected:
                return None
            declared = table.select(self.reader.names)
            declared.validate(full=True)  # pyarrow takes invalid UTF-8 into strings as is
            if not all(_fits(declared.column(f["name"]), f, top=True) for f in self.spec):
                return None
            rows = conform(declared, self.record_schema)  # dates and timestamps cast from their text
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        for name in table.column_names[len(self.reader) :]:
            count = table.num_rows - table.column(name).null_count
            if count:
                undeclared[name] += count
        index = np.repeat(np.array([i for i, _, _ in chunk], dtype=np.int32), [n for _, _, n in chunk])
        return rows.append_column(FILE, pa.array(index))

    # --- the exact path --------------------------------------------------------------------------

    def _exact(self, index: int, blob: bytes, out: Parsed) -> pa.Table:
        """One file, record by record."""
        texts = records_of(blob)
        if texts is None or isinstance(texts, str):
            out.files[index] = FileSummary(reason=texts or MALFORMED)
            return self.empty()
        good: list[dict[str, Any]] = []
        for text, record in texts:
            try:
                good.append(self.contract.check(record))
            except Invalid as exc:
                out.bad.append(BadRecord(index, str(exc), text))
                continue
            for name in self.contract.undeclared(record):
                out.undeclared[name] += 1
        out.files.setdefault(index, FileSummary())
        rows = pa.Table.from_pylist(good, schema=self.record_schema)
        return rows.append_column(FILE, pa.array(np.full(len(good), index, dtype=np.int32)))


def _fits(column: pa.ChunkedArray | pa.Array, spec: Mapping[str, Any], *, top: bool = False) -> bool:
    """Whether the parsed values of a member ``spec`` (``{"name", "required", "type"}``) keep the
    contract's rules pyarrow's reader does not (nested required fields, finite floats, lengths,
    formats). ``column`` holds the member's values; nulls are where it is absent."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if top and spec["required"] and values.null_count:
        return False
    return _type_fits(values, spec["type"])


def _type_fits(values: pa.Array, t: Mapping[str, Any]) -> bool:
    kind = t["kind"]
    if kind == "string" and "maxLength" in t:
        longest = pc.max(pc.utf8_length(values)).as_py()
        return longest is None or longest <= t["maxLength"]
    if kind in ("float", "double"):
        return not pc.any(pc.invert(pc.is_finite(values))).as_py()
    if kind in _FORMATS:
        return pc.all(pc.match_substring_regex(values, _FORMATS[kind])).as_py() is not False
    if kind == "struct":
        valid = pc.is_valid(values)
        for i, member in enumerate(t["fields"]):
            child = values.field(i)
            if member["required"] and pc.any(pc.and_(valid, pc.is_null(child))).as_py():
                return False
            if not _type_fits(child, member["type"]):
                return False
        return True
    if kind == "list":
        if "maxItems" in t:
            longest = pc.max(pc.list_value_length(values)).as_py()
            if longest is not None and longest > t["maxItems"]:
                return False
        items = values.flatten()
        if t.get("itemsRequired") and items.null_count:
            return False
        return _type_fits(items, t["items"])
    return True


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
    # takes the exact path: a blank line could hide a line holding two records.
    if blob[first] != _BRACE or blob.count(b",\n{", first, last) != lines:
        return None
    return memoryview(blob)[first : last + 1], lines + 1


def _without_line_end_commas(text: bytearray) -> np.ndarray:
    """``text``, changed in place: each comma that ends a line becomes a space."""
    out = np.frombuffer(text, np.uint8)
    before = np.flatnonzero(out[1:] == _NEWLINE)  # positions of the characters before newlines
    out[before[out[before] == _COMMA]] = _BLANK
    return out


def records_of(blob: bytes) -> list[tuple[str, dict[str, Any]]] | str | None:
    """A file's records, each with its text: the objects of the JSON array it holds (a lone object is
    one record). :data:`EMPTY` for a file without JSON, None for a malformed one."""
    try:
        text = blob.decode(json.detect_encoding(blob))
    except (UnicodeDecodeError, LookupError):
        return None
    pos = _skip(text, 0)
    if pos == len(text):
        return EMPTY
    try:
        if text[pos] == "{":
            record, end = _DECODER.raw_decode(text, pos)
            return [(text[pos:end], record)] if _skip(text, end) == len(text) else None
        if text[pos] != "[":
            return None
        out: list[tuple[str, dict[str, Any]]] = []
        pos = _skip(text, pos + 1)
        if text[pos] == "]":
            return out if _skip(text, pos + 1) == len(text) else None
        while True:
            if text[pos] != "{":
                return None
            record, end = _DECODER.raw_decode(text, pos)
            out.append((text[pos:end], record))
            pos = _skip(text, end)
            if text[pos] == "]":
                return out if _skip(text, pos + 1) == len(text) else None
            if text[pos] != ",":
                return None
            pos = _skip(text, pos + 1)
    except (ValueError, IndexError, RecursionError):  # JSONDecodeError, a text that ends early
        return None


def _skip(text: str, pos: int) -> int:
    """The position of the first character at or after ``pos`` that is not JSON whitespace."""
    match = _WS.match(text, pos)
    assert match is not None  # the pattern matches the empty string too
    return match.end()
