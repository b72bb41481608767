"""The ``spark`` engine: Spark schedules, the executors parse and write, the driver only commits.

The batch's files are cut into shares of about equal bytes (largest file first, each to the lightest
share; a whole number of shares per core) and broadcast; one Spark task per share runs
:func:`~lakeflow.compaction.task.run_task` in a Python worker: its files read straight from the raw
table's storage, parsed, bad records set aside, de-duplicated within the share, written as finished
data files into the staging folder on the table's storage. A task returns only metadata (what each file
held, each data file's Iceberg statistics) and its rows' keys; rows never enter the JVM.

De-duplication across shares, and against the table's files in the batch's time range, is an
aggregation of 64-bit key hashes alone (:func:`~lakeflow.compaction.rows.key_hashes`; the table's
files hashed by tasks too): only hashes seen more than once reach the driver, which compares the keys
behind them (a collision of different keys is told apart there). A key seen more than once keeps the
table's row, else the one from the lowest file id (the largest file); only the data files holding a
losing copy are written again, by tasks, without it. A batch without duplicates shuffles 8 bytes a
row and 20 bytes of its bookkeeping, never the rows.

A retried or speculative task attempt writes files of its own names; only the attempt Spark keeps is
reported, the others stay in the staging folder, which the run removes.
"""

from __future__ import annotations

import heapq
import pickle
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel

from lakeflow.compaction.engine import Compacted, Overlapping, WritePlan
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.parse import FILE
from lakeflow.compaction.report import stage
from lakeflow.compaction.rows import WRITTEN as WRITTEN_COLUMN
from lakeflow.compaction.rows import Writer, key_hashes
from lakeflow.compaction.spark.session import spark_progress, spark_session
from lakeflow.compaction.task import TaskResult, file_ids, run_task
from lakeflow.schema.arrow import record_type

BATCH_BYTES = 64 << 20  # raw bytes a task parses, at most (the shares: a whole number per core)
# up to this many raw bytes (~2.7 million records of the default schema, ~22 MB of hashes), the tasks hand
# their key hashes to the driver in their results, which compares them in numpy; above, Spark aggregates them
HASHES_TO_DRIVER_BYTES = 512 << 20
KIND, TASK, PAYLOAD, HASH, FILE_ID, WRITTEN = "_kind", "_task", "_payload", "_hash", "_file_id", "_written"
RESULT, KEY = 0, 1  # a row of the tasks' output: a task's result, or a written (or table) row's key hash
OUTPUT = f"{KIND} int, {TASK} int, {PAYLOAD} binary, {HASH} bigint, {FILE_ID} int, {WRITTEN} int"
TABLE = -1  # the task of a key the table holds (its WRITTEN: which of the overlapping files)
SCHEMA = pa.schema(
    [
        (KIND, pa.int32()),
        (TASK, pa.int32()),
        (PAYLOAD, pa.binary()),
        (HASH, pa.int64()),
        (FILE_ID, pa.int32()),
        (WRITTEN, pa.int32()),
    ]
)


@dataclass(frozen=True)
class Job:
    """What every task of a batch needs (broadcast): the shares, both tables' storage, the plan."""

    shares: list[list[tuple[int, str]]]
    raw: Storage
    target: Storage
    plan: WritePlan
    hashes_in_results: bool  # a task's key hashes in its result (a small batch), else as rows Spark aggregates


class SparkEngine:
    """Spark in this driver; the executors do the work. The session starts with the engine."""

    name = "spark"

    def __init__(self, raw: Storage, target: Storage, app_name: str, spark_options: Sequence[str] = ()) -> None:
        self.raw, self.target = raw, target
        with stage("spark", "starting the Spark session"):
            self.spark: SparkSession = spark_session(app_name, spark_options)

    def compact(self, files: Sequence[FileEntry], plan: WritePlan, overlapping: Overlapping) -> Compacted:
        ids = file_ids(files)
        size = sum(f.size for f in files)
        cores = self.spark.sparkContext.defaultParallelism
        count = max(1, cores * max(1, -(-size // (cores * BATCH_BYTES))))
        shares = [[(ids[f.rel], f.rel) for f in share] for share in balanced(files, count)]
        small = size <= HASHES_TO_DRIVER_BYTES
        job = self.spark.sparkContext.broadcast(Job(shares, self.raw, self.target, plan, small))
        key = list(plan.schema.key)
        with spark_progress(self.spark, "write"):
            rows = (
                self.spark.range(0, len(shares), 1, numPartitions=len(shares))
                .mapInArrow(_tasks(job, bool(key)), OUTPUT)
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            try:
                with stage("write", f"{len(shares)} task(s) parse and write {len(files)} files in the executors"):
                    results = {r[TASK]: pickle.loads(r[PAYLOAD]) for r in rows.where(F.col(KIND) == RESULT).collect()}
                out = _merged(results, {ids[f.rel]: f.rel for f in files})
                if key and out.written:
                    with stage("write", "duplicates across tasks and against the table: key hashes compared"):
                        self._deduplicate(rows, out, results, plan, overlapping, job)
            finally:
                rows.unpersist()
                job.destroy()
        return out

    def _deduplicate(
        self,
        rows: DataFrame,
        out: Compacted,
        results: dict[int, TaskResult],
        plan: WritePlan,
        overlapping: Overlapping,
        job: Any,
    ) -> None:
        """Keys seen in more than one share, or already in the table: the losing copies' data files written again."""
        times = [s for s in out.files.values() if s.min_ms is not None]
        lo = min(s.min_ms for s in times if s.min_ms is not None)
        hi = max(s.max_ms for s in times if s.max_ms is not None)
        existing = list(overlapping(lo, hi))
        if job.value.hashes_in_results:
            met = _met_in_driver(results, existing, self.target, list(plan.schema.key))
        else:
            hashes = rows.where(F.col(KIND) == KEY).select(HASH, TASK, WRITTEN, FILE_ID)
            if existing:
                shared = self.spark.sparkContext.broadcast((existing, self.target, list(plan.schema.key)))
                table = self.spark.range(0, len(existing), 1, numPartitions=min(len(existing), 64))
                hashes = hashes.unionByName(
                    table.mapInArrow(_table_hashes(shared), OUTPUT).select(HASH, TASK, WRITTEN, FILE_ID)
                )
            repeated = hashes.groupBy(HASH).count().where(F.col("count") > 1).select(HASH)  # a long key: fast
            met = _by_hash(hashes.join(F.broadcast(repeated), HASH).collect())  # the repeated hashes' copies only
        if not met:
            return
        losing = _losers(met, results, existing, self.target, plan)
        if not losing:
            return
        redo = self.spark.sparkContext.broadcast(
            [(results[t].written[w], drop, f"{t}-{w}") for (t, w), drop in losing.items()]
        )
        rewritten = {
            r[TASK]: pickle.loads(r[PAYLOAD])
            for r in self.spark.range(0, len(losing), 1, numPartitions=len(losing))
            .mapInArrow(_rewrites(job, redo), OUTPUT)
            .collect()
        }
        for n, (t, w) in enumerate(losing):
            old, new = results[t].written[w], rewritten[n]
            out.written.remove(old)
            out.duplicates_dropped += old.records - (new.records if new else 0)
            if new is not None:
                out.written.append(new)
        self.target.delete_many([results[t].written[w].rel for t, w in losing])
        redo.destroy()

    def close(self) -> None:
        self.spark.stop()


def balanced(parts: Sequence[FileEntry], count: int) -> list[list[FileEntry]]:
    """``parts`` in ``count`` shares of about equal bytes (largest first, each to the lightest)."""
    heap = [(0, n) for n in range(count)]
    out: list[list[FileEntry]] = [[] for _ in range(count)]
    for part in sorted(parts, key=lambda p: -p.size):
        size, n = heapq.heappop(heap)
        out[n].append(part)
        heapq.heappush(heap, (size + part.size, n))
    return [b for b in out if b]


def _met_in_driver(
    results: dict[int, TaskResult], existing: Sequence[str], target: Storage, key: list[str]
) -> list[dict[str, Any]]:
    """The repeated hashes of a small batch, from the hashes its tasks returned and the table's files' keys
    (read here): each with its copies (task, written, file id)."""
    parts = [
        (r.hashes, np.full(len(r.hashes), t, np.int32), r.hash_written, r.hash_files)
        for t, r in results.items()
        if r.hashes is not None
    ]
    for n, uri in enumerate(existing):
        table_hashes = key_hashes(target.read_parquet(target.relative(uri), key)).view(np.int64)
        size = len(table_hashes)
        parts.append(
            (table_hashes, np.full(size, TABLE, np.int32), np.full(size, n, np.int32), np.full(size, -1, np.int32))
        )
    if not parts:
        return []
    hashes, tasks, written, files = (np.concatenate(column) for column in zip(*parts, strict=True))
    order = np.argsort(hashes, kind="stable")
    sorted_ = hashes[order]
    same = np.flatnonzero(sorted_[1:] == sorted_[:-1])
    repeated = order[np.unique(np.concatenate([same, same + 1]))]
    return _by_hash(
        [
            {HASH: int(hashes[i]), TASK: int(tasks[i]), WRITTEN: int(written[i]), FILE_ID: int(files[i])}
            for i in repeated
        ]
    )


def _by_hash(rows: Sequence[Any]) -> list[dict[str, Any]]:
    """The copies (task, written, file id) of each repeated hash."""
    out: dict[int, list[Any]] = {}
    for r in rows:
        out.setdefault(int(r[HASH]), []).append(r)
    return [{HASH: h, "copies": copies} for h, copies in out.items()]


def _losers(
    met: Sequence[Any], results: dict[int, TaskResult], existing: Sequence[str], target: Storage, plan: WritePlan
) -> dict[tuple[int, int], pa.Table]:
    """The keys each data file (task, written) must lose, from the hashes that met: the keys behind them read
    from the files that hold them and compared (the table's copy wins, else the lowest file id's)."""
    key = list(plan.schema.key)
    wanted = {int(m[HASH]) for m in met}
    holders = {(c[TASK], c[WRITTEN]) for m in met for c in m["copies"]}
    found: dict[tuple[int, int], dict[int, list[tuple[Any, ...]]]] = {}
    for t, w in holders:
        rel = target.relative(existing[w]) if t == TABLE else results[t].written[w].rel
        keys = target.read_parquet(rel, key)
        hashes = key_hashes(keys).view(np.int64)
        keep = np.flatnonzero(np.isin(hashes, np.fromiter(wanted, dtype=np.int64)))
        rows = keys.take(pa.array(keep)).to_pylist()
        for h, r in zip(hashes[keep].tolist(), rows, strict=True):
            found.setdefault((t, w), {}).setdefault(h, []).append(tuple(r[k] for k in key))
    losing: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
    for m in met:
        by_key: dict[tuple[Any, ...], list[Any]] = {}
        for c in m["copies"]:
            for k in found.get((c[TASK], c[WRITTEN]), {}).get(int(m[HASH]), []):
                by_key.setdefault(k, []).append(c)
        for k, copies in by_key.items():
            ranked = sorted(copies, key=lambda c: (c[TASK] != TABLE, c[FILE_ID]))
            for c in ranked[1:]:
                if c[TASK] != TABLE:
                    losing.setdefault((c[TASK], c[WRITTEN]), []).append(k)
    schema = pa.schema([pa.field(k, record_type(plan.schema.field(k).field_type)) for k in key])
    return {
        tw: pa.Table.from_pylist([dict(zip(key, k, strict=True)) for k in ks], schema=schema)
        for tw, ks in losing.items()
    }


def _result(task: int, payload: Any) -> pa.RecordBatch:
    columns = [pa.array([RESULT], pa.int32()), pa.array([task], pa.int32()), pa.array([pickle.dumps(payload)])]
    columns += [pa.nulls(1, f.type) for f in list(SCHEMA)[3:]]
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)


def _hash_rows(task: int, hashes: np.ndarray, file_ids: pa.Array, written: pa.Array) -> pa.RecordBatch:
    n = len(hashes)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(n, KEY, np.int32)),
            pa.array(np.full(n, task, np.int32)),
            pa.nulls(n, pa.binary()),
            pa.array(hashes.view(np.int64)),
            file_ids,
            written,
        ],
        schema=SCHEMA,
    )


def _tasks(job: Any, keyed: bool) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function over share numbers: each share compacted; its result, then its keys' hashes."""

    def tasks(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        j: Job = job.value
        for numbered in numbers:
            for number in numbered.column(0).to_pylist():
                result = run_task(number, attempt, j.shares[number], j.raw, j.target, j.plan, keys=keyed)
                keys, result.keys = result.keys, None
                hashes = None if keys is None else key_hashes(keys.select(list(j.plan.schema.key)))
                if hashes is not None and j.hashes_in_results:
                    assert keys is not None
                    result.hashes = hashes.view(np.int64)
                    result.hash_files = keys.column(FILE).to_numpy().astype(np.int32)
                    result.hash_written = keys.column(WRITTEN_COLUMN).to_numpy().astype(np.int32)
                yield _result(number, result)
                if hashes is not None and keys is not None and keys.num_rows and not j.hashes_in_results:
                    yield _hash_rows(
                        number, hashes, keys.column(FILE).combine_chunks(), keys.column(WRITTEN_COLUMN).combine_chunks()
                    )

    return tasks


def _table_hashes(shared: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function hashing the keys of the table's data files (task :data:`TABLE`)."""

    def read(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        uris, target, key = shared.value
        for numbered in numbers:
            for number in numbered.column(0).to_pylist():
                hashes = key_hashes(target.read_parquet(target.relative(uris[number]), key))
                n = len(hashes)
                yield _hash_rows(
                    TABLE, hashes, pa.array(np.full(n, -1, np.int32)), pa.array(np.full(n, number, np.int32))
                )

    return read


def _rewrites(job: Any, redo: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function writing data files again without their losing keys."""

    def rewrite(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        j: Job = job.value
        p = j.plan
        writer = Writer(p.schema, p.table_schema, p.spec, dict(p.properties), j.target)
        for numbered in numbers:
            for number in numbered.column(0).to_pylist():
                old, drop, tag = redo.value[number]
                rel = old.rel.replace(".parquet", f"-r{tag}-a{attempt}.parquet")
                yield _result(number, writer.rewrite(old, drop, rel))

    return rewrite


def _merged(results: dict[int, TaskResult], rels: dict[int, str]) -> Compacted:
    out = Compacted()
    for result in results.values():
        out.files.update({rels[i]: s for i, s in result.files.items()})
        out.written.extend(result.written)
        out.bad_records += result.bad_records
        out.duplicates_dropped += result.duplicates_dropped
        out.undeclared.update(result.undeclared)
    return out
