"""Good rows → the table's data files: de-duplicated on the key, laid out by partition and sort order,
conformed to the table's schema (field ids included) and written as zstd Parquet, each file's Iceberg
metadata (partition, counts, bounds) computed from the footer the writer returns.

Both engines write with :class:`Writer` (the Spark engine in its executors), so a data file is the
same whichever wrote it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
    schema_to_pyarrow,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform, YearTransform
from pyiceberg.typedef import Record

from lakeflow.compaction.files import Storage
from lakeflow.compaction.parse import FILE
from lakeflow.schema.arrow import TIMESTAMPTZ, conform
from lakeflow.schema.model import TableSchema

ROW = "_row"  # a row's place in the batch: file index (high 32 bits), then position
WRITTEN = "_written"  # the data file a row went into: its place in the written list
KEY_HASH = "_key_hash"  # a row's key_hashes value (int64): a column of the rows whose written keys are collected
SPLIT_MIN_ROWS = 250_000  # a data file split off so that another thread writes it holds at least this many rows
_ORDER_KEEPING = (IdentityTransform, YearTransform, MonthTransform, DayTransform, HourTransform)
_US = {"hour": 3_600_000_000, "day": 86_400_000_000}
_LABEL = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class WrittenFile:
    """A data file written into the staging folder, and what Iceberg records of it."""

    rel: str  # target-relative
    partition: tuple[Any, ...]  # the partition's values, as Iceberg stores them
    partition_path: str  # ts_day=2026-11-28 ("" for an unpartitioned table)
    records: int
    size: int
    min_ms: int  # the event-time range of its rows (epoch ms)
    max_ms: int
    stats: dict[str, Any]  # pyiceberg DataFileStatistics, serialised (counts, sizes, bounds)

    @property
    def label(self) -> str:
        """The partition in a file name: its values joined (``2026-11-28``), or ``all``."""
        if not self.partition_path:
            return "all"
        return "-".join(_LABEL.sub("_", p.split("=", 1)[1]) for p in self.partition_path.split("/"))


class Writer:
    """Writes one table's data files: ``table_schema`` is the table's (after this run's evolution),
    ``spec`` its partition spec, ``properties`` its table properties (which columns get statistics),
    ``threads`` how many files it writes at once."""

    def __init__(
        self,
        schema: TableSchema,
        table_schema: Schema,
        spec: PartitionSpec,
        properties: dict[str, str],
        target: Storage,
        threads: int = 1,
    ) -> None:
        self.schema, self.table_schema, self.spec, self.target = schema, table_schema, spec, target
        self.threads = threads  # data files written at once
        self.arrow = schema_to_pyarrow(table_schema, include_field_ids=True)
        self.stats_plan = compute_statistics_plan(table_schema, properties)
        self.id_mapping = parquet_path_to_id_mapping(table_schema)

    # --- de-duplication ----------------------------------------------------------------------------

    def first_per_key(self, rows: pa.Table, hashes: np.ndarray | None = None) -> pa.Table:
        """``rows`` keeping the first of each key (by :data:`FILE`, then position); all without a key.
        ``hashes``: the rows' :func:`key_hashes`, when the caller has them."""
        if not self.schema.key or rows.num_rows < 2:
            return rows
        if hashes is None:
            hashes = key_hashes(rows.select(list(self.schema.key)))
        ordered = np.sort(hashes)
        shared = ordered[1:][ordered[1:] == ordered[:-1]]
        if not len(shared):  # every key's hash differs: so does every key
            return rows
        import pandas as pd  # (a hash table's lookups: numpy's isin sorts both arrays)

        suspects = np.flatnonzero(pd.Series(hashes, copy=False).isin(shared).to_numpy())  # compared exactly
        picked = rows.select([*self.schema.key, FILE]).take(pa.array(suspects))
        order = pa.array((picked.column(FILE).to_numpy().astype(np.int64) << 32) + suspects)
        keyed = picked.drop_columns([FILE]).append_column(ROW, order)
        firsts = keyed.group_by(list(self.schema.key), use_threads=False).aggregate([(ROW, "min")])
        if firsts.num_rows == len(suspects):
            return rows
        kept = np.ones(rows.num_rows, dtype=bool)
        kept[suspects] = False
        kept[firsts.column(f"{ROW}_min").to_numpy() & 0xFFFFFFFF] = True
        mask = pa.array(kept)
        with ThreadPoolExecutor(max(1, self.threads)) as pool:  # a column a thread (pyarrow lets go of the GIL)
            columns = list(pool.map(lambda column: pc.filter(column, mask), rows.columns))
        return pa.Table.from_arrays(columns, schema=rows.schema)

    def without_keys(self, rows: pa.Table, keys: pa.Table) -> pa.Table:
        """``rows`` whose key is not among ``keys`` (null key parts match null)."""
        if not self.schema.key or keys.num_rows == 0 or rows.num_rows == 0:
            return rows
        mine = rows.select(list(self.schema.key))
        left = _joinable(mine).append_column(ROW, pa.array(np.arange(rows.num_rows)))
        theirs = keys.select(list(self.schema.key)).cast(mine.schema)  # (large_string in the table's files)
        right = _joinable(theirs).group_by(left.column_names[:-1]).aggregate([])
        kept = left.join(right, left.column_names[:-1], join_type="left anti").column(ROW).to_numpy()
        return rows.take(pa.array(np.sort(kept)))

    # --- layout and writing ------------------------------------------------------------------------

    def with_time_column(self, rows: pa.Table) -> pa.Table:
        """``rows`` with the derived timestamp column of an epoch-millisecond event time."""
        s = self.schema
        if not s.derived_time or s.event_time_column in rows.column_names:
            return rows
        ts = pc.cast(pc.cast(rows.column(s.event_time), pa.timestamp("ms", tz="UTC")), TIMESTAMPTZ)
        return rows.append_column(s.event_time_column, ts)

    def partition_values(self, rows: pa.Table) -> list[pa.Array]:
        """Each of the table's partition fields' value per row (as Iceberg stores it: days since the epoch…)."""
        out = []
        for p in self.spec.fields:
            name = self.table_schema.find_column_name(p.source_id)
            assert name is not None, p
            t = p.transform
            if isinstance(t, (HourTransform, DayTransform)):
                out.append(_floor_divided(rows.column(name), _US["hour" if isinstance(t, HourTransform) else "day"]))
                continue
            column = rows.column(name).combine_chunks()
            if isinstance(t, (MonthTransform, YearTransform)):
                years = pc.subtract(pc.year(column), 1970)
                months = pc.add(pc.multiply(years, 12), pc.subtract(pc.month(column), 1))
                out.append(pc.cast(years if isinstance(t, YearTransform) else months, pa.int32()))
            elif isinstance(t, IdentityTransform):
                out.append(column)
            else:  # bucket (and any other): per distinct value, in Python
                apply = t.transform(self.table_schema.find_field(p.source_id).field_type)
                unique = pc.unique(column)
                values = pa.array([None if v is None else apply(v) for v in unique.to_pylist()])
                out.append(pc.take(values, pc.index_in(column, unique)))
        return out

    def write(
        self, rows: pa.Table, files: int, folder: str, prefix: str, keys: list[pa.Table] | None = None
    ) -> list[WrittenFile]:
        """Write ``rows`` (the declared fields and :data:`FILE`, key-unique) as about ``files`` data files
        (or one a thread, of at least :data:`SPLIT_MIN_ROWS` rows, when that is more) under the
        target-relative ``folder``, each within one partition, sorted; names start with
        ``prefix``. With ``keys``, each file's rows' :data:`KEY_HASH` (a column of ``rows``, not written) and
        :data:`FILE` are appended to it (``WRITTEN``: the file's place in the result)."""
        if rows.num_rows == 0:
            return []
        rows = self.with_time_column(rows)
        parts = self.partition_values(rows)
        first = {} if self._sorted_by_partition() else {f"_p{i}": values for i, values in enumerate(parts)}
        keyed = pa.table({**first, **{n: rows.column(n) for n in self.schema.sort_by}})
        order = pc.sort_indices(keyed, sort_keys=[(n, "ascending") for n in keyed.column_names])
        parts = [p.take(order) for p in parts]
        cuts = _partition_cuts(parts, rows.num_rows)
        step = max(1, math.ceil(rows.num_rows / max(1, files)))
        if self.threads > 1:  # a file a thread rather than one file on one core, when the files stay large
            step = min(step, max(SPLIT_MIN_ROWS, math.ceil(rows.num_rows / self.threads)))
        pieces: list[tuple[int, int, tuple[Any, ...], str, str]] = []  # start, end, partition, its path, name
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            values = tuple(p[lo].as_py() for p in parts)
            path = self.spec.partition_to_path(Record(*values), self.table_schema) if parts else ""
            for start in range(lo, hi, step):
                rel = f"{folder}/{path + '/' if path else ''}{prefix}-{len(pieces):05d}.parquet"
                pieces.append((start, min(hi, start + step), values, path, rel))
        if keys is not None:
            for n, (start, end, *_) in enumerate(pieces):
                piece = rows.select([KEY_HASH, FILE]).take(order.slice(start, end - start))
                keys.append(piece.append_column(WRITTEN, pa.array(np.full(piece.num_rows, n, dtype=np.int32))))
            rows = rows.drop_columns([KEY_HASH])

        def write_piece(start: int, end: int, values: tuple[Any, ...], path: str, rel: str) -> WrittenFile:
            piece = rows.take(order.slice(start, end - start))  # (each piece taken on its own thread)
            footer, size = self.target.write_parquet(rel, conform(piece, self.arrow))
            stats = data_file_statistics_from_parquet_metadata(footer, self.stats_plan, self.id_mapping)
            window = self._event_ms(piece)
            return WrittenFile(
                rel=rel,
                partition=values,
                partition_path=path,
                records=end - start,
                size=size,
                min_ms=int(window.min()),
                max_ms=int(window.max()),
                stats=stats.to_serialized_dict(),
            )

        if self.threads <= 1 or len(pieces) < 2:
            return [write_piece(*piece) for piece in pieces]
        largest_first = sorted(pieces, key=lambda piece: piece[0] - piece[1])  # (no thread left idle long)
        with ThreadPoolExecutor(min(self.threads, len(pieces))) as pool:  # pyarrow writes without the GIL
            writing = {piece[4]: pool.submit(write_piece, *piece) for piece in largest_first}  # (by name)
            return [writing[rel].result() for *_, rel in pieces]

    def _sorted_by_partition(self) -> bool:
        """Whether rows in sort order are in partition order too: each partition field an order-keeping
        transform (identity, year, month, day, hour) of the first sort column — the partition values then
        need no sorting of their own (a fifth of the sort's time at 10M readings)."""
        first = self.schema.sort_by[0] if self.schema.sort_by else None
        return first is not None and all(
            isinstance(p.transform, _ORDER_KEEPING) and self.table_schema.find_column_name(p.source_id) == first
            for p in self.spec.fields
        )

    def rewrite(self, old: WrittenFile, drop: pa.Table, rel: str) -> WrittenFile | None:
        """``old`` written again as ``rel`` without the rows whose key is in ``drop``; None if none is left."""
        rows = self.without_keys(self.target.read_parquet(old.rel, None), drop)
        if rows.num_rows == 0:
            return None
        footer, size = self.target.write_parquet(rel, conform(rows, self.arrow))
        ms = self._event_ms(rows)
        return WrittenFile(
            rel=rel,
            partition=old.partition,
            partition_path=old.partition_path,
            records=rows.num_rows,
            size=size,
            min_ms=int(ms.min()),
            max_ms=int(ms.max()),
            stats=data_file_statistics_from_parquet_metadata(
                footer, self.stats_plan, self.id_mapping
            ).to_serialized_dict(),
        )

    def _event_ms(self, rows: pa.Table) -> np.ndarray:
        column = rows.column(self.schema.event_time)
        if self.schema.derived_time:
            return column.to_numpy()
        return pc.cast(column, pa.int64()).to_numpy() // 1000


def key_hashes(keys: pa.Table) -> np.ndarray:
    """A 64-bit hash of each row's key (its columns in order, null a value of its own): equal keys hash
    alike in every process of a run, so two tasks' rows meet on it; different keys may collide (rarely:
    the caller compares the keys of rows that meet)."""
    out = np.full(keys.num_rows, 0x9E3779B97F4A7C15, dtype=np.uint64)
    for n, name in enumerate(keys.column_names):
        column = keys.column(name).combine_chunks()
        values = _column_hash(column)
        if column.null_count:
            nulls = column.is_null().to_numpy(zero_copy_only=False)
            values[nulls] = np.uint64(0xD6E8FEB86659FD93 + n)
        out *= np.uint64(31)
        out ^= values
    return _mix(out)


def _column_hash(column: pa.Array) -> np.ndarray:
    """Each value's 64-bit hash (a new array: the caller may write into it)."""
    if pa.types.is_decimal(column.type):
        column = pc.cast(column, pa.string())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        from pandas.util import hash_array  # siphash in C, with a fixed key: alike in every process

        encoded = pc.dictionary_encode(column.fill_null(""))  # each distinct string hashed once
        distinct = hash_array(np.asarray(encoded.dictionary.to_pylist(), dtype=object))
        return distinct[encoded.indices.to_numpy(zero_copy_only=False)]
    if pa.types.is_date32(column.type):
        column = pc.cast(column, pa.int32())
    ints = pc.cast(column, pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return _mix(ints.view(np.uint64) if ints.dtype == np.int64 else ints.astype(np.int64).view(np.uint64))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (into a new array): every input bit moves every output bit."""
    with np.errstate(over="ignore"):
        x = x.astype(np.uint64)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
        return x


def _floor_divided(timestamps: pa.ChunkedArray, step_us: int) -> pa.Array:
    """Each timestamp's microseconds floor-divided by ``step_us``, as int32 (null stays null). Without nulls,
    chunk by chunk into one array, never a combined copy of the column (fresh memory is what costs: 0.3 s
    → 0.04 s at 10M)."""
    if timestamps.null_count:
        us = pc.cast(pc.cast(timestamps.combine_chunks(), pa.int64()), pa.float64())
        return pc.cast(pc.floor(pc.divide(us, step_us)), pa.int32())
    out = np.empty(len(timestamps), dtype=np.int32)
    at = 0
    for chunk in timestamps.chunks:
        out[at : at + len(chunk)] = pc.cast(chunk, pa.int64()).to_numpy() // step_us
        at += len(chunk)
    return pa.array(out)


def _partition_cuts(parts: Sequence[pa.Array], n: int) -> list[int]:
    """Where the (sorted) partition values change: [0, …, n]."""
    change = np.zeros(max(0, n - 1), dtype=bool)
    for p in parts:
        a = p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p
        same = pc.fill_null(pc.equal(a.slice(1), a.slice(0, n - 1)), False).to_numpy(zero_copy_only=False)
        both_null = pc.and_(pc.is_null(a.slice(1)), pc.is_null(a.slice(0, n - 1))).to_numpy(zero_copy_only=False)
        change |= ~(same | both_null)
    return [0, *(np.flatnonzero(change) + 1).tolist(), n]


def _joinable(keys: pa.Table) -> pa.Table:
    """Key columns a hash join matches null to null in: each column with nulls filled by a zero of its
    type, beside whether it was null."""
    columns, names = [], []
    for name in keys.column_names:
        column = keys.column(name)
        columns += [pc.fill_null(column, _zero(column.type)), pc.is_null(column)]
        names += [name, f"{name}_is_null"]
    return pa.Table.from_arrays(columns, names=names)


def _zero(t: pa.DataType) -> pa.Scalar:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.scalar("", t)
    if pa.types.is_boolean(t):
        return pa.scalar(False)
    source = pa.int32() if pa.types.is_date32(t) else pa.int64()
    return pc.cast(pa.array([0], source), t)[0]
