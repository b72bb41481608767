"""The engine contract: what a raw part file holds, and what an engine does with a batch of them.

Two engines implement it — :mod:`lakeflow.compaction.arrow` (pyarrow in the driver: no JVM, the
faster engine on one machine at every batch size measured) and :mod:`lakeflow.compaction.spark`
(a Spark session: for batches larger than the driver's memory holds, and for a real cluster) — so
every other stage (ledger, quarantine, naming, commit, lineage) is the same whichever runs.
``auto`` (the default) picks ``arrow`` for batches below the engines' crossover that fit in memory
(:func:`arrow_limit`) and ``spark`` above — except on a cluster: a driver given a cluster master (``spark://``, ``yarn``,
``k8s://``, ``mesos://``) compacts with ``spark``, on the executors (:func:`engine_for`).

Both parse and write with the same code (:mod:`~lakeflow.compaction.parse` under the record contract,
:mod:`~lakeflow.compaction.rows`): the Spark engine runs it in its executors, each task turning its
share of the files into finished data files, and the driver commits them all at once.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema

    from lakeflow.compaction.files import FileEntry
    from lakeflow.compaction.parse import FileSummary
    from lakeflow.compaction.rows import WrittenFile
    from lakeflow.schema.model import TableSchema

ENGINES = ("auto", "spark", "arrow")
CLUSTER_MASTERS = ("spark://", "yarn", "k8s://", "mesos://")  # a master whose executors are other processes
RECORDS_FILE = "part-{task:05d}.json"  # a task's bad records, in the run's records folder


@dataclass(frozen=True)
class WritePlan:
    """What a batch is compacted into: the table (its schema after this run's evolution, spec and
    properties), where data files are staged, where bad records go, how big files are."""

    schema: TableSchema
    table_schema: Schema
    spec: PartitionSpec
    properties: Mapping[str, str]
    staging: str  # target-relative
    records: str  # target-relative folder of the run's bad records
    target_file_bytes: int
    bytes_per_row: float

    def file_count(self, rows: int) -> int:
        """How many data files ``rows`` rows make at the target size (at least one)."""
        return max(1, math.ceil(rows * self.bytes_per_row / self.target_file_bytes))


@dataclass
class Compacted:
    """What an engine made of a batch: each file's summary (by ``rel``), the data files it staged, its
    bad records (written to the plan's records folder), duplicates dropped and undeclared fields seen."""

    files: dict[str, FileSummary] = field(default_factory=dict)
    written: list[WrittenFile] = field(default_factory=list)
    bad_records: int = 0
    duplicates_dropped: int = 0
    undeclared: Counter[str] = field(default_factory=Counter)


Overlapping = Callable[[int, int], Sequence[str]]  # (lo_ms, hi_ms) → the table's data files (URIs) in that range


class Engine(Protocol):
    """Compacts one batch: parse, set bad records aside, de-duplicate (the batch and against the table's
    files that ``overlapping`` names), write sorted data files into the staging folder."""

    name: str

    def compact(self, files: Sequence[FileEntry], plan: WritePlan, overlapping: Overlapping) -> Compacted: ...

    def close(self) -> None:
        """The run is done with the engine: release what it holds (the pass's last run: its Spark session)."""


ARROW_PEAK_PER_RAW_BYTE = 1.5  # arrow peak RSS / raw batch bytes; measured ~489 MiB + 1.09x (make bench-compact)
# Above this many raw bytes Spark (local, all cores) compacts faster than arrow: make bench-compact's
# crossover of the engines' fitted times (2 cores, 2026-12-02, quiet: ~57M readings of ~190 bytes,
# 10,140 MiB; rounded down; a later fit that day, both engines faster, put it past 100 GiB), above
# COMPACT_MAX_BATCH_MB's default: a local run takes arrow.
CROSSOVER_BYTES = 8_000 << 20


@dataclass(frozen=True)
class ArrowLimit:
    """The largest batch (raw bytes) ``auto`` gives the arrow engine, and what set it."""

    max_bytes: int
    source: str

    def reason(self, engine: str, batch_bytes: int) -> str:
        """Why ``auto`` chose ``engine`` for a batch of ``batch_bytes``."""
        sign = "≤" if engine == "arrow" else ">"
        return (
            f"auto: {batch_bytes / 2**20:,.0f} MiB of new JSON {sign} {self.max_bytes / 2**20:,.0f} MiB, {self.source}"
        )


def arrow_limit(configured: int | None) -> ArrowLimit:
    """The largest batch ``auto`` gives the arrow engine: ``configured`` (COMPACT_ARROW_MAX_MB), else the
    smaller of the engines' crossover and what fits in half the memory available now, at
    :data:`ARROW_PEAK_PER_RAW_BYTE`."""
    if configured is not None:
        return ArrowLimit(configured, "COMPACT_ARROW_MAX_MB")
    from lakeflow.runtime.memory import available_bytes

    by_memory = int(available_bytes() / 2 / ARROW_PEAK_PER_RAW_BYTE)
    if by_memory < CROSSOVER_BYTES:
        return ArrowLimit(by_memory, "what arrow holds in half the memory available")
    return ArrowLimit(CROSSOVER_BYTES, "the engines' crossover (make bench-compact)")


def choose(wanted: str, batch_bytes: int, limit: ArrowLimit) -> tuple[str, str]:
    """The engine for a batch of ``batch_bytes`` raw bytes, and why: ``wanted`` unless it is ``auto``."""
    if wanted != "auto":
        return wanted, "as configured"
    engine = "arrow" if batch_bytes <= limit.max_bytes else "spark"
    return engine, limit.reason(engine, batch_bytes)


def submitted_master(environ: Mapping[str, str] = os.environ) -> str | None:
    """The Spark master this driver was given: the ``--master`` of PySpark's launcher arguments
    (``lakeflow compact``), else spark-submit's (asked of its JVM, already running); None without one."""
    args = shlex.split(environ.get("PYSPARK_SUBMIT_ARGS", ""))
    if "--master" in args[:-1]:
        return args[args.index("--master") + 1]
    if "PYSPARK_GATEWAY_PORT" in environ:
        from pyspark.java_gateway import launch_gateway  # connects to spark-submit's JVM

        master: str | None = launch_gateway().jvm.java.lang.System.getProperty("spark.master")
        return master
    return None


def engine_for(wanted: str, master: str | None) -> str:
    """The run's engine: ``wanted``, except ``auto`` given a cluster master, which is ``spark`` (the
    executors do the work; the driver's memory would otherwise decide)."""
    if wanted == "auto" and master is not None and master.startswith(CLUSTER_MASTERS):
        return "spark"
    return wanted


def end_pass() -> None:
    """End a pass over the pipeline's streams: stop the Spark session its runs shared (one application for
    every stream's batch), if one ran; an arrow-only pass never loaded Spark, and loads nothing here."""
    session = sys.modules.get("lakeflow.compaction.spark.session")
    if session is not None:
        session.stop_session()
