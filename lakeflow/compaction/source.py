"""The raw generic table: loaded from the catalog (Lakekeeper with vended credentials, or local)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlparse

from lakeflow.catalog import TableHandle, open_catalog
from lakeflow.compaction.storage import Storage
from lakeflow.credentials import S3ASettings, VendedConfig, to_s3a
from lakeflow.settings import Settings


@dataclass(frozen=True)
class RawTable:
    handle: TableHandle
    storage: Storage                 # driver-side access (listing, bookkeeping, quarantine)
    s3a: Optional[S3ASettings]       # Spark-side access; None for local tables

    @property
    def location(self) -> str:
        return self.storage.location


def raw_table(handle: TableHandle, s3_endpoint: Optional[str] = None) -> RawTable:
    """Storage access for a loaded table from its vended config (``s3_endpoint`` overrides the vended one)."""
    vended = handle.storage or VendedConfig(location=handle.location)
    props = vended.merged()
    if s3_endpoint:
        props["s3.endpoint"] = s3_endpoint
    remote = urlparse(handle.location).scheme not in ("", "file")
    return RawTable(handle=handle, storage=Storage(handle.location, props),
                    s3a=to_s3a(vended, s3_endpoint) if remote else None)


def open_raw(settings: Settings) -> RawTable:
    """Load the raw table NAMESPACE.TABLE from the configured catalog."""
    handle = open_catalog(settings).load(settings.namespace, settings.table, vended=True)
    return raw_table(handle, settings.s3_endpoint)
