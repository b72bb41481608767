"""Who does the heavy lifting of a run — parse, de-duplicate, sort, write Parquet — and how it is chosen.

Two engines share one contract, so every other stage (ledger, quarantine, naming, commit, lineage)
is the same whichever runs:

- ``spark``: the Spark session (``local[2]`` or a cluster) — for batches larger than one machine's
  memory should hold, and wherever the input is too big to parse in one process;
- ``arrow``: pyarrow inside the driver — for the small, frequent batches a streaming sink
  produces, where a JVM's start-up and warm-up cost more than the work itself.

``auto`` (the default) picks ``arrow`` when the batch's raw bytes are at most
``COMPACT_ARROW_MAX_MB`` and ``spark`` otherwise. Both read with the same semantics (see
:class:`FileSummary`) and write the same Parquet layout (``ts_day=<day>/*.parquet``, sorted by
time, the Iceberg table's schema).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Protocol, Sequence

if TYPE_CHECKING:
    from lakeflow.compaction.storage import FileEntry, Storage
    from lakeflow.credentials import S3ASettings

ENGINES = ("auto", "spark", "arrow")


@dataclass(frozen=True)
class FileSummary:
    """What an engine found in one part file that produced rows (files holding ``[]`` or nothing
    have none). Records with a missing, null or mistyped field are ``bad_rows``; a file that is not
    a JSON array of objects is ``malformed``."""

    rows: int
    bad_rows: int
    malformed: bool
    min_ms: Optional[int]    # time range of its good rows
    max_ms: Optional[int]


class Engine(Protocol):
    """One batch's rows, from parsing to staged Parquet. Each method runs once, in this order."""

    name: str

    def read(self, files: Sequence["FileEntry"]) -> dict[str, FileSummary]:
        """Parse the raw ``files``; keep their rows; summarise each file (keyed by ``rel``)."""

    def write_bad_records(self, quarantined: Sequence[str], rel: str) -> None:
        """Records failing the schema, except those of the ``quarantined`` files, as JSON lines
        ``{"file", "reason", "record"}`` in the raw table's folder ``rel``."""

    def write(self, existing: Sequence[str], files: int, staging: str) -> None:
        """Good rows minus the (run_id, seq) keys of the ``existing`` table data files, de-duplicated,
        with ``ts``, sorted, into about ``files`` Parquet files under the target folder ``staging``."""

    def close(self) -> None:
        """Release what the engine holds (rows, a Spark session)."""


def choose(wanted: str, batch_bytes: int, arrow_max_bytes: int) -> str:
    """The engine for a batch of ``batch_bytes`` raw bytes: ``wanted`` unless it is ``auto``."""
    if wanted != "auto":
        return wanted
    return "arrow" if batch_bytes <= arrow_max_bytes else "spark"


def open_engine(name: str, raw: "Storage", target: "Storage", raw_s3a: Optional["S3ASettings"],
                target_s3a: Optional["S3ASettings"], app_name: str) -> Engine:
    """Start the named engine for one run's two tables."""
    if name == "arrow":
        from lakeflow.compaction.arrow_engine import ArrowEngine

        return ArrowEngine(raw, target)
    from lakeflow.compaction.spark_engine import SparkEngine

    return SparkEngine(raw, target, raw_s3a, target_s3a, app_name)
