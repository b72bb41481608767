"""The raw generic table: loaded from the catalog (Lakekeeper with vended credentials, or local)."""

from __future__ import annotations

from dataclasses import dataclass

from lakeflow.catalog import TableHandle, open_catalog
from lakeflow.compaction.files import TableFiles
from lakeflow.settings import Settings
from lakeflow.streams import Stream


@dataclass(frozen=True)
class RawTable(TableFiles):
    """The raw table's files (listing, bookkeeping, quarantine; the engines' input) and its catalog entry."""

    handle: TableHandle


def raw_table(handle: TableHandle, s3_endpoint: str | None = None) -> RawTable:
    """Storage access for a loaded table from its vended config (``s3_endpoint`` overrides the vended one)."""
    return RawTable(storage=TableFiles.reach(handle.location, handle.storage, s3_endpoint), handle=handle)


def open_raw(settings: Settings, stream: Stream) -> RawTable:
    """Load ``stream``'s raw table from the configured catalog."""
    with open_catalog(settings) as catalog:
        handle = catalog.load(stream.namespace, stream.table, vended=True)
    return raw_table(handle, settings.s3_endpoint)
