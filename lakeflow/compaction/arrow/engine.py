"""The ``arrow`` engine: the batch as one Arrow table in the driver (see
:mod:`~lakeflow.compaction.arrow.read`), written with pyarrow through each table's own storage.

Same output as the Spark engine: good rows minus keys the table holds, de-duplicated on
(run_id, seq) keeping the first occurrence, ``ts`` derived, sorted by (time, run_id, seq), cut into
``files`` contiguous ranges and written as zstd Parquet under ``ts_day=<day>/``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime, timezone
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakeflow.compaction.arrow.read import FILE, file_summaries, good_mask, parse
from lakeflow.compaction.engine import BAD_RECORD, FileSummary
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.report import stage
from lakeflow.compaction.schema import DAY, TS
from lakeflow.readings import DAY_MS, KEY, NAMES, TIME


class ArrowEngine:
    """pyarrow in this process: no JVM, parsing on every core through pyarrow's thread pool."""

    name = "arrow"

    def __init__(self, raw: Storage, target: Storage) -> None:
        self.raw, self.target = raw, target
        self.files: list[str] = []  # rel of each file, by index
        self.rows: pa.Table | None = None

    def read(self, files: Sequence[FileEntry]) -> dict[str, FileSummary]:
        self.files = [f.rel for f in files]
        with stage("read", f"reading {len(files)} files"):
            blobs = self.raw.read_many([f.rel for f in files])
        with stage("read", f"parsing {sum(map(len, blobs))} bytes"):
            self.rows, malformed = parse(blobs)
        return {self.files[i]: s for i, s in file_summaries(self.rows, malformed).items()}

    def write_bad_records(self, quarantined: Sequence[str], rel: str) -> None:
        assert self.rows is not None
        skipped = set(quarantined)
        skip = pa.array([i for i, f in enumerate(self.files) if f in skipped], pa.int32())
        bad = self.rows.filter(pc.and_(pc.invert(good_mask(self.rows)), pc.invert(pc.is_in(self.rows[FILE], skip))))
        lines = []
        for r in bad.to_pylist():
            missing = ", ".join(n for n in NAMES if r[n] is None)
            record = {n: _spark_json(r[n]) for n in NAMES if r[n] is not None}
            lines.append(
                json.dumps(
                    {
                        "file": self.raw.spark_path(self.files[r[FILE]]),
                        "reason": f"{BAD_RECORD}: {missing}",
                        "record": json.dumps(record, separators=(",", ":"), ensure_ascii=False),
                    },
                    separators=(",", ":"),
                    ensure_ascii=False,
                )
            )
        if lines:
            self.raw.write(f"{rel}/part-00000.json", ("\n".join(lines) + "\n").encode())

    def write(self, existing: Sequence[str], files: int, staging: str) -> None:
        assert self.rows is not None
        good = good_mask(self.rows)
        rows = (self.rows if pc.all(good).as_py() else self.rows.filter(good)).select(NAMES)
        if existing:
            keys = pa.concat_tables([self.target.read_parquet(self.target.relative(u), KEY) for u in existing])
            rows = rows.join(keys.group_by(list(KEY)).aggregate([]), list(KEY), join_type="left anti")
        rows = rows.take(_layout(rows))
        rows = rows.append_column(
            TS, pc.cast(pc.cast(rows[TIME], pa.timestamp("ms", tz="UTC")), pa.timestamp("us", tz="UTC"))
        )
        days = rows[TIME].to_numpy() // DAY_MS
        step = -(-rows.num_rows // files) if rows.num_rows else 1
        for part, start in enumerate(range(0, rows.num_rows, step)):  # each range: one file per day in it
            piece = days[start : start + step]
            cuts = [0, *(np.flatnonzero(piece[1:] != piece[:-1]) + 1), len(piece)]
            for lo, hi in pairwise(cuts):
                day = datetime.fromtimestamp(int(piece[lo]) * DAY_MS // 1000, timezone.utc).strftime("%Y-%m-%d")
                self.target.write_parquet(
                    f"{staging}/{DAY}={day}/part-{part:05d}.parquet", rows.slice(start + lo, hi - lo)
                )

    def close(self) -> None:
        self.rows = None


def _spark_json(value: object) -> object:
    """A value as Spark's ``to_json`` writes it: NaN and infinities as strings (valid JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return value


def _layout(rows: pa.Table) -> np.ndarray:
    """Row positions: the first row of each (run_id, seq), ordered by (time, run_id, seq)."""
    runs = pa.array(sorted(pc.unique(rows[KEY[0]]).to_pylist()), pa.string())
    run = pc.index_in(rows[KEY[0]], value_set=runs).to_numpy()
    seq, ts = rows[KEY[1]].to_numpy(), rows[TIME].to_numpy()
    by_key = np.lexsort((seq, run))  # stable: the first occurrence leads
    first = np.ones(len(by_key), dtype=bool)
    first[1:] = (run[by_key][1:] != run[by_key][:-1]) | (seq[by_key][1:] != seq[by_key][:-1])
    kept = by_key[first]
    return kept[np.lexsort((seq[kept], run[kept], ts[kept]))]
