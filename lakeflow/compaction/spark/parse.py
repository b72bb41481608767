"""Spark engine, the executors' side of reading: part files → Arrow record batches, parsed by pyarrow
(:func:`~lakeflow.compaction.arrow.read.ndjson`, the arrow engine's fast path) inside ``mapInArrow``.

Only files in the sink's layout that parse as such are read here; every other file (another layout,
a mistyped field, malformed or empty) comes back as one marker row — all fields null, its id
negated (:func:`fallback_id`) — and the driver hands it to Spark's own JSON reader, so each file is
read with Spark's semantics either way. Imports no pyspark: it runs in the Python workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

import pyarrow as pa

from lakeflow.compaction.arrow.read import CHUNK_BYTES, SCHEMA, as_lines, ndjson
from lakeflow.readings import NAMES

FILE_ID = "_file_id"  # the file's rank in the batch: larger files first (see spark.read)
OUTPUT = SCHEMA.append(pa.field(FILE_ID, pa.int32()))
Files = Sequence[tuple[int, str]]  # (file id, local path) of one balanced batch


class Batches(Protocol):
    """A Spark broadcast of every batch's files (only ``value`` is used)."""

    @property
    def value(self) -> Sequence[Files]: ...


def fallback_id(file_id: int) -> int:
    """The marker id of a file left to Spark's JSON reader (and back: the function is its own inverse)."""
    return -1 - file_id


def parse_batches(batches: Batches) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function over a range of batch numbers: each number's files, parsed."""

    def parse(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for numbered in numbers:
            for number in numbered.column(0).to_pylist():
                yield from parse_files(batches.value[number])

    return parse


def parse_files(files: Files) -> Iterator[pa.RecordBatch]:
    """The rows of ``files`` (``FILE_ID`` each), parsed ``CHUNK_BYTES`` at a time, and a marker row
    for each file not in the sink's layout."""
    chunk: list[tuple[int, memoryview, int]] = []
    size = 0
    for file_id, path in files:
        with open(path, "rb") as f:
            blob = f.read()
        lines = as_lines(blob)
        if lines is None:
            yield _marker(file_id)
        elif lines[1]:
            chunk.append((file_id, lines[0], lines[1]))
            size += len(blob)
            if size >= CHUNK_BYTES:
                yield from _chunk(chunk)
                chunk, size = [], 0
    yield from _chunk(chunk)


def _chunk(chunk: list[tuple[int, memoryview, int]]) -> Iterator[pa.RecordBatch]:
    """One pyarrow call for the chunk; when it fails, one per file (a failing file: a marker)."""
    if not chunk:
        return
    table = ndjson(chunk)
    if table is not None:
        yield from table.rename_columns([*NAMES, FILE_ID]).to_batches()
        return
    for one in chunk:
        single = ndjson([one])
        if single is None:
            yield _marker(one[0])
        else:
            yield from single.rename_columns([*NAMES, FILE_ID]).to_batches()


def _marker(file_id: int) -> pa.RecordBatch:
    columns = [pa.nulls(1, f.type) for f in SCHEMA]
    return pa.RecordBatch.from_arrays([*columns, pa.array([fallback_id(file_id)], pa.int32())], schema=OUTPUT)
