"""The ``arrow`` engine: the whole batch as one task in the driver (:mod:`~lakeflow.compaction.task`),
pyarrow parsing on every core through its thread pool.

The batch is parsed, its bad records set aside and its rows de-duplicated on the key (the first
occurrence stays: the lowest file id, i.e. the largest file, then the earliest record); then rows whose
key the table already holds in the batch's time range are dropped, and the rest written.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lakeflow.compaction.engine import Compacted, Overlapping, WritePlan
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.parse import Parser
from lakeflow.compaction.report import stage
from lakeflow.compaction.rows import Writer
from lakeflow.compaction.task import file_ids, parse_files, write_bad_records
from lakeflow.runtime.memory import arrow_from_jemalloc


class ArrowEngine:
    """pyarrow in this process: no JVM."""

    name = "arrow"

    def __init__(self, raw: Storage, target: Storage) -> None:
        self.raw, self.target = raw, target
        arrow_from_jemalloc()

    def compact(self, files: Sequence[FileEntry], plan: WritePlan, overlapping: Overlapping) -> Compacted:
        ids = file_ids(files)
        named = [(ids[f.rel], f.rel) for f in files]
        with stage("read", f"parsing {len(files)} files ({sum(f.size for f in files)} bytes)"):
            parsed = parse_files(named, self.raw, Parser(plan.schema), threads=pa.cpu_count(), key=plan.schema.key)
        out = Compacted(
            files={f.rel: parsed.files[ids[f.rel]] for f in files if ids[f.rel] in parsed.files},
            undeclared=parsed.undeclared,
        )
        out.bad_records = write_bad_records(parsed, dict(named), self.raw, self.target, plan, 0)
        writer = Writer(
            plan.schema, plan.table_schema, plan.spec, dict(plan.properties), self.target, threads=pa.cpu_count()
        )
        rows = writer.first_per_key(parsed.rows, parsed.hashes)
        summaries = [s for s in out.files.values() if s.min_ms is not None and s.max_ms is not None]
        if rows.num_rows and plan.schema.key and summaries:
            lo = min(s.min_ms for s in summaries if s.min_ms is not None)
            hi = max(s.max_ms for s in summaries if s.max_ms is not None)
            existing = overlapping(lo, hi)
            if existing:
                with stage("write", f"checking the keys of {len(existing)} table file(s) in the batch's time range"):
                    keys = pa.concat_tables(
                        [self.target.read_parquet(self.target.relative(u), plan.schema.key) for u in existing]
                    )
                    rows = writer.without_keys(rows, keys)
        out.duplicates_dropped = parsed.rows.num_rows - rows.num_rows
        with stage("write", f"{rows.num_rows} rows → data files, {writer.threads} at a time"):
            out.written = writer.write(rows, plan.file_count(rows.num_rows), plan.staging, "part")
        return out

    def close(self) -> None:
        pass
