"""Data file names that say what is inside — Pinot's segment naming (table, time range, sequence).

``data/ts_day=2026-11-21/sensor-readings-compacted__2026-11-21__20261121T101500123Z__20261121T115959999Z__00000007-001.parquet``:
table, partition day, first and last reading time (UTC, ms), the Iceberg sequence number of the
commit that adds the file, and the file's place among that commit's files. The same input compacted
onto the same table state gives the same names.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Sequence

from lakeflow.compaction.schema import DAY

SEPARATOR = "__"


@dataclass(frozen=True)
class DataFileStats:
    """A written Parquet file: where Spark staged it and what it holds."""

    rel: str        # relative to the target table's location
    day: str        # partition value, YYYY-MM-DD (UTC)
    rows: int
    size: int
    min_ms: int
    max_ms: int


def timestamp(ms: int) -> str:
    """``20261121T101500123Z``: a UTC instant to the millisecond, sortable as text."""
    t = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return t.strftime("%Y%m%dT%H%M%S") + f"{ms % 1000:03d}Z"


def data_file_name(table: str, day: str, min_ms: int, max_ms: int, sequence: int, index: int) -> str:
    return SEPARATOR.join((table, day, timestamp(min_ms), timestamp(max_ms),
                           f"{sequence:08d}-{index:03d}")) + ".parquet"


def final_paths(files: Sequence[DataFileStats], table: str, sequence: int) -> list[str]:
    """Final target-relative paths for ``files``, numbered in (day, time) order; same order as given."""
    order = sorted(range(len(files)), key=lambda i: (files[i].day, files[i].min_ms, files[i].max_ms,
                                                       files[i].rel))
    paths = [""] * len(files)
    for index, i in enumerate(order, start=1):
        f = files[i]
        paths[i] = f"data/{DAY}={f.day}/{data_file_name(table, f.day, f.min_ms, f.max_ms, sequence, index)}"
    return paths
