"""The engine contract: what a raw part file holds, and what an engine does with a batch of them.

Two engines implement it — :mod:`lakeflow.compaction.arrow` (pyarrow in the driver: no JVM, the
faster engine on one machine at every batch size measured) and :mod:`lakeflow.compaction.spark`
(a Spark session: for batches larger than the driver's memory holds, and for a real cluster) — so
every other stage (ledger, quarantine, naming, commit, lineage) is the same whichever runs.
``auto`` (the default) picks ``arrow`` for batches that fit in memory (:func:`arrow_max_bytes`)
and ``spark`` above — except on a cluster: a driver given a cluster master (``spark://``, ``yarn``,
``k8s://``, ``mesos://``) compacts with ``spark``, on the executors (:func:`engine_for`). Both write the same Parquet layout (``ts_day=<day>/*.parquet``, sorted by
time, the Iceberg table's schema).

What a part file holds — both engines read with the semantics of Spark's ``multiLine`` JSON reader
in PERMISSIVE mode under the explicit schema :data:`lakeflow.readings.FIELDS`:

- its *records* are the objects of the JSON array it starts with (a top-level object is one
  record); what follows the file's first JSON value is ignored, and so are unknown fields;
- a *bad record* has a field that is missing, null or of the wrong type — a string field takes
  any other JSON value as its source text (``1.50`` → ``"1.50"``), a double an integer and the
  strings ``"NaN"``, ``"Infinity"``, ``"-INF"``…, an integer must fit 64 bits; the file's other
  records are compacted, the bad one set aside with the reason :data:`BAD_RECORD` and the fields
  at fault;
- a *malformed* file does not start with JSON, is a JSON scalar, or is an array with an element
  that is not an object; so is a file whose only record has no field of the schema (``[{}]``:
  Spark cannot tell it from a parse failure). It is quarantined whole (:data:`MALFORMED`);
- an *empty* file holds no JSON at all (0 bytes or whitespace): quarantined whole (:data:`EMPTY`).
  ``[]`` holds no records and is consumed.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lakeflow.compaction.files import FileEntry

ENGINES = ("auto", "spark", "arrow")
CLUSTER_MASTERS = ("spark://", "yarn", "k8s://", "mesos://")  # a master whose executors are other processes
EMPTY = "empty file (no JSON content)"
MALFORMED = "not a JSON array of reading objects (malformed or truncated JSON)"
BAD_RECORD = "missing, null or mistyped"  # reason of a bad record, followed by ": <fields>"


@dataclass(frozen=True)
class FileSummary:
    """What an engine found in one part file that produced rows (files holding ``[]`` or nothing
    have none): its records, the bad ones, whether it is malformed, the time range of its good rows."""

    rows: int
    bad_rows: int
    malformed: bool
    min_ms: int | None
    max_ms: int | None

    @classmethod
    def of(cls, rows: int, bad_rows: int, empty_rows: int, min_ms: int | None, max_ms: int | None) -> FileSummary:
        """The summary of a file that gave ``rows`` rows, ``empty_rows`` of them with every field null:
        a malformed file comes back as its only row, all null (see the module's docstring)."""
        return cls(rows=rows, bad_rows=bad_rows, malformed=rows == 1 and empty_rows == 1, min_ms=min_ms, max_ms=max_ms)


class Engine(Protocol):
    """One batch's rows, from parsing to staged Parquet. Each method runs once, in this order."""

    name: str

    def read(self, files: Sequence[FileEntry]) -> dict[str, FileSummary]:
        """Parse the raw ``files``; keep their rows; summarise each file (keyed by ``rel``)."""

    def write_bad_records(self, quarantined: Sequence[str], rel: str) -> None:
        """Records failing the schema, except those of the ``quarantined`` files, as JSON lines
        ``{"file", "reason", "record"}`` in the raw table's folder ``rel``."""

    def write(self, existing: Sequence[str], files: int, staging: str) -> None:
        """Good rows minus the (run_id, seq) keys of the ``existing`` table data files, de-duplicated,
        with ``ts``, sorted, into about ``files`` Parquet files under the target folder ``staging``."""

    def close(self) -> None:
        """Release what the engine holds (rows, a Spark session)."""


ARROW_PEAK_PER_RAW_BYTE = 2.5  # arrow peak RSS / raw batch bytes; measured ~225 MiB + 2.08x (make bench-compact)


def arrow_max_bytes(configured: int | None) -> int:
    """The largest batch ``auto`` gives the arrow engine: ``configured`` (COMPACT_ARROW_MAX_MB), else
    what fits in half the memory available now, at :data:`ARROW_PEAK_PER_RAW_BYTE`."""
    if configured is not None:
        return configured
    from lakeflow.runtime.memory import available_bytes

    return int(available_bytes() / 2 / ARROW_PEAK_PER_RAW_BYTE)


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


def choose(wanted: str, batch_bytes: int, arrow_max: int) -> str:
    """The engine for a batch of ``batch_bytes`` raw bytes: ``wanted`` unless it is ``auto``."""
    if wanted != "auto":
        return wanted
    return "arrow" if batch_bytes <= arrow_max else "spark"
