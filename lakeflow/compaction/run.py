"""The stages of one compaction run, in the order ``jobs/compact.py`` calls them.

Each stage is a few calls into the focused modules and records what it did in the run's report.
A batch with no new files passes through every stage as a no-op (and starts no engine).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import TYPE_CHECKING

from lakeflow.compaction.commit import (
    NEWEST_EVENT_PROPERTY,
    Target,
    commit,
    evolved,
    iceberg_catalog,
    newest_event_ms,
    open_target,
)
from lakeflow.compaction.config import CompactConfig
from lakeflow.compaction.discover import PartListing, bucket_of, list_buckets, list_parts, window_start
from lakeflow.compaction.engine import Compacted, Engine, WritePlan, arrow_limit, choose
from lakeflow.compaction.files import FileEntry, StorageDenied
from lakeflow.compaction.lease import Lease
from lakeflow.compaction.ledger import COMPACTED, QUARANTINED, Ledger, RunRecord, entries_for, load_ledger, save_ledger
from lakeflow.compaction.naming import final_paths
from lakeflow.compaction.quarantine import Sorted, copy_quarantined, sort_files
from lakeflow.compaction.recovery import Intent, finish, recover, save_intent
from lakeflow.compaction.report import CompactionReport, stage
from lakeflow.compaction.source import RawTable, open_raw
from lakeflow.errors import ConfigurationError
from lakeflow.schema.evolution import Change, refused
from lakeflow.schema.evolution import plan as plan_evolution

if TYPE_CHECKING:
    from pyiceberg.schema import Schema

log = logging.getLogger("lakeflow.compaction")


@dataclass
class Run:
    """One run: its configuration, both tables, the ledger it started from, and its report."""

    config: CompactConfig
    raw: RawTable
    target: Target
    report: CompactionReport
    ledger: Ledger = field(default_factory=Ledger)
    listing: PartListing = field(default_factory=lambda: PartListing(parts=(), ignored=0))
    intent: Intent | None = None
    lease: Lease | None = None  # held from hold_lease() on
    deferred: int = 0  # earlier runs that could still have committed when recovery ran
    changes: list[Change] = field(default_factory=list)  # the schema evolution this run applies
    table_schema: Schema | None = None  # the table's schema after it: what the data files are written with


class SchemaRefused(ConfigurationError):
    """The declared schema changes the table in a way lakeflow refuses; nothing was committed."""


@dataclass
class Batch:
    """This run's new part files and what becomes of them, stage by stage."""

    files: list[FileEntry]
    compacted: Compacted = field(default_factory=Compacted)  # what the engine made of them
    sorted: Sorted | None = None
    data_files: list[str] = field(default_factory=list)  # final, target-relative, as compacted.written


def begin(config: CompactConfig) -> Run:
    """Load the raw table and the Iceberg table (created on first use)."""
    report = CompactionReport(
        run_id=config.run_id,
        source="",
        target=config.target_name,
        schema=f"{config.schema.title or config.schema.source} ({config.schema.digest})",
    )
    with stage("open", f"raw table {config.stream.raw_name}, Iceberg table {config.target_name}"):
        raw = open_raw(config.settings, config.stream)
        target = open_target(
            iceberg_catalog(config.settings),
            config.namespace,
            config.target_table,
            raw.location,
            config.schema,
            config.settings.s3_endpoint,
        )
    report.source = raw.location
    return Run(config=config, raw=raw, target=target, report=report)


def hold_lease(run: Run) -> Lease:
    """The table's lease for this run (see :mod:`lakeflow.compaction.lease`), as a context manager."""
    c = run.config
    run.lease = Lease(run.target.storage, c.run_id, c.target_name, c.lease_ttl_s)
    return run.lease


def plan(run: Run) -> None:
    """With the lease held: the table as it is now (the snapshot this run plans on) and its ledger."""
    run.target.table.refresh()
    run.ledger = load_ledger(run.target.ledger_pointer, run.target.storage, run.raw.storage)
    log.info(
        "[open] %s → %s at snapshot %s (ledger: %d files consumed so far, in %d buckets)",
        run.raw.location,
        run.target.location,
        run.target.snapshot_id,
        sum(b.files for b in run.ledger.buckets.values()),
        len(run.ledger.buckets),
    )


def recover_orphans(run: Run) -> None:
    """Remove what interrupted runs left behind (see :mod:`lakeflow.compaction.recovery`)."""
    assert run.lease is not None
    run.lease.check()
    done = recover(run.target, run.ledger)
    run.report.orphans_removed += done.orphans_removed
    run.report.intents_rejected += done.intents_rejected
    run.deferred = done.runs_deferred


def discover_new_files(run: Run) -> Batch:
    """The committed part files the ledger does not hold yet, in the buckets of the look-back window
    (every bucket with ``--full-scan``); and the older buckets with raw files due for deletion."""
    c, raw = run.config, run.raw.storage
    since = None if c.full_scan else window_start(run.ledger.buckets, timedelta(seconds=c.look_back_s))
    with stage("discover", f"listing {run.raw.location}" + (f" from bucket {since}" if since else " (every bucket)")):
        listing = list_parts(raw, since)
        due = [b for b in _due_buckets(run) if not listing.covers(b)]
        run.listing = listing.merge(list_buckets(raw, due)) if due else listing
        run.ledger = run.ledger.load(run.target.storage, run.ledger.covered(run.listing))
    found = run.ledger.new_parts(run.listing)
    new = first_bytes(found, c.max_batch_bytes)
    r = run.report
    r.files_listed, r.files_ignored = len(run.listing.parts), run.listing.ignored
    r.files_already_consumed = r.files_listed - len(found)
    r.files_deferred = len(found) - len(new)
    r.list_requests, r.ledger_bytes_read = run.listing.requests, run.ledger.bytes_read
    times = [f.mtime for f in found if f.mtime is not None]  # deferred files pend too
    r.oldest_new_file_at = min(times).isoformat(timespec="seconds") if times else ""
    log.info(
        "[discover] %d part files, %d new (%d left for the next run: COMPACT_MAX_BATCH_MB), %d consumed before, "
        "%d other files ignored; %d listing(s), %d ledger bytes read",
        r.files_listed,
        len(new),
        r.files_deferred,
        r.files_already_consumed,
        r.files_ignored,
        r.list_requests,
        r.ledger_bytes_read,
    )
    if new:
        run.intent = Intent(
            run_id=run.config.run_id, planned_snapshot=run.target.snapshot_id, previous_ledger=run.target.ledger_rel
        )
        save_intent(run.target.storage, run.intent)
    return Batch(files=new)


def first_bytes(files: list[FileEntry], limit: int) -> list[FileEntry]:
    """The oldest of ``files`` (by bucket, then path) up to ``limit`` bytes in all; at least one."""
    chosen: list[FileEntry] = []
    total = 0
    for f in sorted(files, key=lambda f: f.rel):
        if chosen and total + f.size > limit:
            break
        chosen.append(f)
        total += f.size
    return chosen


def plan_schema(run: Run) -> None:
    """The declared schema against the table's: what this run applies (in its commit), converts, or
    refuses — a refusal stops the run before anything is read or written (:class:`SchemaRefused`)."""
    changes = plan_evolution(run.target.table.schema(), run.target.layout(run.config.schema), run.config.schema)
    no = refused(changes)
    if no:
        more = f" (and {len(no) - 1} more: lakeflow schema plan lists them)" if len(no) > 1 else ""
        first = no[0]
        raise SchemaRefused(
            f"schema change refused, nothing committed: {first.field}: {first.change}: {first.reason}{more}"
        )
    for c in changes:
        log.info("[schema] %s", c)
    run.changes = changes
    run.table_schema = evolved(run.target, changes)
    run.report.schema_changes = [str(c) for c in changes if c.action == "apply"]


def compact_batch(run: Run, batch: Batch) -> None:
    """Start the engine the batch's size calls for; parse, set bad records aside, de-duplicate and write
    the data files into the staging folder."""
    if not batch.files:
        return
    c, size = run.config, sum(f.size for f in batch.files)
    name, why = choose(c.engine, size, arrow_limit(c.arrow_max_bytes))
    log.info("[read] engine %s (%s)", name, why)
    run.report.engine, run.report.engine_reason = name, why
    engine = _open_engine(name, run)
    assert run.intent is not None and run.table_schema is not None
    plan = WritePlan(
        schema=c.schema,
        table_schema=run.table_schema,
        spec=run.target.table.spec(),
        properties=dict(run.target.table.properties),
        staging=run.intent.staging,
        records=run.intent.records,
        target_file_bytes=c.target_file_bytes,
        bytes_per_row=run.target.bytes_per_row(c.bytes_per_row),
    )
    with stage("compact", f"{len(batch.files)} new part files ({size} bytes) → {run.target.storage.uri(plan.staging)}"):
        overlapping = partial(run.target.files_overlapping, event_time=c.schema.event_time)
        try:
            batch.compacted = engine.compact(batch.files, plan, overlapping)
        finally:
            engine.close()  # the run's last use of it (the pass's last run: its Spark session begins to stop)
    done, r = batch.compacted, run.report
    r.rows_out = sum(w.records for w in done.written)
    r.bytes_out = sum(w.size for w in done.written)
    r.files_out = len(done.written)
    r.duplicates_dropped = done.duplicates_dropped
    r.undeclared_fields = dict(done.undeclared.most_common())
    if done.undeclared:
        log.warning(
            "[read] fields the schema does not declare (left out of the table): %s",
            ", ".join(f"{n} ({k} records)" for n, k in done.undeclared.most_common()),
        )
    if done.bad_records:
        r.records_path = run.target.storage.uri(run.intent.records)


def _open_engine(name: str, run: Run) -> Engine:
    """Start the named engine for one run's two tables (Spark, and pyspark's import, only when asked for;
    the config's ``spark_options``: spark-submit's, for a Spark this process launches)."""
    if name == "arrow":
        from lakeflow.compaction.arrow.engine import ArrowEngine

        return ArrowEngine(run.raw.storage, run.target.storage)
    from lakeflow.compaction.spark.engine import SparkEngine

    c = run.config
    app_name = f"lakeflow-compact {c.target_name}"
    return SparkEngine(run.raw.storage, run.target.storage, app_name, c.spark_options, c.last_of_pass)


def quarantine_bad_input(run: Run, batch: Batch) -> None:
    """Set aside empty and malformed files, with their reasons (copied to the Iceberg table's quarantine
    folder before the commit: a run that never commits has its copies removed by recovery); count the
    records in and set aside."""
    if not batch.files:
        return
    s = batch.compacted.files
    missing = [f.rel for f in batch.files if f.rel not in s]
    if missing:
        raise RuntimeError(f"the engine reported nothing of {len(missing)} file(s), e.g. {missing[0]}: not consumed")
    batch.sorted = sort_files(
        batch.files,
        {rel: x.reason for rel, x in s.items() if x.reason},
        rows={rel: x.records for rel, x in s.items()},
        bad_rows={rel: x.bad for rel, x in s.items()},
    )
    r, sorted_ = run.report, batch.sorted
    r.files_in, r.files_compacted, r.files_quarantined = (
        len(batch.files),
        len(sorted_.compacted),
        len(sorted_.quarantined),
    )
    r.bytes_in = sum(f.size for f in batch.files)
    r.rows_in = sum(sorted_.rows.values())
    r.rows_quarantined = sum(sorted_.bad_rows.values())
    r.quarantined = [{"file": f.rel, "reason": sorted_.reasons[f.rel]} for f in sorted_.quarantined]
    for q in r.quarantined:
        log.warning("[quarantine] %s: %s", q["file"], q["reason"])
    if sorted_.quarantined:
        assert run.intent is not None
        copy_quarantined(run.raw.storage, run.target.storage, sorted_.quarantined, sorted_.reasons, run.config.run_id)
        r.quarantined_files_path = run.target.storage.uri(run.intent.quarantined_files)
    if r.rows_quarantined:
        log.warning("[quarantine] %d records breaking the schema → %s", r.rows_quarantined, r.records_path)


def name_data_files(run: Run, batch: Batch) -> None:
    """Give each staged file its final name (table, day, time range, sequence) — intent first."""
    if run.intent is None:
        return
    c = run.config
    written = batch.compacted.written
    batch.data_files = final_paths(written, c.target_table, run.target.next_sequence, c.run_id)
    run.intent = replace(run.intent, data_files=tuple(batch.data_files))
    save_intent(run.target.storage, run.intent)
    for staged, final in zip(written, batch.data_files, strict=True):
        run.target.storage.move(staged.rel, final)
        log.info("[write] %s (%d rows, %d bytes)", final, staged.records, staged.size)


def commit_batch(run: Run, batch: Batch) -> None:
    """One Iceberg commit: the data files and the new ledger (consumed raw files) together."""
    if run.intent is None or batch.sorted is None:
        return
    c, r, s = run.config, run.report, batch.sorted
    entries = {
        **entries_for(s.compacted, COMPACTED, c.run_id, rows=s.rows),
        **entries_for(s.quarantined, QUARANTINED, c.run_id, reasons=s.reasons),
    }
    record = RunRecord(
        run_id=c.run_id,
        committed_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        files=len(batch.data_files),
        rows_out=r.rows_out,
        records=run.intent.records if r.records_path else "",
    )
    ledger = run.ledger.advance(run.listing, entries, record, now=record.committed_at)
    target = run.target.storage
    ledger, r.ledger_bytes_written = save_ledger(target, ledger, c.run_id, run.intent.ledger)
    summary = {
        "lakeflow.raw-files": str(r.files_compacted),
        "lakeflow.quarantined-files": str(r.files_quarantined),
        "lakeflow.rows-in": str(r.rows_in),
        "lakeflow.duplicates-dropped": str(r.duplicates_dropped),
    }
    newest = max((w.max_ms for w in batch.compacted.written), default=None)
    carried = max((t for t in (newest, newest_event_ms(run.target.table)) if t is not None), default=None)
    if carried is not None:
        summary[NEWEST_EVENT_PROPERTY] = str(carried)
    sequence = run.target.next_sequence
    assert run.lease is not None
    run.lease.check()
    with stage(
        "commit",
        f"{len(batch.data_files)} data file(s) + ledger of "
        f"{sum(b.files for b in ledger.buckets.values())} raw files, "
        f"asserting snapshot {run.intent.planned_snapshot}",
    ):
        r.snapshot_id = commit(
            run.target,
            [(target.uri(f), w) for f, w in zip(batch.data_files, batch.compacted.written, strict=True)],
            target.uri(run.intent.ledger),
            run.raw.location,
            c.run_id,
            summary,
            c.schema,
            run.changes,
            run.table_schema,
        )
    r.sequence_number = sequence
    snap = run.target.table.current_snapshot()
    if newest is not None and snap is not None:
        r.commit_lag_s = round((snap.timestamp_ms - newest) / 1000, 3)
    r.newest_event_ms = carried
    if c.on_commit is not None:
        c.on_commit(r.to_dict())
    r.ledger = target.uri(run.intent.ledger)
    run.ledger = replace(ledger, uri=r.ledger)


def tidy_up(run: Run, batch: Batch) -> None:
    """After the commit: drop the staging folder and old ledger; delete consumed raw files when asked."""
    if run.intent is not None:
        finish(run.target, run.intent)
    if run.deferred and run.report.snapshot_id is not None:
        recover_orphans(run)  # this run's commit moved the table on: those runs can no longer commit
    retention = _retention_s(run.config)
    if retention is not None:
        due = set(_due_buckets(run))
        compacted = [f for f in run.ledger.consumed(run.listing, COMPACTED) if bucket_of(f.rel) in due]
        files = old_enough(compacted, run.config.delete_min_age_s)
        with stage(
            "delete-source",
            f"{len(files)} raw file(s) compacted at least {retention:g} s ago and "
            f"older than {run.config.delete_min_age_s:g} s "
            f"({len(compacted) - len(files)} kept for now)",
        ):
            try:
                run.raw.storage.delete_many([f.rel for f in files])
            except StorageDenied as exc:
                raise StorageDenied(
                    f"the commit stands, but {exc.left} compacted raw file(s) were not deleted: {exc}; deleting "
                    "raw files (--delete-source, --raw-retention) needs modify on the raw table, whose retention "
                    "is otherwise the ingestion's",
                    exc.left,
                ) from None
        run.report.source_files_deleted = len(files)


def _retention_s(config: CompactConfig) -> float | None:
    """How long after compaction raw files are deleted: 0 with --delete-source, --raw-retention, or None."""
    return 0.0 if config.delete_source else config.raw_retention_s


def _due_buckets(run: Run) -> list[str]:
    """The buckets holding raw files compacted longer ago than the retention (none without one).
    A bucket's entries of deleted files leave the ledger when a later run lists it, so each bucket
    is visited a few times after its files were compacted, then no more."""
    retention = _retention_s(run.config)
    if retention is None:
        return []
    now = datetime.now(timezone.utc)
    return [
        name
        for name, b in run.ledger.buckets.items()
        if b.compacted and b.consumed_at and (now - datetime.fromisoformat(b.consumed_at)).total_seconds() >= retention
    ]


def old_enough(files: list[FileEntry], min_age_s: float) -> list[FileEntry]:
    """The files last modified at least ``min_age_s`` ago (a file of unknown age is never old enough)."""
    now = datetime.now(timezone.utc)
    return [f for f in files if f.mtime is not None and (now - f.mtime).total_seconds() >= min_age_s]


def emit_report(run: Run) -> None:
    """The summary on stdout, and as JSON when asked for (with the table's snapshots and data files)."""
    meta = run.target.table.metadata
    current = meta.current_snapshot()
    run.report.table_snapshots = len(meta.snapshots)
    run.report.newest_event_ms = newest_event_ms(run.target.table)
    if current is not None and current.summary is not None:
        run.report.table_data_files = int(current.summary.get("total-data-files", 0))
    print("\n".join(run.report.summary_lines()), flush=True)
    if run.config.report_path:
        run.report.write_json(run.config.report_path)
