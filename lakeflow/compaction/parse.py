"""Part files → the declared schema's rows, under the record contract (:mod:`lakeflow.schema.records`);
both engines parse with this module (the Spark engine in its executors).

A part file holds one JSON array of record objects (a lone object is one record) and nothing else;
an *empty* file holds no JSON at all and a *malformed* one anything else (a truncated array, a scalar,
an element that is not an object, trailing text): both are quarantined whole. Each record is checked
against the contract: a record breaking it is set aside with its reason and its text as sent, the
file's other records kept; fields the schema does not declare are left out and counted.

Fast path: the Flink sink writes ``[r1,\\nr2,\\n…rN]``, one record per line. Such files, many at a time,
are joined and turned into newline-delimited JSON in place, their layout checked with a few numpy passes
over the whole chunk (:func:`sink_layout`), and parsed by pyarrow's multi-threaded JSON reader under the
schema (dates and timestamps read as text, checked and cast); the contract's
remaining rules (required nested fields, finite floats, lengths, formats) are checked on the columns.
A chunk that fails anywhere is parsed file by file, and a file that still fails goes the exact path:
Python's ``json`` (numbers as ``Decimal``, so nothing is rounded twice) and the contract record by record.

Native path, first where it is installed (``lakeflow_native``, rust/: built by ``make install`` where
``cargo`` is): a schema whose declared fields are all flat scalars is decoded by compiled code in one
pass a file, any layout, the contract checked on the way, straight into Arrow buffers; it declines every
file it is not sure the exact path would take whole, with the same values, and those go the ways above.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
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

try:
    from lakeflow_native import decode as native_decode
    from lakeflow_native import decode_files as native_decode_files
except ImportError:  # not built here (no cargo): the other paths parse the same files
    native_decode = native_decode_files = None

# the compiled decoder's answer: each file's records (-1: declined), the taken rows' Arrow buffers per
# field (validity, values, offsets, nulls), the undeclared fields seen (name, records)
NativeColumn = tuple[bytes | None, bytes, bytes | None, int]
Decoded = tuple[list[int], list[NativeColumn] | None, list[tuple[str, int]]]

FILE = "_file"  # index of the row's file in the batch
CHUNK_BYTES = 32 * 1024 * 1024  # raw bytes parsed per pyarrow call
EMPTY = "empty file (no JSON content)"
MALFORMED = "not a JSON array of record objects (malformed or truncated JSON)"
_COMMA, _NEWLINE, _BLANK, _BRACE, _END = ord(","), ord("\n"), ord(" "), ord("{"), ord("}")
_OPEN, _CLOSE = ord("["), ord("]")
_NULL = b"null"
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAX_MAP_KEYS = 256  # an inferred map of more keys is parsed the exact way
_WS = re.compile(r"[ \t\n\r]*")
_DATE = r"^\d{4}-\d{2}-\d{2}$"
_TIMESTAMPTZ = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$"
_TIMESTAMP = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?$"
_FORMATS = {"date": _DATE, "timestamptz": _TIMESTAMPTZ, "timestamp": _TIMESTAMP}
NATIVE_KINDS = frozenset({"string", "long", "int", "double", "float", "boolean"})  # what lakeflow_native decodes


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
    and the undeclared top-level fields seen (name → records carrying it); each row's key hash when the
    reader was asked for them (:func:`lakeflow.compaction.task.parse_files`)."""

    rows: pa.Table
    files: dict[int, FileSummary]
    bad: list[BadRecord] = field(default_factory=list)
    undeclared: Counter[str] = field(default_factory=Counter)
    hashes: np.ndarray | None = None


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
        self.maps = {f["name"]: f["type"] for f in self.spec if f["type"]["kind"] == "map"}  # (top-level)
        self.time = schema.event_time
        self.time_is_ms = schema.derived_time
        flat = len(self.spec) <= 64 and all(f["type"]["kind"] in NATIVE_KINDS for f in self.spec)
        self.native = (  # (name, kind, required, maxLength) of each field, in the rows' order
            [(f["name"], f["type"]["kind"], bool(f["required"]), f["type"].get("maxLength")) for f in self.spec]
            if native_decode is not None and flat
            else None
        )

    def parse(self, blobs: Sequence[bytes]) -> Parsed:
        """Parse the files ``blobs`` (their index in it is their :data:`FILE`)."""
        return self._parse(blobs, native_decode, lambda indexes: [blobs[i] for i in indexes])

    def parse_local(self, paths: Sequence[str], read: Callable[[Sequence[int]], Sequence[bytes]]) -> Parsed:
        """Parse the local files ``paths`` (their index is their :data:`FILE`): the compiled decoder reads
        them itself; ``read(indexes)`` gives the bytes of the others (all of them without it)."""
        return self._parse(paths, native_decode_files, read)

    def _parse(
        self,
        files: Sequence[Any],
        decode: Callable[[list[Any], list[tuple[str, str, bool, int | None]]], Decoded] | None,
        read: Callable[[Sequence[int]], Sequence[bytes]],
    ) -> Parsed:
        """``files`` (bytes or local paths) through ``decode`` (the compiled decoder's function for them)
        first where it applies, the others, as ``read`` gives them, the other ways."""
        out = Parsed(rows=self.empty(), files={})
        tables: list[pa.Table] = []
        chunk: list[int] = []
        size = 0
        pending: Sequence[int] = range(len(files))
        if self.native is not None and decode is not None and files:
            taken, pending = self._native(decode(list(files), self.native), len(files), out)
            tables.append(taken)
        blobs = dict(zip(pending, read(pending), strict=True))

        def flush() -> None:
            nonlocal size
            if chunk:
                tables.extend(self._chunk(chunk, blobs, out))
            chunk.clear()
            size = 0

        for i in pending:
            blob = blobs[i]
            if self.options is None:
                tables.append(self._exact(i, blob, out))
                continue
            chunk.append(i)
            size += len(blob)
            if size >= CHUNK_BYTES:
                flush()
        flush()
        kept = [t for t in tables if t.num_rows]
        out.rows = pa.concat_tables(kept) if kept else self.empty()
        self._summarise(out)
        return out

    def _chunk(self, indexes: list[int], blobs: Mapping[int, bytes], out: Parsed) -> list[pa.Table]:
        """Files parsed together where they are in the sink's layout and every record is good; the others
        (and all of a chunk that fails) one by one, down to the exact path."""
        layout = sink_layout([blobs[i] for i in indexes])
        fast = [i for i, ok in zip(indexes, layout.ok, strict=True) if ok]
        slow = [i for i, ok in zip(indexes, layout.ok, strict=True) if not ok]
        tables = [self._exact(i, blobs[i], out) for i in slow]
        if not fast:
            return tables
        table = self._fast(layout, fast, out.undeclared)
        if table is not None:
            return [*tables, table]
        for i in fast:
            single = self._fast(sink_layout([blobs[i]]), [i], out.undeclared)
            tables.append(single if single is not None else self._exact(i, blobs[i], out))
        return tables

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
        if rows.num_rows:  # by runs of one file (each file's rows are one); the event time is required
            files = rows.column(FILE).to_numpy()
            ms = self.event_ms(rows).to_numpy()
            starts = np.flatnonzero(np.concatenate([[True], files[1:] != files[:-1]]))
            counts = np.diff(np.append(starts, len(files)))
            lows, highs = np.minimum.reduceat(ms, starts), np.maximum.reduceat(ms, starts)
            for file, count, low, high in zip(
                files[starts].tolist(), counts.tolist(), lows.tolist(), highs.tolist(), strict=True
            ):
                s = out.files.setdefault(file, FileSummary())
                s.records += count
                s.min_ms = low if s.min_ms is None else min(s.min_ms, low)
                s.max_ms = high if s.max_ms is None else max(s.max_ms, high)
        for b in out.bad:
            s = out.files.setdefault(b.file, FileSummary())
            s.records += 1
            s.bad += 1

    # --- the native path -------------------------------------------------------------------------

    def _native(self, decoded: Decoded, count: int, out: Parsed) -> tuple[pa.Table, list[int]]:
        """The rows of the files the compiled decoder took, and the indexes of those it declined."""
        taken, columns, undeclared = decoded
        counts = np.asarray(taken, dtype=np.int64)
        ok = counts >= 0
        if columns is None or not ok.any():
            return self.empty(), list(range(count))
        arrays = native_arrays(self.record_schema.types, int(counts[ok].sum()), columns)
        files = np.flatnonzero(ok)
        arrays.append(pa.array(np.repeat(files.astype(np.int32), counts[ok])))
        table = pa.Table.from_arrays(arrays, schema=self.empty().schema)
        table.validate()
        for name, count in undeclared:
            out.undeclared[name] += count
        for i in files.tolist():
            out.files.setdefault(i, FileSummary())
        return table, np.flatnonzero(~ok).tolist()

    # --- the fast path ---------------------------------------------------------------------------

    def _fast(self, layout: SinkLayout, indexes: Sequence[int], undeclared: Counter[str]) -> pa.Table | None:
        """Files in the sink's layout parsed together; None unless every record of every one is good."""
        assert self.options is not None and self.reader is not None
        if self.maps and _NULL in layout.ndjson.tobytes():
            return None  # in an inferred map a null value cannot be told from an absent key
        try:
            table = pj.read_json(pa.BufferReader(layout.ndjson), parse_options=self.options)
            if table.num_rows != int(layout.records.sum()):
                return None
            declared = table.select(self.reader.names)
            for name, spec in self.maps.items():
                inferred = table.column(name).combine_chunks() if name in table.column_names else None
                entries = _map_of(inferred, table.num_rows, spec, self.record_schema.field(name).type)
                if entries is None:
                    return None
                declared = declared.append_column(name, entries)
            declared.validate(full=True)  # pyarrow takes invalid UTF-8 into strings as is
            if not all(_fits(declared.column(f["name"]), f, top=True) for f in self.spec):
                return None
            rows = conform(declared, self.record_schema)  # dates and timestamps cast from their text
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        for name in table.column_names[len(self.reader) :]:
            if name in self.maps:
                continue
            count = table.num_rows - table.column(name).null_count
            if count:
                undeclared[name] += count
        index = np.repeat(np.asarray(indexes, dtype=np.int32), layout.records)
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
                good.append(_storable(self.contract.check(record)))
            except Invalid as exc:
                out.bad.append(BadRecord(index, str(exc), text))
                continue
            for name in self.contract.undeclared(record):
                out.undeclared[name] += 1
        out.files.setdefault(index, FileSummary())
        rows = pa.Table.from_pylist(good, schema=self.record_schema)
        return rows.append_column(FILE, pa.array(np.full(len(good), index, dtype=np.int32)))


def native_arrays(types: Sequence[pa.DataType], rows: int, columns: list[NativeColumn]) -> list[pa.Array]:
    """The compiled decoder's columns (validity, values, offsets, nulls) as Arrow arrays of ``types``."""
    arrays = []
    for t, (validity, values, offsets, nulls) in zip(types, columns, strict=True):
        buffers = [None if validity is None else pa.py_buffer(validity)]
        buffers += [pa.py_buffer(values)] if offsets is None else [pa.py_buffer(offsets), pa.py_buffer(values)]
        arrays.append(pa.Array.from_buffers(t, rows, buffers, null_count=nulls))
    return arrays


def _storable(row: dict[str, Any]) -> dict[str, Any]:
    """``row``, whose strings Arrow can hold; Invalid naming the field that has a lone surrogate (JSON's
    ``\\ud800`` escape alone is no character: the contract takes it, UTF-8 has no bytes for it)."""

    def unicode(value: Any) -> bool:
        if isinstance(value, str):
            return value.isascii() or not _SURROGATE.search(value)
        if isinstance(value, dict):
            return all(unicode(v) for v in value.values())
        return not isinstance(value, (list, tuple)) or all(unicode(v) for v in value)

    for name, value in row.items():
        if not unicode(value):
            raise Invalid(f"field {name}: a lone surrogate escape (no Unicode character)")
    return row


def _map_of(inferred: pa.Array | None, rows: int, spec: Mapping[str, Any], target: pa.DataType) -> pa.Array | None:
    """A top-level map as the reader inferred it — a struct of the keys it met (null where absent) — as a map
    in key order; None when its values are not of the declared kind without coercion (or are structs or
    lists, whose inferred types go unchecked: the exact path takes those)."""
    if inferred is None or pa.types.is_null(inferred.type):
        return pa.nulls(rows, target)
    if not pa.types.is_struct(inferred.type) or inferred.type.num_fields > _MAX_MAP_KEYS:
        return None
    names = sorted(inferred.type.field(i).name for i in range(inferred.type.num_fields))
    kind, value_type = spec["values"]["kind"], target.item_type
    values = []
    for name in names:
        child = inferred.field(name)
        if not _takes(child.type, kind):
            return None
        numeric = pa.types.is_integer(child.type) or pa.types.is_floating(child.type)
        values.append(pc.cast(child, value_type) if numeric else child)  # text is cast (strictly) by conform
    if any(v.type != values[0].type for v in values):
        return None
    present = np.stack([v.is_valid().to_numpy(zero_copy_only=False) for v in values], axis=1)
    present &= inferred.is_valid().to_numpy(zero_copy_only=False)[:, None]
    row, key = np.nonzero(present)  # by row, then key: each map in key order
    offsets = np.concatenate([[0], np.cumsum(present.sum(axis=1))]).astype(np.int32)
    items = pa.concat_arrays(values).take(pa.array(key.astype(np.int64) * rows + row))
    keys = pa.array(np.asarray(names, dtype=object)[key], pa.string())
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items, mask=inferred.is_null())


def _takes(source: pa.DataType, kind: str) -> bool:
    """Whether values the reader inferred as ``source`` are the contract's values of ``kind`` (ints for a
    number or a decimal, text for a date, timestamp or decimal: cast, and checked, later)."""
    if pa.types.is_integer(source):
        return kind in ("long", "int", "double", "float", "decimal")
    if pa.types.is_floating(source):
        return kind in ("double", "float", "decimal")
    if pa.types.is_string(source):
        return kind in ("string", "date", "timestamp", "timestamptz", "decimal")
    return pa.types.is_boolean(source) and kind == "boolean"


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
    if kind == "map":
        return _type_fits(values.items, t["values"])
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


@dataclass(frozen=True)
class SinkLayout:
    """Files joined as newline-delimited JSON: which of them are in the sink's layout, the records of each,
    and the text of those that are (the others left out)."""

    ok: np.ndarray  # per file: in the layout
    records: np.ndarray  # per file in the layout: its records
    ndjson: np.ndarray  # their records, one a line (uint8)


def sink_layout(blobs: Sequence[bytes]) -> SinkLayout:
    """The sink's layout checked on many files at once: each file is ``[{…},\n{…},\n…{…}]`` and an optional
    final newline — it starts with ``[{``, ends with ``}]``, and every newline inside it follows a comma and
    precedes ``{`` (a raw newline cannot occur inside a JSON string, so each line is one record). Files that
    are, joined, become NDJSON in place: the brackets and the commas ending lines turned into spaces."""
    sizes = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
    text = np.frombuffer(bytearray(b"\n").join(blobs), np.uint8)  # a newline between files: each ends a line
    starts = np.cumsum(sizes + 1) - (sizes + 1)
    ends = starts + sizes
    trailing = np.zeros(len(blobs), dtype=bool)
    nonempty = sizes >= 4
    trailing[nonempty] = text[ends[nonempty] - 1] == _NEWLINE
    close = ends - 1 - trailing  # the position of each file's last character but a final newline
    ok = nonempty.copy()
    first = starts[nonempty]
    ok[nonempty] = (
        (text[first] == _OPEN)
        & (text[first + 1] == _BRACE)
        & (text[close[nonempty]] == _CLOSE)
        & (text[close[nonempty] - 1] == _END)
    )
    newlines = np.flatnonzero(text == _NEWLINE)
    owner = np.searchsorted(starts, newlines, side="right") - 1
    inside = newlines < ends[owner]  # not the separators between files
    newlines, owner = newlines[inside], owner[inside]
    final = trailing[owner] & (newlines == ends[owner] - 1)
    inner = newlines[~final]
    inner_owner = owner[~final]
    after = np.minimum(inner + 1, len(text) - 1)
    broken = (text[inner - 1] != _COMMA) | (text[after] != _BRACE)
    ok[np.unique(inner_owner[broken])] = False
    if not ok.all():
        kept = [b for b, good in zip(blobs, ok, strict=True) if good]
        if not kept:
            return SinkLayout(ok=ok, records=np.zeros(0, dtype=np.int64), ndjson=np.zeros(0, dtype=np.uint8))
        inner_layout = sink_layout(kept)
        return SinkLayout(ok=ok, records=inner_layout.records, ndjson=inner_layout.ndjson)
    out = text.copy() if not text.flags.writeable else text
    out[starts] = _BLANK
    out[close] = _BLANK
    out[inner - 1] = _BLANK
    records = np.bincount(inner_owner, minlength=len(blobs)) + 1
    return SinkLayout(ok=ok, records=records, ndjson=out)


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
