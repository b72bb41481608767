"""Catalogs of generic tables: one protocol (``Catalog``), two backends (Lakekeeper, local)."""

from __future__ import annotations

from lakeflow.catalog.base import Catalog, CatalogError, TableHandle, TableIdent, TableNotFound
from lakeflow.settings import Settings


def open_catalog(settings: Settings) -> Catalog:
    """The catalog the settings name: Lakekeeper when configured, else the embedded local one."""
    if settings.catalog == "lakekeeper":
        from lakeflow.catalog.lakekeeper import LakekeeperCatalog

        return LakekeeperCatalog.from_settings(settings)
    from lakeflow.catalog.local import LocalCatalog

    return LocalCatalog(settings.home)


__all__ = ["Catalog", "CatalogError", "TableHandle", "TableIdent", "TableNotFound", "open_catalog"]
