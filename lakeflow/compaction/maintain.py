"""``lakeflow maintain`` (and ``lakeflow compact --maintain``): keep the compacted table's files and
snapshots few. Every compaction run adds Parquet files and a snapshot; this is compaction one level up.

Three steps, under the table's lease (no compaction runs meanwhile, on any host) and after the
compactor's own recovery (:mod:`~lakeflow.compaction.recovery`, which owns ``data/_staging/``):

1. **Rewrite.** A data file under ``small_file_bytes`` (COMPACT_SMALL_FILE_MB, default 3/4 of the
   target size) is *small*; a partition holding at least :data:`MIN_SMALL_FILES` of them has
   them merged — their rows read as the table's current schema (pyiceberg's scan: older files'
   columns projected), sorted by the declared sort order, cut into files of about the target size
   and written as the compaction writes them (:class:`~lakeflow.compaction.rows.Writer`) — and
   replaced in one snapshot: pyiceberg's ``overwrite`` with ``delete_data_file`` /
   ``append_data_file`` (0.12 has no ``replace`` operation). Rows are never changed, dropped or
   added; larger files are left alone. The new files are announced by an intent, staged and named
   as a compaction run's (:mod:`~lakeflow.compaction.naming`), so recovery tidies up after a crash.
   The commit asserts the branch head it was planned on; on a conflict it is tried again on fresh
   metadata (pyiceberg refuses it if a replaced file is gone) up to :data:`MAX_ATTEMPTS` times,
   else the new files are deleted and the table is as it was.
2. **Expire snapshots** older than ``expire_older_than_s``, never the newest ``keep_last`` nor a
   branch or tag head (the current snapshot); then delete the files only expired snapshots
   referenced (manifest lists, manifests, replaced data files), as Iceberg's expire_snapshots does.
   The compaction ledger is a table property, which no expiry touches.
3. **Remove orphan files** under ``data/`` and ``metadata/`` that no snapshot (in any manifest
   entry) and no metadata (current and logged metadata files, statistics) references, at least
   ``orphan_min_age_s`` old, and not announced by a pending intent (recovery's to judge). Nothing
   else of the table's folder is looked at: ``_lakeflow/`` (the ledger, intents, lease, and the
   quarantine of bad records and files) is never an orphan.
4. **Clear the raw table's leftovers** of killed Flink writers (when the raw table is given): its
   open S3 multipart uploads are aborted and its hidden in-progress part files deleted, once at
   least ``leftover_min_age_s`` old (initiated / last modified). They hold no committed reading,
   but S3 bills an upload's parts until it is aborted. A running job's current ones are seconds to
   a checkpoint old; a job restored from a checkpoint completes the uploads that checkpoint names,
   so the age must exceed how long a job may stay down and still be restored. This step deletes in
   the raw table, the ingestion's: it needs ``modify`` there, which the compaction's principal
   lacks under least privilege (``select`` only: read-only credentials). What the storage refuses is
   reported — how many are left, who may not, and the command to run as a principal with ``modify``
   (``lakeflow maintain --raw-leftovers-only``: this step alone, :func:`run_raw_leftovers`) — and is
   no error.

``dry_run`` plans every step and changes nothing (and takes no lease: it writes nothing).
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from itertools import islice
from typing import TYPE_CHECKING

from lakeflow.catalog.errors import CommitConflict, iceberg_errors
from lakeflow.compaction.commit import (
    NEWEST_EVENT_PROPERTY,
    RUN_PROPERTY,
    Target,
    data_file,
    newest_event_ms,
    principal_of,
    reachable,
)
from lakeflow.compaction.config import CompactConfig, MaintainOptions
from lakeflow.compaction.files import DENIED, FileEntry, Storage, StorageDenied, Upload
from lakeflow.compaction.lease import Lease, LeaseLost
from lakeflow.compaction.naming import SEPARATOR, STAGING, STATE_DIR, final_paths, intent_name, is_run_id
from lakeflow.compaction.recovery import Intent, finish, save_intent
from lakeflow.compaction.rows import Writer, WrittenFile
from lakeflow.compaction.run import Run, begin, hold_lease, plan, plan_schema, recover_orphans
from lakeflow.compaction.source import open_raw
from lakeflow.readings import is_in_progress
from lakeflow.schema.model import TableSchema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger("lakeflow.compaction.maintain")
MIN_SMALL_FILES = 2  # a partition is rewritten when it holds at least this many small files
MAX_ATTEMPTS = 3  # commits of one partition's rewrite before giving up on conflicts
MAINTAIN_PROPERTY = "lakeflow.maintain"  # snapshot summary: "rewrite" on a rewrite's snapshot


@dataclass
class Rewrite:
    """One partition's rewrite (planned, under a dry run)."""

    partition: str  # its path: ts_day=2026-11-28 ("" for an unpartitioned table)
    files_before: int  # the partition's data files
    files_after: int
    bytes_before: int
    bytes_after: int
    rows: int  # rows of the merged (small) files: the same before and after
    merged: int  # small files replaced
    snapshot_id: int | None = None
    attempts: int = 0

    def line(self, dry_run: bool) -> str:
        head = f"{self.partition or 'the table'}: {self.files_before} → {self.files_after} file(s)"
        if dry_run:
            return f"{head} ({self.merged} small file(s), {self.rows} rows, would be merged)"
        return (
            f"{head}, {self.bytes_before} → {self.bytes_after} bytes, {self.rows} rows "
            f"({self.merged} small file(s) merged; snapshot {self.snapshot_id}, attempt {self.attempts})"
        )


@dataclass
class MaintainReport:
    """What maintenance did (or, under a dry run, would do)."""

    table: str
    dry_run: bool = False
    rewrites: list[Rewrite] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # partitions that changed under their rewrite
    recovered: int = 0  # data files of crashed runs recovery deleted
    snapshots_before: int = 0
    snapshots_expired: list[int] = field(default_factory=list)
    expired_files_deleted: int = 0  # files only expired snapshots referenced
    orphans: list[str] = field(default_factory=list)  # table-relative paths removed
    orphan_bytes: int = 0
    orphans_too_young: int = 0  # unreferenced, but younger than the minimum age
    uploads_aborted: int = 0  # the raw table's open multipart uploads aborted (S3)
    uploads_too_young: int = 0  # open, but younger than the leftovers' minimum age
    in_progress_removed: int = 0  # the raw table's hidden in-progress part files deleted
    in_progress_too_young: int = 0
    uploads_unlisted: str = ""  # why the open uploads could not be listed (the credentials may not)
    uploads_denied: int = 0  # old open uploads the raw table's credentials may not abort (left)
    in_progress_denied: int = 0  # old in-progress files they may not delete (left)
    leftovers_denied: str = ""  # who may not, and what to run instead ("" when nothing was refused)
    raw_leftovers_only: bool = False  # only step 4 ran (lakeflow maintain --raw-leftovers-only)

    def summary_lines(self) -> list[str]:
        would = "would be " if self.dry_run else ""
        head = f"maintain {self.table}{' (dry run: nothing changed)' if self.dry_run else ''}: "
        if self.raw_leftovers_only:
            return [head + "the raw table's leftovers only", *self._leftover_lines(would)]
        lines = [head + f"{len(self.rewrites)} partition(s) {would}rewritten"]
        lines += [f"  {r.line(self.dry_run)}" for r in self.rewrites]
        lines += [f"  {p or 'the table'}: changed under the rewrite, left as it was" for p in self.skipped]
        lines.append(
            f"snapshots: {len(self.snapshots_expired)} of {self.snapshots_before} {would}expired"
            + ("" if self.dry_run else f", {self.expired_files_deleted} file(s) only they referenced deleted")
        )
        lines.append(
            f"orphan files: {len(self.orphans)} ({self.orphan_bytes} bytes) {would}removed, "
            f"{self.orphans_too_young} too young to tell kept"
        )
        lines += [f"  {rel}" for rel in self.orphans] if self.dry_run else []
        return lines + self._leftover_lines(would)

    def _leftover_lines(self, would: str) -> list[str]:
        lines = [
            f"raw table leftovers: {self.uploads_aborted} open upload(s) {would}aborted, "
            f"{self.in_progress_removed} in-progress file(s) {would}removed; "
            f"{self.uploads_too_young + self.in_progress_too_young} too young kept"
        ]
        if self.uploads_unlisted:
            lines.append(f"  open uploads not listed: {self.uploads_unlisted}")
        if self.leftovers_denied:
            lines.append(f"  {self.leftovers_denied}")
        return lines

    def counts(self) -> dict[str, int]:
        """What it did, as numbers (for a compaction run's report and its metrics)."""
        return {
            "partitions_rewritten": len(self.rewrites),
            "snapshots_expired": len(self.snapshots_expired),
            "orphans_removed": len(self.orphans),
            "uploads_aborted": self.uploads_aborted,
            "in_progress_removed": self.in_progress_removed,
            "leftovers_too_young": self.uploads_too_young + self.in_progress_too_young,
            "leftovers_denied": self.uploads_denied + self.in_progress_denied,
        }


def maintain(
    target: Target,
    options: MaintainOptions,
    schema: TableSchema,
    lease: Lease | None = None,
    raw: Storage | None = None,
) -> MaintainReport:
    """Rewrite small files, expire snapshots, remove orphans, clear the raw table's leftovers (see
    the module's docstring). ``schema``: the declared one (its sort order); ``lease``: the table's
    lease, checked before every commit and delete (None only for a dry run or a test); ``raw``: the
    raw table's files (None: leftovers not cleared; what its credentials may not delete is reported
    naming the catalog's principal)."""
    report = MaintainReport(table=".".join(target.table.name()), dry_run=options.dry_run)
    target.table.refresh()
    for partition, files in live_files(target.table).items():
        rewrite_partition(target, partition, files, options, schema, lease, report)
    expire_snapshots(target, options, lease, report)
    remove_orphans(target, options, lease, report)
    if raw is not None:
        clear_leftovers(raw, options, report, principal_of(target.table.catalog))
    return report


# --- 1. rewrite ---------------------------------------------------------------------------------


def live_files(table: Table) -> dict[str, list[DataFile]]:
    """The current snapshot's data files of the current partition spec by partition (its path:
    ``ts_day=2026-11-28``; "" unpartitioned), partitions in order. Files of an older spec are left alone."""
    from pyiceberg.manifest import DataFileContent

    snap = table.current_snapshot()
    if snap is None:
        return {}
    spec, schema = table.spec(), table.schema()
    out: dict[str, list[DataFile]] = {}
    for manifest in snap.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            f = entry.data_file
            if f.content == DataFileContent.DATA and f.spec_id == spec.spec_id:
                out.setdefault(spec.partition_to_path(f.partition, schema) if spec.fields else "", []).append(f)
    return dict(sorted(out.items()))


def small_files(files: Sequence[DataFile], options: MaintainOptions) -> list[DataFile]:
    """The partition's files to merge, in name (= time) order: its small files when there are at
    least :data:`MIN_SMALL_FILES` of them, else none."""
    small = sorted((f for f in files if f.file_size_in_bytes < options.small_file_bytes), key=lambda f: f.file_path)
    return small if len(small) >= MIN_SMALL_FILES else []


def groups(files: Sequence[DataFile], max_bytes: int) -> list[list[DataFile]]:
    """Consecutive files of at most ``max_bytes`` together (one file alone may be larger): what is
    merged in memory at once."""
    out: list[list[DataFile]] = []
    size = 0
    for f in files:
        if not out or size + f.file_size_in_bytes > max_bytes:
            out.append([])
            size = 0
        out[-1].append(f)
        size += f.file_size_in_bytes
    return out


def merged(table: Table, files: Sequence[DataFile]) -> pa.Table:
    """The rows of ``files`` as the table's current schema (pyiceberg projects older files' columns)."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.table import FileScanTask

    scan = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
    rows = scan.to_table([FileScanTask(f) for f in files])
    expected = sum(f.record_count for f in files)
    if rows.num_rows != expected:
        raise RuntimeError(f"read {rows.num_rows} rows from files whose metadata counts {expected}: not rewriting")
    return rows


def rewrite_partition(
    target: Target,
    partition: str,
    files: Sequence[DataFile],
    options: MaintainOptions,
    schema: TableSchema,
    lease: Lease | None,
    report: MaintainReport,
) -> None:
    """Merge the partition's small files into target-size files in one snapshot (when it has enough)."""
    from pyiceberg.exceptions import ValidationException

    small = small_files(files, options)
    if not small:
        return
    batches = groups(small, options.group_max_bytes)
    result = Rewrite(
        partition=partition,
        files_before=len(files),
        files_after=0,
        bytes_before=sum(f.file_size_in_bytes for f in files),
        bytes_after=0,
        rows=sum(f.record_count for f in small),
        merged=len(small),
    )
    if options.dry_run:
        result.files_after = (
            len(files)
            - len(small)
            + sum(max(1, math.ceil(sum(f.file_size_in_bytes for f in g) / options.target_file_bytes)) for g in batches)
        )
        report.rewrites.append(result)
        return
    storage, table = target.storage, target.table
    writer = Writer(schema, table.schema(), table.spec(), dict(table.properties), storage)
    intent = Intent(run_id=str(uuid.uuid4()), planned_snapshot=target.snapshot_id)
    save_intent(storage, intent)  # before any file is written
    try:
        staged: list[WrittenFile] = []
        for n, batch in enumerate(batches):
            count = max(1, math.ceil(sum(f.file_size_in_bytes for f in batch) / options.target_file_bytes))
            staged += writer.write(merged(table, batch), count, intent.staging, f"part-g{n:05d}")
        paths = final_paths(staged, table.name()[-1], target.next_sequence, intent.run_id)
        intent = replace(intent, data_files=tuple(paths))
        save_intent(storage, intent)  # final names recorded before they exist
        for s, final in zip(staged, paths, strict=True):
            storage.move(s.rel, final)
        added = [(storage.uri(p), w) for p, w in zip(paths, staged, strict=True)]
        result.snapshot_id, result.attempts = _commit(target, small, added, intent, lease)
    except (CommitConflict, ValidationException, LeaseLost) as exc:
        _discard(storage, intent)
        if not isinstance(exc, ValidationException):
            raise
        log.warning("[maintain] %s: a file to replace is gone (%s): nothing changed", partition or "the table", exc)
        report.skipped.append(partition)
        return
    finish(target, intent)
    result.files_after = len(files) - len(small) + len(paths)
    result.bytes_after = result.bytes_before - sum(f.file_size_in_bytes for f in small) + sum(s.size for s in staged)
    log.info("[maintain] %s", result.line(dry_run=False))
    report.rewrites.append(result)


def _commit(
    target: Target,
    replaced: Sequence[DataFile],
    written: Sequence[tuple[str, WrittenFile]],
    intent: Intent,
    lease: Lease | None,
) -> tuple[int, int]:
    """One snapshot replacing ``replaced`` by the ``written`` files ((URI, file)), asserting the branch
    head; on a conflict again on fresh metadata. Returns (snapshot id, attempts); CommitConflict after
    :data:`MAX_ATTEMPTS`."""
    table = target.table
    props = {RUN_PROPERTY: intent.run_id, MAINTAIN_PROPERTY: "rewrite"}
    what = f"rewrite in Iceberg table {'.'.join(table.name())}"
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if lease is not None:
            lease.check()
        added = [data_file(uri, w, table.metadata.default_spec_id) for uri, w in written]
        newest = newest_event_ms(table)  # the rows stay the same: so does the newest event time
        carried = {NEWEST_EVENT_PROPERTY: str(newest)} if newest is not None else {}
        try:
            with (
                iceberg_errors(what, principal_of(table.catalog)),
                table.transaction() as tx,
                tx.update_snapshot(snapshot_properties={**props, **carried}).overwrite() as rewrite,
            ):
                for f in replaced:
                    rewrite.delete_data_file(f)
                for f in added:
                    rewrite.append_data_file(f)
        except CommitConflict as exc:
            log.warning("[maintain] attempt %d of %d: %s", attempt, MAX_ATTEMPTS, exc)
            if attempt == MAX_ATTEMPTS:
                raise
            table.refresh()
            intent = replace(intent, planned_snapshot=table.metadata.current_snapshot_id)
            save_intent(target.storage, intent)
            continue
        snap = table.current_snapshot()
        assert snap is not None and snap.summary is not None and snap.summary.get(RUN_PROPERTY) == intent.run_id
        return snap.snapshot_id, attempt
    raise AssertionError("unreachable")


def _discard(storage: Storage, intent: Intent) -> None:
    """Delete what an uncommitted rewrite wrote (it never became visible), then its intent."""
    for rel in intent.data_files:
        storage.delete(rel)
    storage.delete_dir(intent.staging)
    storage.delete(intent_name(intent.run_id))


# --- 2. expire snapshots ------------------------------------------------------------------------


def expirable(table: Table, options: MaintainOptions, now: datetime) -> list[Snapshot]:
    """Snapshots older than the limit, except the newest ``keep_last`` of the current branch and
    every branch or tag head."""
    from pyiceberg.table.snapshots import ancestors_of

    meta = table.metadata
    kept = {ref.snapshot_id for ref in meta.refs.values()}
    kept.update(s.snapshot_id for s in islice(ancestors_of(table.current_snapshot(), meta), options.keep_last))
    cutoff_ms = (now.timestamp() - options.expire_older_than_s) * 1000
    return [s for s in meta.snapshots if s.timestamp_ms < cutoff_ms and s.snapshot_id not in kept]


def expire_snapshots(target: Target, options: MaintainOptions, lease: Lease | None, report: MaintainReport) -> None:
    """Expire old snapshots (pyiceberg's ``maintenance.expire_snapshots``), then delete the files only
    they referenced."""
    table = target.table
    doomed = expirable(table, options, datetime.now(timezone.utc))
    report.snapshots_before = len(table.metadata.snapshots)
    report.snapshots_expired = [s.snapshot_id for s in doomed]
    if not doomed or options.dry_run:
        return
    before = reachable(table.io, table.metadata.snapshots)
    if lease is not None:
        lease.check()
    with iceberg_errors(f"expire snapshots of Iceberg table {report.table}", principal_of(table.catalog)):
        table.maintenance.expire_snapshots().by_ids(report.snapshots_expired).commit()
    table.refresh()
    gone = sorted(_relative(target.storage, before - reachable(table.io, table.metadata.snapshots)))
    target.storage.delete_many(gone)
    report.expired_files_deleted = len(gone)
    log.info("[maintain] %d snapshot(s) expired, %d file(s) only they referenced deleted", len(doomed), len(gone))


# --- 3. orphan files ----------------------------------------------------------------------------


def orphan_files(target: Target, options: MaintainOptions, now: datetime) -> tuple[list[FileEntry], int]:
    """Unreferenced files under ``data/`` and ``metadata/`` at least the minimum age old, and how many
    younger ones were left; files announced by a pending intent are recovery's and never listed."""
    table, storage = target.table, target.storage
    meta = table.metadata
    live = reachable(table.io, meta.snapshots) | {table.metadata_location}
    live.update(entry.metadata_file for entry in meta.metadata_log)
    live.update(s.statistics_path for s in (*meta.statistics, *meta.partition_statistics))
    referenced = set(_relative(storage, live))
    pending = pending_runs(storage)
    orphans, young = [], 0
    for entry in (*storage.list("data"), *storage.list("metadata")):
        if entry.rel in referenced or _announced(entry.rel, pending):
            continue
        if entry.mtime is None or (now - entry.mtime).total_seconds() < options.orphan_min_age_s:
            young += 1
            continue
        orphans.append(entry)
    return orphans, young


def remove_orphans(target: Target, options: MaintainOptions, lease: Lease | None, report: MaintainReport) -> None:
    orphans, report.orphans_too_young = orphan_files(target, options, datetime.now(timezone.utc))
    report.orphans = [e.rel for e in orphans]
    report.orphan_bytes = sum(e.size for e in orphans)
    if options.dry_run:
        return
    if orphans and lease is not None:
        lease.check()
    for entry in orphans:
        log.info("[maintain] orphan %s (%d bytes, %s): removing", entry.rel, entry.size, entry.mtime)
    target.storage.delete_many([e.rel for e in orphans])


def pending_runs(storage: Storage) -> frozenset[str]:
    """Run ids with an intent under the table's bookkeeping (runs recovery has not settled yet)."""
    prefix = f"{STATE_DIR}/intent-"
    ids = (
        e.rel[len(prefix) : -len(".json")]
        for e in storage.list(STATE_DIR)
        if e.rel.startswith(prefix) and e.rel.endswith(".json")
    )
    return frozenset(i for i in ids if is_run_id(i))


def _announced(rel: str, runs: frozenset[str]) -> bool:
    """True for a staged or final data file of one of ``runs`` (see :mod:`~lakeflow.compaction.naming`)."""
    if rel.startswith(f"{STAGING}/"):
        return rel[len(STAGING) + 1 :].split("/", 1)[0] in runs
    return rel.endswith(".parquet") and rel[: -len(".parquet")].rsplit(SEPARATOR, 1)[-1] in runs


def _relative(storage: Storage, uris: Iterable[str]) -> Iterator[str]:
    """``uris`` under the table's location, relative to it (others are not this table's files)."""
    for uri in uris:
        try:
            yield storage.relative(uri)
        except ValueError:
            continue


# --- 4. the raw table's leftovers ----------------------------------------------------------------


UNLISTED = (
    "{code}: the raw table's credentials may not list multipart uploads (s3:ListBucketMultipartUploads on the "
    "bucket); the bucket's lifecycle rule AbortIncompleteMultipartUpload must abort them (docs/operations.md)"
)
DENIED_LEFTOVERS = (
    "{left} left: {who} may not delete in the raw table {location}; run `lakeflow maintain --raw-leftovers-only` "
    "as a principal with modify on it (the ingestion's)"
)


def leftovers(
    raw: Storage, min_age_s: float, now: datetime, uploads_found: Sequence[Upload]
) -> tuple[list[Upload], int, list[FileEntry], int]:
    """Of ``uploads_found`` (the raw table's open multipart uploads) and its hidden in-progress
    files, those at least ``min_age_s`` old, each with how many younger ones there are."""
    uploads, young_uploads = [], 0
    for upload in uploads_found:
        if (now - upload.initiated).total_seconds() >= min_age_s:
            uploads.append(upload)
        else:
            young_uploads += 1
    files, young_files = [], 0
    for entry in raw.list():
        if not is_in_progress(entry.rel):
            continue
        if entry.mtime is not None and (now - entry.mtime).total_seconds() >= min_age_s:
            files.append(entry)
        else:
            young_files += 1
    return uploads, young_uploads, files, young_files


def clear_leftovers(raw: Storage, options: MaintainOptions, report: MaintainReport, principal: str = "") -> None:
    """Abort the raw table's old open uploads and delete its old in-progress files (step 4). Open
    uploads the credentials may not list are reported, not an error (the lifecycle rule's job); so
    are those they may not abort or delete (read-only credentials: ``principal`` holds no ``modify``
    on the raw table), with how many are left."""
    from botocore.exceptions import ClientError

    try:
        found = raw.open_uploads()
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code not in DENIED:
            raise
        report.uploads_unlisted = UNLISTED.format(code=code)
        log.warning("[maintain] open uploads of %s not listed: %s", raw.location, report.uploads_unlisted)
        found = []
    uploads, report.uploads_too_young, files, report.in_progress_too_young = leftovers(
        raw, options.leftover_min_age_s, datetime.now(timezone.utc), found
    )
    if options.dry_run:
        report.uploads_aborted, report.in_progress_removed = len(uploads), len(files)
        return
    for upload in uploads:
        log.info("[maintain] open upload %s (initiated %s): aborting", upload.rel, upload.initiated)
        try:
            raw.abort_upload(upload)
        except StorageDenied:
            report.uploads_denied += 1
            continue
        report.uploads_aborted += 1
    for entry in files:
        log.info("[maintain] in-progress file %s (%d bytes, %s): removing", entry.rel, entry.size, entry.mtime)
    try:
        raw.delete_many([e.rel for e in files])
    except StorageDenied as exc:
        report.in_progress_denied = exc.left
    report.in_progress_removed = len(files) - report.in_progress_denied
    left = report.uploads_denied + report.in_progress_denied
    if left:
        report.leftovers_denied = DENIED_LEFTOVERS.format(
            left=left, who=principal or "this principal", location=raw.location
        )
        log.warning("[maintain] %s", report.leftovers_denied)


def run_raw_leftovers(config: CompactConfig) -> MaintainReport:
    """``lakeflow maintain --raw-leftovers-only``: step 4 alone, on the stream's raw table — no Iceberg
    table, no lease (the compaction never reads in-progress files nor uploads; their age keeps a
    running writer's) — for a principal with ``modify`` on the raw table, e.g. the ingestion's."""
    from lakeflow.auth import principal_name

    raw = open_raw(config.settings, config.stream)
    report = MaintainReport(table=config.stream.raw_name, dry_run=config.maintenance.dry_run, raw_leftovers_only=True)
    clear_leftovers(raw.storage, config.maintenance, report, principal_name(config.settings))
    return report


# --- commands -----------------------------------------------------------------------------------


def after_compaction(run: Run) -> MaintainReport:
    """``lakeflow compact --maintain``: maintain the table under the run's lease, after its commit."""
    report = maintain(run.target, run.config.maintenance, run.config.schema, run.lease, run.raw.storage)
    run.report.maintenance = report.counts()
    print("\n".join(report.summary_lines()), flush=True)
    return report


def run_maintain(config: CompactConfig) -> MaintainReport:
    """``lakeflow maintain``: open the tables, take the lease, recover, maintain; what it did (or would do)."""
    run = begin(config)
    if config.maintenance.dry_run:
        report = maintain(run.target, config.maintenance, config.schema, raw=run.raw.storage)
    else:
        with hold_lease(run):
            plan(run)
            plan_schema(run)  # a declaration the compaction would refuse stops maintenance too
            recover_orphans(run)  # the compactor's recovery: crashed runs' staging and data files
            report = maintain(run.target, config.maintenance, config.schema, run.lease, run.raw.storage)
            report.recovered = run.report.orphans_removed
    return report
