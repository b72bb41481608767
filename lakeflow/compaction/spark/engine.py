"""The ``spark`` engine: Spark schedules, the executors parse and write, the driver only commits.

The batch's files are cut into shares of about equal bytes (largest file first, each to the lightest
share; a whole number of shares per core) and broadcast; one Spark task per share runs
:func:`~lakeflow.compaction.task.run_task` in a Python worker: its files read straight from the raw
table's storage, parsed, bad records set aside, de-duplicated within the share, written as finished
data files into the staging folder on the table's storage. A task returns only metadata (what each file
held, each data file's Iceberg statistics) and its rows' keys; rows never enter the JVM.

De-duplication across shares, and against the table's files in the batch's time range, is an
aggregation of the keys alone (the table's keys read by tasks too): a key seen more than once keeps the
table's row, else the one from the lowest file id (the largest file); only the data files holding a
losing copy are written again, by tasks, without it. A batch without duplicates shuffles keys, never rows.

A retried or speculative task attempt writes files of its own names; only the attempt Spark keeps is
reported, the others stay in the staging folder, which the run removes.
"""

from __future__ import annotations

import heapq
import pickle
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel

from lakeflow.compaction.engine import Compacted, Overlapping, WritePlan
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.rows import Writer
from lakeflow.compaction.spark.session import spark_progress, spark_session
from lakeflow.compaction.task import TaskResult, file_ids, run_task
from lakeflow.schema.arrow import record_type
from lakeflow.schema.types import kind, spelled

BATCH_BYTES = 64 << 20  # raw bytes a task parses, at most (the shares: a whole number per core)
KIND, TASK, PAYLOAD, FILE_ID, WRITTEN = "_kind", "_task", "_payload", "_file_id", "_written"
RESULT, KEY, EXISTING = 0, 1, 2  # a row of the tasks' output: a task's result, a written row's key, a table key
_SPARK_TYPES = {
    "string": "string",
    "long": "bigint",
    "int": "int",
    "boolean": "boolean",
    "date": "date",
    "timestamptz": "timestamp",
    "timestamp": "timestamp_ntz",
}


@dataclass(frozen=True)
class Job:
    """What every task of a batch needs (broadcast): the shares, both tables' storage, the plan."""

    shares: list[list[tuple[int, str]]]
    raw: Storage
    target: Storage
    plan: WritePlan


class SparkEngine:
    """Spark in this driver; the executors do the work. The session starts with the engine."""

    name = "spark"

    def __init__(self, raw: Storage, target: Storage, app_name: str, spark_options: Sequence[str] = ()) -> None:
        from lakeflow.compaction.report import stage

        self.raw, self.target = raw, target
        with stage("spark", "starting the Spark session"):
            self.spark: SparkSession = spark_session(app_name, spark_options)

    def compact(self, files: Sequence[FileEntry], plan: WritePlan, overlapping: Overlapping) -> Compacted:
        ids = file_ids(files)
        size = sum(f.size for f in files)
        cores = self.spark.sparkContext.defaultParallelism
        count = max(1, cores * max(1, -(-size // (cores * BATCH_BYTES))))
        shares = [[(ids[f.rel], f.rel) for f in share] for share in balanced(files, count)]
        job = self.spark.sparkContext.broadcast(Job(shares, self.raw, self.target, plan))
        key = list(plan.schema.key)
        output = self._output(plan)
        with spark_progress(self.spark, "write"):
            rows = (
                self.spark.range(0, len(shares), 1, numPartitions=len(shares))
                .mapInArrow(_tasks(job, bool(key)), output)
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            try:
                results = {r[TASK]: pickle.loads(r[PAYLOAD]) for r in rows.where(F.col(KIND) == RESULT).collect()}
                out = _merged(results, {ids[f.rel]: f.rel for f in files})
                if key and out.written:
                    self._deduplicate(rows, out, results, plan, overlapping, job)
            finally:
                rows.unpersist()
                job.destroy()
        return out

    def _output(self, plan: WritePlan) -> str:
        keys = [f"`{k}` {_spark_type(plan, k)}" for k in plan.schema.key]
        return ", ".join([f"{KIND} int", f"{TASK} int", f"{PAYLOAD} binary", *keys, f"{FILE_ID} int", f"{WRITTEN} int"])

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
        key = list(plan.schema.key)
        times = [s for s in out.files.values() if s.min_ms is not None]
        lo = min(s.min_ms for s in times if s.min_ms is not None)
        hi = max(s.max_ms for s in times if s.max_ms is not None)
        keys = rows.where(F.col(KIND) == KEY).select(*key, TASK, WRITTEN, FILE_ID)
        existing = list(overlapping(lo, hi))
        if existing:
            table_keys = self.spark.range(0, len(existing), 1, numPartitions=min(len(existing), 64)).mapInArrow(
                _table_keys(self.spark.sparkContext.broadcast((existing, self.target, key)), plan),
                self._output(plan),
            )
            keys = keys.unionByName(table_keys.select(*key, TASK, WRITTEN, FILE_ID))
        copies = F.collect_list(F.struct(TASK, WRITTEN, FILE_ID)).alias("copies")
        repeated = keys.groupBy(*key).agg(F.count(F.lit(1)).alias("n"), copies).where(F.col("n") > 1).collect()
        losing: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
        for group in repeated:
            copies_ = sorted(group["copies"], key=lambda c: (c[TASK] != -1, c[FILE_ID]))  # the table's first
            for c in copies_[1:]:
                if c[TASK] != -1:
                    losing.setdefault((c[TASK], c[WRITTEN]), []).append(tuple(group[k] for k in key))
        if not losing:
            return
        redo = self.spark.sparkContext.broadcast(
            [
                (
                    results[t].written[w],
                    pa.Table.from_pylist([dict(zip(key, k, strict=True)) for k in ks], schema=_key_schema(plan)),
                    f"{t}-{w}",
                )
                for (t, w), ks in losing.items()
            ]
        )
        rewritten = {
            r[TASK]: pickle.loads(r[PAYLOAD])
            for r in self.spark.range(0, len(losing), 1, numPartitions=len(losing))
            .mapInArrow(_rewrites(job, redo), self._output(plan))
            .collect()
        }
        for n, ((t, w), _) in enumerate(losing.items()):
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


def _spark_type(plan: WritePlan, name: str) -> str:
    t = plan.schema.field(name).field_type
    return spelled(t) if kind(t) == "decimal" else _SPARK_TYPES[kind(t)]


def _key_schema(plan: WritePlan) -> pa.Schema:
    return pa.schema([pa.field(k, record_type(plan.schema.field(k).field_type)) for k in plan.schema.key])


def _output_schema(plan: WritePlan) -> pa.Schema:
    return pa.schema(
        [
            (KIND, pa.int32()),
            (TASK, pa.int32()),
            (PAYLOAD, pa.binary()),
            *_key_schema(plan),
            (FILE_ID, pa.int32()),
            (WRITTEN, pa.int32()),
        ]
    )


def _result(schema: pa.Schema, task: int, payload: Any) -> pa.RecordBatch:
    columns = [pa.array([RESULT], pa.int32()), pa.array([task], pa.int32()), pa.array([pickle.dumps(payload)])]
    columns += [pa.nulls(1, f.type) for f in list(schema)[3:]]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _tasks(job: Any, keyed: bool) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function over share numbers: each share compacted; its result, then its keys."""

    def tasks(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        j: Job = job.value
        schema = _output_schema(j.plan)
        for numbered in numbers:
            for number in numbered.column(0).to_pylist():
                result = run_task(number, attempt, j.shares[number], j.raw, j.target, j.plan, keys=keyed)
                keys, result.keys = result.keys, None
                yield _result(schema, number, result)
                if keys is not None and keys.num_rows:
                    n = keys.num_rows
                    yield pa.RecordBatch.from_arrays(
                        [
                            pa.array([KEY] * n, pa.int32()),
                            pa.array([number] * n, pa.int32()),
                            pa.nulls(n, pa.binary()),
                            *(keys.column(k).combine_chunks() for k in j.plan.schema.key),
                            keys.column("_file").combine_chunks(),
                            keys.column("_written").combine_chunks(),
                        ],
                        schema=schema,
                    )

    return tasks


def _table_keys(shared: Any, plan: WritePlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function reading the keys of the table's data files (``TASK`` -1)."""
    schema = _output_schema(plan)

    def read(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        uris, target, key = shared.value
        for numbered in numbers:
            for number in numbered.column(0).to_pylist():
                keys = target.read_parquet(target.relative(uris[number]), key)
                n = keys.num_rows
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([EXISTING] * n, pa.int32()),
                        pa.array([-1] * n, pa.int32()),
                        pa.nulls(n, pa.binary()),
                        *(
                            pc.cast(keys.column(k), f.type).combine_chunks()
                            for k, f in zip(key, _key_schema(plan), strict=True)
                        ),
                        pa.array([-1] * n, pa.int32()),
                        pa.array([-1] * n, pa.int32()),
                    ],
                    schema=schema,
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
                yield _result(_output_schema(p), number, writer.rewrite(old, drop, rel))

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
