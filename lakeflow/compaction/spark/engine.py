"""The ``spark`` engine: Spark schedules, the executors parse and write, the driver only commits.

The batch's files are cut into shares of about equal bytes (largest file first, each to the lightest
share; a whole number of shares per core) and broadcast; one Spark task per share runs
:func:`~lakeflow.compaction.task.run_task` in a Python worker: its files read straight from the raw
table's storage, parsed, bad records set aside, de-duplicated within the share, written as finished
data files into the staging folder on the table's storage. A task returns only metadata (what each file
held, each data file's Iceberg statistics) and its rows' keys; rows never enter the JVM.

De-duplication across shares, and against the table's files in the batch's time range, compares 64-bit
key hashes alone (:func:`~lakeflow.compaction.rows.key_hashes`), never rows: a small batch's tasks
return theirs in their results and the driver compares them; a large batch's tasks write theirs, sorted,
into the staging folder, and a second stage — one task per range of hash values — reads its slice of
every task's file (ranged reads: each task returned where the ranges start in its file), adds the
table's keys in that range, and returns the hashes seen more than once. The driver compares the keys
behind those (a collision of different keys is told apart there). A key seen more than once keeps the
table's row, else the one from the lowest file id (the largest file); only the data files holding a
losing copy are written again, by tasks, without it. Nothing passes through the JVM's rows but each
task's result.

A retried or speculative task attempt writes files of its own names; only the attempt Spark keeps is
reported, the others stay in the staging folder, which the run removes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

from lakeflow.compaction.engine import Compacted, Overlapping, WritePlan
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.parse import FILE
from lakeflow.compaction.report import stage
from lakeflow.compaction.rows import KEY_HASH, Writer, key_hashes
from lakeflow.compaction.rows import WRITTEN as WRITTEN_COLUMN
from lakeflow.compaction.spark.session import spark_progress, spark_session, stop_session
from lakeflow.compaction.task import TaskResult, file_ids, run_task
from lakeflow.schema.arrow import record_type

log = logging.getLogger(__name__)
BATCH_BYTES = 128 << 20  # raw bytes a task parses, at most (the shares: a whole number per core)
# up to this many raw bytes (~2.7 million records of the default schema, ~22 MB of hashes), the tasks hand
# their key hashes to the driver in their results; above, they write them for a second stage to compare
HASHES_TO_DRIVER_BYTES = 512 << 20
TASK = "_task"
HASH, FILE_ID, WRITTEN = "_hash", "_file_id", "_written"  # a copy of a key: its hash, file id and data file
# a stage's function over its tasks' numbers (``mapPartitions``): each number with its task's result
Stage = Callable[[Iterable[int]], Iterable[tuple[int, Any]]]
TABLE = -1  # the task of a key the table holds (its WRITTEN: which of the overlapping files)
HASHES = "_hashes"  # under the staging folder: each task's key hashes, sorted


@dataclass(frozen=True)
class Job:
    """What every task of a batch needs (broadcast): the shares, both tables' storage, the plan."""

    shares: list[list[tuple[int, str]]]
    raw: Storage
    target: Storage
    plan: WritePlan
    ranges: int  # hash ranges of the second stage; 0: a small batch, each task's key hashes in its result


class SparkEngine:
    """Spark in this driver; the executors do the work. The session starts with the engine."""

    name = "spark"

    def __init__(
        self,
        raw: Storage,
        target: Storage,
        app_name: str,
        spark_options: Sequence[str] = (),
        last_of_pass: bool = False,
    ) -> None:
        self.raw, self.target, self.last_of_pass = raw, target, last_of_pass
        with stage("spark", "starting the Spark session (or joining the pass's)"):
            self.spark: SparkSession = spark_session(app_name, spark_options)
        self.application = self.spark.sparkContext.applicationId
        log.info("[spark] application %s", self.application)

    def compact(self, files: Sequence[FileEntry], plan: WritePlan, overlapping: Overlapping) -> Compacted:
        ids = file_ids(files)
        size = sum(f.size for f in files)
        cores = self.spark.sparkContext.defaultParallelism
        count = max(1, cores * max(1, -(-size // (cores * BATCH_BYTES))))
        shares = [[(ids[f.rel], f.rel) for f in share] for share in balanced(files, count)]
        ranges = 0 if size <= HASHES_TO_DRIVER_BYTES else cores
        job = self.spark.sparkContext.broadcast(Job(shares, self.raw, self.target, plan, ranges))
        try:
            with spark_progress(self.spark, "write"):
                with stage("write", f"{len(shares)} task(s) parse and write {len(files)} files in the executors"):
                    results: dict[int, TaskResult] = self._run(len(shares), _tasks(job, bool(plan.schema.key)))
                out = _merged(results, {ids[f.rel]: f.rel for f in files})
                if plan.schema.key and out.written:
                    with stage("write", "duplicates across tasks and against the table: key hashes compared"):
                        self._deduplicate(out, results, plan, overlapping, job)
        finally:
            job.destroy()
        return out

    def _run(self, count: int, stage_: Stage) -> dict[int, Any]:
        """``count`` tasks of ``stage_`` (one per partition): each one's result, by task number."""
        return dict(self.spark.sparkContext.parallelize(range(count), count).mapPartitions(stage_).collect())

    def _deduplicate(
        self, out: Compacted, results: dict[int, TaskResult], plan: WritePlan, overlapping: Overlapping, job: Any
    ) -> None:
        """Keys seen in more than one share, or already in the table: the losing copies' data files written again."""
        times = [s for s in out.files.values() if s.min_ms is not None]
        lo = min(s.min_ms for s in times if s.min_ms is not None)
        hi = max(s.max_ms for s in times if s.max_ms is not None)
        existing = list(overlapping(lo, hi))
        if job.value.ranges == 0:
            met = _met_in_driver(results, existing, self.target, list(plan.schema.key))
        else:
            files = [(t, r.hash_file, r.hash_cuts) for t, r in results.items() if r.hash_file]
            shared = self.spark.sparkContext.broadcast((files, existing))
            try:
                found = self._run(job.value.ranges, _ranges(job, shared))
            finally:
                shared.destroy()
            met = _by_hash([copy for copies in found.values() for copy in copies])
        if not met:
            return
        losing = _losers(met, results, existing, self.target, plan)
        if not losing:
            return
        redo = self.spark.sparkContext.broadcast(
            [(results[t].written[w], drop, f"{t}-{w}") for (t, w), drop in losing.items()]
        )
        rewritten = self._run(len(losing), _rewrites(job, redo))
        for n, (t, w) in enumerate(losing):
            old, new = results[t].written[w], rewritten[n]
            out.written.remove(old)
            out.duplicates_dropped += old.records - (new.records if new else 0)
            if new is not None:
                out.written.append(new)
        self.target.delete_many([results[t].written[w].rel for t, w in losing])
        redo.destroy()

    def close(self) -> None:
        """The pass's last run: the session begins to stop (:func:`lakeflow.compaction.engine.end_pass` waits
        for it). Otherwise nothing: it serves the pass's next run too (one application for every stream's batch)."""
        if self.last_of_pass:
            log.info("[spark] stopping application %s: the pass's last run is done with it", self.application)
            stop_session(wait=False)


def balanced(parts: Sequence[FileEntry], count: int) -> list[list[FileEntry]]:
    """``parts`` in up to ``count`` shares of about equal bytes, each a run of files neighbouring in commit
    order (modification time, then path). A record sent twice (a producer's retry, a replay after a
    restart) lands in a file committed soon after the first copy: mostly in the same share, where its
    task drops it, so that few data files hold a copy another task's file beats."""
    ordered = sorted(parts, key=lambda p: (p.mtime.timestamp() if p.mtime is not None else 0.0, p.rel))
    total = sum(p.size for p in ordered)
    out: list[list[FileEntry]] = [[]]
    done = 0
    for part in ordered:
        if out[-1] and len(out) < count and done + part.size / 2 > total * len(out) / count:
            out.append([])
        out[-1].append(part)
        done += part.size
    return out if out[0] else []


def _met_in_driver(
    results: dict[int, TaskResult], existing: Sequence[str], target: Storage, key: list[str]
) -> list[dict[str, Any]]:
    """The repeated hashes of a small batch, from the hashes its tasks returned and the table's files' keys
    (read here): each with its copies (task, written, file id)."""
    parts = [
        (r.hashes, np.full(len(r.hashes), t, np.int32), r.hash_written, r.hash_files)
        for t, r in results.items()
        if r.hashes is not None and r.hash_written is not None and r.hash_files is not None
    ]
    for n, uri in enumerate(existing):
        table = key_hashes(target.read_parquet(target.relative(uri), key)).view(np.int64)
        size = len(table)
        parts.append((table, np.full(size, TABLE, np.int32), np.full(size, n, np.int32), np.full(size, -1, np.int32)))
    return _by_hash(_repeated(parts))


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


def _bounds(ranges: int) -> np.ndarray:
    """The first hash of each of ``ranges`` equal ranges of the (signed 64-bit) hash values, then the end."""
    edges = [-(2**63) + (2**64 * i) // ranges for i in range(ranges)]
    return np.array(edges, dtype=np.int64)


def _tasks(job: Any, keyed: bool) -> Stage:
    """The tasks' function over share numbers: each share compacted (on as many threads as the task
    has cores), with its key hashes in its result (a small batch) or, sorted, in a file of the staging folder."""

    def tasks(numbers: Iterable[int]) -> Iterator[tuple[int, Any]]:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        pa.set_cpu_count(max(1, context.cpus() if context is not None else 1))
        j: Job = job.value
        for number in numbers:
            result = run_task(number, attempt, j.shares[number], j.raw, j.target, j.plan, keys=keyed)
            collected, result.written_hashes = result.written_hashes, None
            if collected is not None:
                hashes = collected.column(KEY_HASH).to_numpy()
                files = collected.column(FILE).to_numpy().astype(np.int32)
                written = collected.column(WRITTEN_COLUMN).to_numpy().astype(np.int32)
                if j.ranges == 0:
                    result.hashes, result.hash_files, result.hash_written = hashes, files, written
                else:
                    order = np.argsort(hashes)  # (numpy's vectorised sort: 4x its stable one; ties need no order)
                    rel = f"{j.plan.staging}/{HASHES}/t{number:05d}-a{attempt}.bin"
                    j.target.write(rel, b"".join(a[order].tobytes() for a in (hashes, files, written)))
                    result.hash_file = rel
                    result.hash_cuts = np.searchsorted(hashes[order], _bounds(j.ranges)).tolist() + [len(hashes)]
            yield number, result

    return tasks


def _ranges(job: Any, shared: Any) -> Stage:
    """The tasks' function over hash ranges: each range's slice of every task's hash file and the
    table's keys in it; its result, the copies of its hashes seen more than once."""

    def compare(numbers: Iterable[int]) -> Iterator[tuple[int, Any]]:
        j: Job = job.value
        files, existing = shared.value
        bounds = [*_bounds(j.ranges).tolist(), None]
        for number in numbers:
            parts = []
            for task, rel, cuts in files:
                n, lo, hi = cuts[-1], cuts[number], cuts[number + 1]
                slices = [
                    j.target.read_range(rel, offset + lo * width, (hi - lo) * width)
                    for offset, width in ((0, 8), (8 * n, 4), (12 * n, 4))
                ]
                hashes, ids, written = (
                    np.frombuffer(b, dtype) for b, dtype in zip(slices, (np.int64, np.int32, np.int32), strict=True)
                )
                parts.append((hashes, np.full(len(hashes), task, np.int32), written, ids))
            for n, uri in enumerate(existing):
                table = key_hashes(j.target.read_parquet(j.target.relative(uri), list(j.plan.schema.key)))
                table = table.view(np.int64)
                mine = (table >= bounds[number]) & (True if bounds[number + 1] is None else table < bounds[number + 1])
                size = int(mine.sum())
                parts.append(
                    (
                        table[mine],
                        np.full(size, TABLE, np.int32),
                        np.full(size, n, np.int32),
                        np.full(size, -1, np.int32),
                    )
                )
            yield number, _repeated(parts)

    return compare


def _repeated(parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> list[dict[str, int]]:
    """The copies (hash, task, data file, file id) of the hashes ``parts`` hold more than once."""
    if not parts:
        return []
    hashes, tasks, written, files = (np.concatenate(column) for column in zip(*parts, strict=True))
    order = np.argsort(hashes, kind="stable")
    ranked = hashes[order]
    same = np.flatnonzero(ranked[1:] == ranked[:-1])
    repeated = order[np.unique(np.concatenate([same, same + 1]))]
    return [
        {HASH: int(hashes[i]), TASK: int(tasks[i]), WRITTEN: int(written[i]), FILE_ID: int(files[i])} for i in repeated
    ]


def _rewrites(job: Any, redo: Any) -> Stage:
    """The tasks' function writing data files again without their losing keys."""

    def rewrite(numbers: Iterable[int]) -> Iterator[tuple[int, Any]]:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        j: Job = job.value
        p = j.plan
        writer = Writer(p.schema, p.table_schema, p.spec, dict(p.properties), j.target)
        for number in numbers:
            old, drop, tag = redo.value[number]
            rel = old.rel.replace(".parquet", f"-r{tag}-a{attempt}.parquet")
            yield number, writer.rewrite(old, drop, rel)

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
