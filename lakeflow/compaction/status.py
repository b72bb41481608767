"""``lakeflow status``: how far behind the compacted table is, and what it looks like.

Read-only: nothing is created, committed or deleted, and no lease is taken.

- **pending**: the raw part files a run would compact now — the same windowed discovery as a run
  (:mod:`lakeflow.compaction.discover`, minus the ledger), without committing;
- **end-to-end lag**: now minus the newest event time visible in the Iceberg table (recorded by each
  commit in its snapshot: :func:`lakeflow.compaction.commit.newest_event_ms`) — the figure the
  compactor's ``lakeflow_end_to_end_lag_seconds`` serves and ``make bench-freshness`` checks;
- **freshness lag** (the backlog): the age of the oldest pending file by its modification time (when
  the sink finished writing it; its readings are at most one checkpoint interval older); 0 when none pend;
- **last run**: the newest final event (COMPLETE / FAIL) of the compaction job in the lineage store,
  and the last committed run from the ledger (with where its quarantined records are);
- **quarantine**: the Iceberg table's folder of what runs set aside (bad records, copies of bad files);
- **snapshots**, and **data files per day partition** with their mean size (from the manifests).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from lakeflow.compaction.config import CompactConfig


@dataclass(frozen=True)
class Partition:
    name: str  # ts_day=YYYY-MM-DD
    files: int
    bytes: int

    @property
    def mean_bytes(self) -> int:
        return self.bytes // self.files if self.files else 0


@dataclass
class Status:
    table: str
    source: str
    exists: bool  # the Iceberg table exists (else every raw file pends)
    stream: str = ""
    schema: str = ""  # the declared schema: title (digest of its declaration)
    pending_files: int = 0
    pending_bytes: int = 0
    oldest_pending: str = ""  # raw-relative path
    freshness_lag_s: float = 0.0
    newest_event_at: str = ""  # the newest event time visible in the table (ISO 8601; "" unknown)
    end_to_end_lag_s: float | None = None  # now − newest_event_at
    files_listed: int = 0
    last_run: dict[str, Any] = field(default_factory=dict)  # lineage store: run_id, at, result, …
    last_commit: dict[str, Any] = field(default_factory=dict)  # ledger: run_id, committed_at, files, rows_out
    quarantine: str = ""  # the Iceberg table's quarantine folder: records/run=<run id>/, files/run=<run id>/
    snapshots: int = 0
    rows: int = 0
    partitions: list[Partition] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["partitions"] = [{**asdict(p), "mean_bytes": p.mean_bytes} for p in self.partitions]
        return out

    def lines(self) -> list[str]:
        out = [f"table {self.table} (from {self.source})" + ("" if self.exists else ": not created yet")]
        lag = f"{_age(self.freshness_lag_s)} (oldest pending: {self.oldest_pending})" if self.pending_files else "none"
        out.append(f"pending: {self.pending_files} raw file(s), {self.pending_bytes:,} bytes; freshness lag {lag}")
        if self.end_to_end_lag_s is None:
            out.append("end-to-end lag: unknown (no commit has recorded the newest event time yet)")
        else:
            out.append(
                f"end-to-end lag: {_age(self.end_to_end_lag_s)} (newest event time in the table: {self.newest_event_at})"
            )
        if self.last_run:
            r = self.last_run
            out.append(
                f"last run: {r['run_id']} at {r['at']}: {r['result']}, {r.get('files_in', 0)} file(s) in, "
                f"{r.get('rows_out', 0)} row(s) out" + (f" — {r['error']}" if r.get("error") else "")
            )
        else:
            out.append("last run: none in the lineage store")
        if self.last_commit:
            c = self.last_commit
            out.append(
                f"last commit: {c['run_id']} at {c['committed_at']}: {c['files']} data file(s), {c['rows_out']} row(s)"
                + (f"; quarantined records: {c['records']}" if c.get("records") else "")
            )
        if self.quarantine:
            out.append(f"quarantine: {self.quarantine} (bad records and copies of bad files, by run)")
        out.append(
            f"snapshots: {self.snapshots}; {self.rows:,} rows in {sum(p.files for p in self.partitions)} "
            f"data file(s), {len(self.partitions)} partition(s)"
        )
        for p in self.partitions:
            out.append(f"  {p.name}: {p.files} file(s), mean {p.mean_bytes / 2**20:.2f} MiB")
        return out


def table_status(config: CompactConfig, now: datetime | None = None) -> Status:
    """The raw table's backlog and the Iceberg table's shape, read without changing anything."""
    from lakeflow.compaction.commit import iceberg_catalog, load_target, newest_event_ms
    from lakeflow.compaction.discover import list_parts, window_start
    from lakeflow.compaction.ledger import Ledger, load_ledger
    from lakeflow.compaction.naming import QUARANTINE_DIR
    from lakeflow.compaction.source import open_raw

    now = now or datetime.now(timezone.utc)
    raw = open_raw(config.settings, config.stream)
    target = load_target(
        iceberg_catalog(config.settings), config.namespace, config.target_table, config.settings.s3_endpoint
    )
    declared = f"{config.schema.title or config.schema.source} ({config.schema.digest})"
    status = Status(config.target_name, raw.location, target is not None, config.stream.name, declared)
    ledger = load_ledger(target.ledger_pointer, target.storage, raw.storage) if target else Ledger()
    since = None if config.full_scan else window_start(ledger.buckets, timedelta(seconds=config.look_back_s))
    listing = list_parts(raw.storage, since)
    if target is not None:
        ledger = ledger.load(target.storage, ledger.covered(listing))
    pending = ledger.new_parts(listing)
    status.files_listed = len(listing.parts)
    status.pending_files, status.pending_bytes = len(pending), sum(f.size for f in pending)
    dated = [f for f in pending if f.mtime is not None]
    if dated:
        oldest = min(dated, key=lambda f: f.mtime or now)
        status.oldest_pending = oldest.rel
        status.freshness_lag_s = round(max(0.0, (now - (oldest.mtime or now)).total_seconds()), 1)
    if ledger.runs:
        status.last_commit = asdict(ledger.runs[-1])
        records = status.last_commit["records"]
        if records and target is not None:  # an older run's are the raw table's (_quarantine/records/…)
            status.last_commit["records"] = (target.storage if records.startswith(QUARANTINE_DIR) else raw.storage).uri(
                records
            )
    status.last_run = last_run(config.settings.lineage_dir, f"compact.{config.target_name}")
    if target is not None:
        status.quarantine = target.storage.uri(QUARANTINE_DIR)
        table = target.table
        status.snapshots = len(table.metadata.snapshots)
        newest = newest_event_ms(table)
        if newest is not None:
            at = datetime.fromtimestamp(newest / 1000, timezone.utc)
            status.newest_event_at = at.isoformat(timespec="milliseconds")
            status.end_to_end_lag_s = round(max(0.0, (now - at).total_seconds()), 1)
        per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        if table.current_snapshot() is not None:
            spec, schema = table.spec(), table.schema()
            for task in table.scan().plan_files():
                counts = per[spec.partition_to_path(task.file.partition, schema)]
                counts[0] += 1
                counts[1] += task.file.file_size_in_bytes
                status.rows += task.file.record_count
        status.partitions = [Partition(name, n, size) for name, (n, size) in sorted(per.items())]
    return status


FLEET_COLUMNS = ("stream", "table", "rows", "dead letters", "pending", "end-to-end lag", "last run", "schema")


def fleet_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Every stream's status (``Status.to_dict()`` and its ``dead_letters``, or ``{"stream", "error"}``) as one
    aligned table."""
    cells = [FLEET_COLUMNS]
    for r in rows:
        if "error" in r:
            cells.append((r["stream"], "-", "-", "-", "-", "-", "error", r["error"]))
            continue
        lag = r["end_to_end_lag_s"]
        last = r["last_run"]
        cells.append(
            (
                r["stream"],
                r["table"] + ("" if r["exists"] else " (not created yet)"),
                f"{r['rows']:,}",
                f"{r.get('dead_letters', 0):,}",
                f"{r['pending_files']} file(s)",
                "unknown" if lag is None else _age(lag),
                f"{last['result']} at {last['at']}" if last else "none",
                r["schema"],
            )
        )
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(FLEET_COLUMNS) - 1)]
    return ["  ".join([*(str(c).ljust(w) for c, w in zip(row, widths, strict=False)), str(row[-1])]) for row in cells]


def last_run(lineage_dir: Path, job: str) -> dict[str, Any]:
    """The newest final event (COMPLETE / FAIL) of ``job`` in the lineage store, summarised ({} if none).
    Files are named ``<eventTime>-<runId>-<eventType>.json``: read newest first, stop at the first match."""
    if not lineage_dir.is_dir():
        return {}
    finals = [p for p in lineage_dir.glob("*.json") if p.stem.endswith(("-COMPLETE", "-FAIL"))]
    for path in sorted(finals, reverse=True):
        try:
            event = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(event, dict) or event.get("job", {}).get("name") != job:
            continue
        facets = event.get("run", {}).get("facets", {})
        figures = facets.get("lakeflow_compaction", {})
        out = {
            "run_id": event["run"].get("runId", ""),
            "at": event.get("eventTime", ""),
            "result": event.get("eventType", ""),
            "files_in": figures.get("files_in", 0),
            "rows_out": figures.get("rows_out", 0),
        }
        if "errorMessage" in facets:
            out["error"] = facets["errorMessage"].get("message", "")
        return out
    return {}


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
