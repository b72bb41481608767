"""Progress while a run works (a log line per stage) and its summary (stdout, JSON, lineage facet)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

log = logging.getLogger("lakeflow.compaction")


@contextmanager
def stage(name: str, what: str) -> Iterator[None]:
    """Log ``what`` when a stage starts and how long it took when it ends."""
    log.info("[%s] %s …", name, what)
    t0 = time.monotonic()
    yield
    log.info("[%s] done in %.1f s", name, time.monotonic() - t0)


@dataclass
class CompactionReport:
    """What a run did. Invariant once done: rows_in = rows_out + rows_quarantined + duplicates_dropped."""

    run_id: str
    source: str  # raw table location
    target: str  # Iceberg table (namespace.name)
    started_at: str = field(default_factory=lambda: _now())
    status: str = "running"  # running | complete | failed
    engine: str = ""  # spark | arrow (none when nothing was new)
    engine_reason: str = ""  # why: as configured, or auto's batch size against its limit
    files_listed: int = 0  # committed part files under the raw location
    files_ignored: int = 0  # other files there (hidden, in progress, bookkeeping)
    files_already_consumed: int = 0  # listed files the ledger already holds
    files_deferred: int = 0  # new files left for the next run (COMPACT_MAX_BATCH_MB)
    list_requests: int = 0  # listings of the raw table (the top, then one per bucket)
    ledger_bytes_read: int = 0  # ledger index and segments read
    ledger_bytes_written: int = 0  # ledger index and segments written (0 without a commit)
    files_in: int = 0  # new files this run consumed: compacted + quarantined
    files_compacted: int = 0
    files_quarantined: int = 0
    files_out: int = 0  # Parquet files committed
    rows_in: int = 0  # readings read from the compacted files
    rows_out: int = 0  # rows committed
    rows_quarantined: int = 0  # records breaking the schema
    duplicates_dropped: int = 0  # a key seen twice, or already in the table
    bytes_in: int = 0
    bytes_out: int = 0
    quarantined: list[dict[str, str]] = field(default_factory=list)  # {"file", "reason"}
    records_path: str = ""  # where this run's quarantined records are (under the Iceberg table)
    quarantined_files_path: str = ""  # where this run's quarantined files were copied (under the Iceberg table)
    orphans_removed: int = 0  # data files of crashed runs deleted
    intents_rejected: list[str] = field(default_factory=list)  # invalid intents set aside, with why
    source_files_deleted: int = 0
    snapshot_id: int | None = None
    sequence_number: int | None = None
    ledger: str = ""
    finished_at: str = ""
    duration_s: float = 0.0
    error: str = ""
    maintenance: dict[str, int] = field(default_factory=dict)  # with --maintain: MaintainReport.counts()
    schema: str = ""  # the declared schema: its title and digest
    schema_changes: list[str] = field(default_factory=list)  # the evolution this run applied
    undeclared_fields: dict[str, int] = field(default_factory=dict)  # top-level fields not declared → records
    oldest_new_file_at: str = ""  # modification time of the oldest new raw file discovered (ISO 8601)
    table_snapshots: int | None = None  # the Iceberg table's snapshots when the run ended
    table_data_files: int | None = None  # its current snapshot's data files
    newest_event_ms: int | None = None  # the newest event time visible in the table when the run ended (epoch ms)
    commit_lag_s: float | None = None  # its commit's time − the newest event time of the rows it committed
    _t0: float = field(default_factory=time.monotonic, repr=False)

    @property
    def small_file_reduction(self) -> float | None:
        """Raw files compacted per Parquet file written."""
        return round(self.files_compacted / self.files_out, 1) if self.files_out else None

    def finish(self) -> None:
        self.status = "complete"
        self._close()

    def fail(self, exc: BaseException) -> None:
        self.status = "failed"
        self.error = f"{type(exc).__name__}: {exc}"
        self._close()

    def _close(self) -> None:
        self.finished_at = _now()
        self.duration_s = round(time.monotonic() - self._t0, 2)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        out["small_file_reduction"] = self.small_file_reduction
        return out

    def facet(self) -> dict[str, Any]:
        """The lineage run facet: the figures without timing noise."""
        keep = (
            "files_in",
            "files_compacted",
            "files_quarantined",
            "files_out",
            "rows_in",
            "rows_out",
            "rows_quarantined",
            "duplicates_dropped",
            "bytes_in",
            "bytes_out",
            "quarantined",
            "records_path",
            "snapshot_id",
            "ledger",
            "small_file_reduction",
            "status",
            "schema",
            "schema_changes",
            "undeclared_fields",
        )
        d = self.to_dict()
        return {k: d[k] for k in keep}

    def write_json(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    def summary_lines(self) -> list[str]:
        ratio = self.small_file_reduction
        lines = [
            f"compaction {self.run_id} {self.status} in {self.duration_s:.1f} s: {self.source} → {self.target}"
            + (f" ({self.engine} engine)" if self.engine else ""),
            *([f"  engine     {self.engine}: {self.engine_reason}"] if self.engine_reason else []),
            f"  files in   {self.files_in} new ({self.files_compacted} compacted, {self.files_quarantined} "
            f"quarantined; {self.files_already_consumed} done before, {self.files_ignored} ignored"
            + (f", {self.files_deferred} left for the next run" if self.files_deferred else "")
            + ")",
            f"  rows       {self.rows_in} in → {self.rows_out} out ({self.duplicates_dropped} duplicates, "
            f"{self.rows_quarantined} quarantined records)",
            f"  bytes      {self.bytes_in} in → {self.bytes_out} out",
            f"  ledger     {self.ledger_bytes_read} bytes read, {self.ledger_bytes_written} written; "
            f"{self.list_requests} listing(s) of the raw table",
            f"  files out  {self.files_out}" + (f" (small-file reduction {ratio}×)" if ratio else ""),
        ]
        if self.snapshot_id is not None:
            lines.append(f"  snapshot   {self.snapshot_id} (sequence {self.sequence_number})")
        for change in self.schema_changes:
            lines.append(f"  schema     {change}")
        if self.undeclared_fields:
            fields = ", ".join(f"{name} ({count})" for name, count in self.undeclared_fields.items())
            lines.append(f"  undeclared {fields}: kept in the raw files, not in the table")
        for q in self.quarantined:
            lines.append(f"  quarantined {q['file']}: {q['reason']}")
        if self.records_path:
            lines.append(f"  quarantined records: {self.records_path}")
        if self.quarantined_files_path:
            lines.append(f"  quarantined files copied to: {self.quarantined_files_path}")
        if self.orphans_removed:
            lines.append(f"  removed {self.orphans_removed} orphan file(s) of an interrupted run")
        for rejected in self.intents_rejected:
            lines.append(f"  set aside an invalid intent, not acted on: {rejected}")
        if self.error:
            lines.append(f"  error: {self.error}")
        return lines


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
