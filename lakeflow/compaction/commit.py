"""The Iceberg side (pyiceberg): the catalog, the target table, and the one atomic commit per run.

The commit adds the engine-written data files (their Iceberg metadata computed where they were written:
:class:`~lakeflow.compaction.rows.WrittenFile`), applies the run's schema evolution
(:mod:`lakeflow.schema.evolution`) and, in the same transaction, points the table's
``lakeflow.compaction.ledger`` property at the run's ledger. Every commit adds a snapshot
(an empty one when the run only quarantined or de-duplicated), and a snapshot commit asserts that
the table is still at the snapshot the run planned on: a concurrent commit makes ours fail instead
of adding rows twice or losing the other's ledger (the table disables pyiceberg's automatic retries).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from lakeflow.auth import principal_name
from lakeflow.catalog.errors import CommitConflict, iceberg_errors
from lakeflow.catalog.lakekeeper import LakekeeperCatalog
from lakeflow.compaction.files import TableFiles
from lakeflow.credentials import parse_vended
from lakeflow.schema.evolution import Change, TableLayout, evolve
from lakeflow.schema.model import TableSchema
from lakeflow.secret import redact
from lakeflow.settings import Settings, is_uuid
from lakeflow.uris import S3_SCHEMES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

    from lakeflow.compaction.rows import WrittenFile

log = logging.getLogger(__name__)

PRINCIPAL_PROPERTY = "lakeflow.principal"  # a catalog property of ours: who it acts as (refusals name it)
LEDGER_PROPERTY = "lakeflow.compaction.ledger"
SOURCE_PROPERTY = "lakeflow.compaction.source"
RUN_PROPERTY = "lakeflow.compaction.run-id"
EVENT_TIME_PROPERTY = "lakeflow.schema.event-time"  # the table's event time (a top-level field)
KEY_PROPERTY = "lakeflow.schema.key"  # its key fields, comma-separated ("" none)
DIGEST_PROPERTY = "lakeflow.schema.digest"  # the declaration its last commit was written under
# In a snapshot's summary: the newest event time (epoch ms) among the table's rows as of that snapshot,
# written by every compaction commit (the newer of the parent's and its own rows') and carried by
# maintenance's rewrites: what the end-to-end lag is measured from (:func:`newest_event_ms`).
NEWEST_EVENT_PROPERTY = "lakeflow.newest-event-time-ms"
# pyiceberg retries a failed append on top of the newer snapshot; ours must not be retried blindly,
# since the ledger it carries was read from the snapshot it started on.
NO_RETRY = {"commit.retry.num-retries": "0"}
# A commit a minute must not cost more as the table ages: each commit merges the manifests once ten
# have piled up (a fast append adds one per commit, and planning reads them all), and keeps only the
# last 20 metadata files (the metadata log), deleting older ones. Snapshots are bounded by
# ``lakeflow maintain`` (expiry), on the schedule of ``lakeflow compact --every … --maintain-every``.
BOUNDED_METADATA = {
    "commit.manifest-merge.enabled": "true",
    "commit.manifest.min-count-to-merge": "10",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}
MANAGED_PROPERTIES = {**NO_RETRY, **BOUNDED_METADATA}  # set on tables created before them too
TABLE_PROPERTIES = {"write.parquet.compression-codec": "zstd", "format-version": "2", **MANAGED_PROPERTIES}


def rest_properties(settings: Settings, warehouse: str | None = None) -> dict[str, str]:
    """pyiceberg RestCatalog properties for Lakekeeper's Iceberg REST catalog (``{LAKEKEEPER}/catalog``);
    ``warehouse`` as that catalog names it (:func:`iceberg_warehouse`; default: WAREHOUSE_ID as set)."""
    props = {"uri": f"{settings.lakekeeper}/catalog", "warehouse": warehouse or settings.warehouse or ""}
    if settings.token:
        props["token"] = settings.token.reveal()
    elif settings.oauth_client_id and settings.oauth_client_secret and settings.oauth_token_url:
        props["credential"] = f"{settings.oauth_client_id}:{settings.oauth_client_secret.reveal()}"
        props["oauth2-server-uri"] = settings.oauth_token_url
        props["scope"] = settings.oauth_scope or "lakekeeper"
    if settings.project_id:
        props["header.x-project-id"] = settings.project_id
    return props


def principal_of(catalog: Catalog) -> str:
    """Who ``catalog`` acts as (:func:`~lakeflow.auth.principal_name`), for refusals; "" when unknown."""
    return catalog.properties.get(PRINCIPAL_PROPERTY, "")


def iceberg_catalog(settings: Settings) -> Catalog:
    """Lakekeeper's Iceberg REST catalog when configured, else the embedded SQLite catalog in LAKEFLOW_HOME.

    The REST catalog's requests time out after HTTP_TIMEOUT_S and only reads are retried: a commit
    whose answer was lost is never re-sent blindly (the run fails; its next run recovers). The
    tables' FileIO uses S3_ENDPOINT, when set, over the endpoint the catalog vends."""
    if settings.catalog == "lakekeeper":
        from pyiceberg.catalog.rest import RestCatalog
        from pyiceberg.typedef import EMPTY_DICT, Properties
        from requests import Session

        from lakeflow.http import HttpOptions, configure

        options = HttpOptions(
            timeout=settings.http_timeout_s,
            max_retries=settings.http_max_retries,
            retry_methods=frozenset({"GET", "HEAD"}),
        )

        class _RestCatalog(RestCatalog):
            def _create_session(self) -> Session:
                return configure(super()._create_session(), options)

            def _load_file_io(self, properties: Properties = EMPTY_DICT, location: str | None = None) -> FileIO:
                if settings.s3_endpoint:  # S3_ENDPOINT overrides the vended endpoint for pyiceberg's reads too
                    properties = {**properties, "s3.endpoint": settings.s3_endpoint}
                return super()._load_file_io(properties, location)

        props = {**rest_properties(settings, iceberg_warehouse(settings)), PRINCIPAL_PROPERTY: principal_name(settings)}
        log.info("[iceberg] REST catalog %s", redact(props, ("credential",)))
        with iceberg_errors(f"open the Iceberg catalog {props['uri']} (warehouse {props['warehouse']})"):
            return _RestCatalog("lakekeeper", **props)
    settings.home.mkdir(parents=True, exist_ok=True)
    db = settings.home / "iceberg.db"
    return _sql_catalog(settings.home, db.stat().st_ino if db.exists() else None)


@functools.cache
def _sql_catalog(home: Path, inode: int | None) -> Catalog:
    """The embedded SQLite catalog of ``home``, opened once a process (its engine set up once, not each
    run of a service), and again when its database file was replaced (``inode``)."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("lakeflow", uri=f"sqlite:///{home / 'iceberg.db'}", warehouse=(home / "iceberg").as_uri())


def iceberg_warehouse(settings: Settings) -> str:
    """WAREHOUSE_ID as Lakekeeper's Iceberg catalog accepts it: a name as it is, a UUID resolved to
    ``<project-id>/<name>`` (``/catalog/v1/config`` resolves names only)."""
    if not settings.warehouse or not is_uuid(settings.warehouse):
        return settings.warehouse or ""
    with LakekeeperCatalog.from_settings(settings) as lakekeeper:
        return lakekeeper.iceberg_warehouse()


def iceberg_catalog_uri(settings: Settings) -> str:
    """The Iceberg catalog's address, for lineage aliases."""
    if settings.catalog == "lakekeeper":
        return f"{settings.lakekeeper}/catalog"
    return (settings.home / "iceberg.db").as_uri()


@dataclass(frozen=True)
class Target(TableFiles):
    """The Iceberg table a run commits to, as it was when the run loaded it, and its files (footers,
    renames, clean-up; the engines' output)."""

    table: Table

    @property
    def ledger_pointer(self) -> str | None:
        return self.table.properties.get(LEDGER_PROPERTY)

    @property
    def ledger_rel(self) -> str:
        """The current ledger relative to the table's folder ("" when none, or kept under the raw table)."""
        try:
            return self.storage.relative(self.ledger_pointer) if self.ledger_pointer else ""
        except ValueError:
            return ""

    @property
    def snapshot_id(self) -> int | None:
        """The snapshot the table was at when loaded: what this run plans on, and its commit asserts."""
        return self.table.metadata.current_snapshot_id

    def committed(self, run_id: str) -> bool:
        """True if a snapshot the table still keeps was committed by run ``run_id``."""
        return any(_run_of(snap) == run_id for snap in self.table.metadata.snapshots)

    @property
    def next_sequence(self) -> int:
        """The sequence number this run's snapshot will get (format v2 on: the last one + 1)."""
        return self.table.metadata.next_sequence_number()

    def bytes_per_row(self, default: int) -> float:
        """Parquet bytes per row in the table so far (``default`` while it is empty)."""
        snap = self.table.current_snapshot()
        summary = snap.summary if snap and snap.summary else None
        size = int(summary.get("total-files-size", 0)) if summary else 0
        rows = int(summary.get("total-records", 0)) if summary else 0
        return size / rows if size and rows else float(default)

    def layout(self, declared: TableSchema) -> TableLayout:
        """The table's event time, key and partition spec; a table made before lakeflow recorded them
        (0.2) takes the ``declared`` ones, which its next commit records."""
        props = self.table.properties
        key = props.get(KEY_PROPERTY)
        return TableLayout(
            event_time=props.get(EVENT_TIME_PROPERTY, declared.event_time),
            key=declared.key if key is None else tuple(k for k in key.split(",") if k),
            spec=self.table.spec(),
        )

    def files_overlapping(self, lo_ms: int, hi_ms: int, event_time: str) -> list[str]:
        """The table's data files whose event-time range meets [lo_ms, hi_ms] (epoch ms); ``event_time``:
        the declared one, for a table that has not recorded its own."""
        from datetime import datetime, timezone

        from pyiceberg.expressions import And, GreaterThanOrEqual, LessThanOrEqual
        from pyiceberg.types import LongType

        if self.table.current_snapshot() is None:
            return []
        name = self.table.properties.get(EVENT_TIME_PROPERTY, event_time)
        low: object = lo_ms
        high: object = hi_ms
        if self.table.schema().find_field(name).field_type != LongType():
            low = datetime.fromtimestamp(lo_ms / 1000, timezone.utc).isoformat()
            high = datetime.fromtimestamp((hi_ms + 1) / 1000, timezone.utc).isoformat()
        scan = self.table.scan(
            row_filter=And(GreaterThanOrEqual(term=name, value=low), LessThanOrEqual(term=name, value=high))
        )
        return [task.file.file_path for task in scan.plan_files()]


def reachable(io: FileIO, snapshots: Iterable[Snapshot]) -> set[str]:
    """Every file ``snapshots`` reference: manifest lists, manifests, and data files in any entry
    (deleted ones too: a snapshot still being read may need them). Each manifest is read once."""
    paths: set[str] = set()
    for snap in snapshots:
        paths.add(snap.manifest_list)
        for manifest in snap.manifests(io):
            if manifest.manifest_path not in paths:
                paths.add(manifest.manifest_path)
                paths.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=False))
    return paths


def schema_properties(schema: TableSchema) -> dict[str, str]:
    """What a table records of the declared schema it is written under."""
    return {
        EVENT_TIME_PROPERTY: schema.event_time,
        KEY_PROPERTY: ",".join(schema.key),
        DIGEST_PROPERTY: schema.digest,
    }


def open_target(
    catalog: Catalog,
    namespace: Sequence[str],
    name: str,
    source: str,
    schema: TableSchema,
    s3_endpoint: str | None = None,
) -> Target:
    """Load the Iceberg table, creating it (and its namespace) from ``schema`` on first use; check its
    source. The catalog's failures are CatalogErrors."""
    ident = (*namespace, name)
    from pyiceberg.exceptions import NoSuchTableError

    with iceberg_errors(f"open Iceberg table {'.'.join(ident)}", principal_of(catalog)):
        try:  # load first: pyiceberg's SQL catalog writes a new table's metadata file before it finds the name taken
            table = catalog.load_table(ident)
        except NoSuchTableError:
            if not catalog.namespace_exists(tuple(namespace)):  # a create needs a privilege a load does not
                catalog.create_namespace_if_not_exists(tuple(namespace))
            fresh = schema.iceberg_schema()
            table = catalog.create_table_if_not_exists(
                ident,
                schema=fresh,
                partition_spec=schema.partition_spec(fresh),
                sort_order=schema.sort_order(fresh),
                properties={**TABLE_PROPERTIES, **schema_properties(schema)},
            )
        if any(table.properties.get(k) != v for k, v in MANAGED_PROPERTIES.items()):
            with table.transaction() as tx:
                tx.set_properties(MANAGED_PROPERTIES)
    recorded = table.properties.get(SOURCE_PROPERTY)
    if recorded and recorded.rstrip("/") != source.rstrip("/"):
        raise CommitConflict(
            f"Iceberg table {'.'.join(ident)} is compacted from {recorded}, not {source}: "
            "choose another target table (COMPACT_TABLE)"
        )
    return _target(table, s3_endpoint)


def load_target(catalog: Catalog, namespace: Sequence[str], name: str, s3_endpoint: str | None = None) -> Target | None:
    """The Iceberg table as it is, or None when it does not exist: nothing is created or changed."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    with iceberg_errors(f"load Iceberg table {'.'.join((*namespace, name))}", principal_of(catalog)):
        try:
            return _target(catalog.load_table((*namespace, name)), s3_endpoint)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None


def _target(table: Table, s3_endpoint: str | None) -> Target:
    check_readable(table)
    storage = TableFiles.reach(table.location(), parse_vended(table.location(), table.io.properties, None), s3_endpoint)
    return Target(storage=storage, table=table)


def check_readable(table: Table) -> None:
    """For an S3 table the REST catalog loaded without storage credentials, ask for them, so that a
    principal that may see the table but not read it is refused by the catalog, in one line (403
    ``read_data``), rather than by the storage (with STS off none are vended, and none is refused)."""
    if urlparse(table.location()).scheme not in S3_SCHEMES:  # (a local table: the REST client not even imported)
        return
    from pyiceberg.catalog.rest import Endpoints, RestCatalog
    from pyiceberg.catalog.rest.response import _handle_non_200_response
    from pyiceberg.exceptions import NoSuchTableError
    from requests import HTTPError

    catalog = table.catalog
    if not isinstance(catalog, RestCatalog):
        return
    if parse_vended(table.location(), table.io.properties, None).has_keys:
        return
    url = catalog.url(Endpoints.load_credentials, prefixed=True, **catalog._split_identifier_for_path(table.name()))
    with iceberg_errors(f"read Iceberg table {'.'.join(table.name())}", principal_of(catalog)):
        try:
            catalog._session.get(url).raise_for_status()
        except HTTPError as exc:
            _handle_non_200_response(exc, {404: NoSuchTableError})


def evolved(target: Target, changes: Sequence[Change]) -> Schema:
    """The table's schema after ``changes`` (what this run writes its data files with); the table's own
    when none is applied (a transaction copies the table's metadata: ~10 ms a run for nothing)."""
    if not any(c.action == "apply" for c in changes):
        return target.table.schema()
    update = target.table.transaction().update_schema()
    evolve(update, changes)
    return update._apply()  # pyiceberg's own preview of the updates (UpdateSchema has no public one)


def data_file(uri: str, written: WrittenFile, spec_id: int) -> DataFile:
    """The Iceberg entry of a data file the engine wrote (its metadata computed as it was written)."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=uri,
        file_format=FileFormat.PARQUET,
        partition=Record(*written.partition),
        file_size_in_bytes=written.size,
        sort_order_id=None,
        spec_id=spec_id,
        equality_ids=None,
        key_metadata=None,
        **written.stats,
    )


def commit(
    target: Target,
    written: Sequence[tuple[str, WrittenFile]],
    ledger_uri: str,
    source: str,
    run_id: str,
    summary: Mapping[str, str],
    schema: TableSchema,
    changes: Sequence[Change] = (),
    written_with: Schema | None = None,
) -> int:
    """Add a snapshot with the ``written`` data files ((URI, file); none: an empty one), apply the schema
    ``changes`` and switch the ledger, in one transaction that asserts the table is still at
    ``target.snapshot_id`` (and its schema the one the files were ``written_with``); the new snapshot id."""
    props = {LEDGER_PROPERTY: ledger_uri, SOURCE_PROPERTY: source, RUN_PROPERTY: run_id, **schema_properties(schema)}
    with (
        iceberg_errors(f"commit to Iceberg table {'.'.join(target.table.name())}", principal_of(target.table.catalog)),
        target.table.transaction() as tx,
    ):
        if any(c.action == "apply" and c.op and c.op[0] != "key" for c in changes):
            with tx.update_schema() as update:
                evolve(update, changes)
        if written_with is not None and tx.table_metadata.schema().as_struct() != written_with.as_struct():
            raise CommitConflict(
                f"the schema of Iceberg table {'.'.join(target.table.name())} changed while this run wrote its files"
            )
        spec_id = tx.table_metadata.default_spec_id
        with tx.update_snapshot(snapshot_properties={**summary, **props}).fast_append() as append:
            for uri, w in written:
                append.append_data_file(data_file(uri, w, spec_id))
        tx.set_properties(props)
    snap = target.table.current_snapshot()
    assert snap is not None and _run_of(snap) == run_id
    return snap.snapshot_id


def newest_event_ms(table: Table) -> int | None:
    """The newest event time (epoch ms) visible in ``table``: the current snapshot's
    :data:`NEWEST_EVENT_PROPERTY`, else its nearest ancestor's that the metadata keeps (None: no commit
    recorded one yet)."""
    meta = table.metadata
    snap = meta.current_snapshot()
    while snap is not None:
        value = snap.summary.get(NEWEST_EVENT_PROPERTY) if snap.summary is not None else None
        if value is not None:
            return int(value)
        snap = meta.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return None


def _run_of(snap: Snapshot) -> str | None:
    """The id of the run that committed ``snap`` (None: not a compaction's)."""
    return snap.summary.get(RUN_PROPERTY) if snap.summary is not None else None
