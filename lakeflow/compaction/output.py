"""What an engine writes, whichever it is: how many files a batch makes, and the staged files'
rows, sizes and time ranges (read back from their Parquet footers)."""

from __future__ import annotations

import math

from lakeflow.compaction.files import Storage
from lakeflow.compaction.naming import DataFileStats
from lakeflow.compaction.schema import DAY
from lakeflow.readings import TIME


def file_count(rows: int, target_bytes: int, bytes_per_row: float) -> int:
    """How many output files ``rows`` rows make at the target size (at least one)."""
    return max(1, math.ceil(rows * bytes_per_row / target_bytes))


def staged_files(target: Storage, staging: str) -> list[DataFileStats]:
    """The Parquet files the engine wrote under ``staging``, with rows, size and time range from footers."""
    out = []
    for entry in target.list(staging):
        name = entry.rel.rsplit("/", 1)[-1]
        if not name.endswith(".parquet") or name.startswith((".", "_")):
            continue
        folder = entry.rel.rsplit("/", 2)[-2]
        if not folder.startswith(f"{DAY}="):
            raise RuntimeError(f"unexpected staged file {entry.rel}: expected it under {DAY}=YYYY-MM-DD/")
        meta = target.parquet_metadata(entry.rel)
        col = meta.schema.to_arrow_schema().get_field_index(TIME)
        lows, highs = [], []
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(col).statistics
            if meta.row_group(g).num_rows == 0:
                continue
            if stats is None or not stats.has_min_max:
                raise RuntimeError(f"{entry.rel}: no min/max statistics for {TIME}")
            lows.append(stats.min)
            highs.append(stats.max)
        if not lows:
            continue
        out.append(
            DataFileStats(
                rel=entry.rel,
                day=folder.split("=", 1)[1],
                rows=meta.num_rows,
                size=entry.size,
                min_ms=min(lows),
                max_ms=max(highs),
            )
        )
    return out
