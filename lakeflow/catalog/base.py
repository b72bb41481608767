"""The Catalog every backend implements, and the table handle each returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Self

from lakeflow.catalog.errors import CatalogError, TableNotFound
from lakeflow.credentials import S3ASettings, VendedConfig, to_s3a


@dataclass(frozen=True)
class TableIdent:
    """A table's identity: (warehouse, namespace levels, name)."""

    warehouse: str
    namespace: tuple[str, ...]
    name: str

    def __str__(self) -> str:
        return ".".join((*self.namespace, self.name))


@dataclass(frozen=True)
class TableHandle:
    """A registered generic table: where it lives and the storage config vended for it (no keys
    when none were vended: client-managed loads, STS off, local tables)."""

    ident: TableIdent
    location: str
    storage: VendedConfig
    format: str = "dataset"
    properties: Mapping[str, str] = field(default_factory=dict)
    created: bool = False  # True when this call registered it

    @property
    def expires_at(self) -> datetime | None:
        return self.storage.expires_at

    def s3a(self, endpoint_override: str | None = None) -> S3ASettings:
        """The vended storage config as Hadoop S3A settings (``endpoint_override``: S3_ENDPOINT)."""
        return to_s3a(self.storage, endpoint_override)


class Catalog(ABC):
    """What the jobs need of a catalog of generic tables. Two backends: Lakekeeper and local.

    A context manager: ``with open_catalog(settings) as catalog: …`` closes it (its HTTP session).
    """

    name: str  # "lakekeeper" or "local", also the lineage namespace's scheme

    @property
    @abstractmethod
    def warehouse_id(self) -> str:
        """The warehouse tables' idents carry (Lakekeeper's warehouse UUID; ``local``)."""

    @abstractmethod
    def register(
        self,
        namespace: Sequence[str],
        table: str,
        *,
        location: str | None = None,
        properties: Mapping[str, str] | None = None,
        doc: str | None = None,
    ) -> TableHandle:
        """Create the table (format ``dataset``); an existing table is loaded instead."""

    @abstractmethod
    def load(self, namespace: Sequence[str], table: str, *, vended: bool = True) -> TableHandle:
        """The table, with vended storage credentials when ``vended``."""

    @abstractmethod
    def credentials(self, namespace: Sequence[str], table: str) -> VendedConfig:
        """Fresh storage credentials for the table (the cheap refresh)."""

    @abstractmethod
    def list_tables(self, namespace: Sequence[str]) -> list[TableIdent]:
        """Every generic table in the namespace."""

    @abstractmethod
    def drop(self, namespace: Sequence[str], table: str, *, purge: bool = False) -> None:
        """Unregister the table; its data is deleted only when ``purge``."""

    def close(self) -> None:  # noqa: B027 (a hook: a catalog holding nothing needs no close)
        """Release what the catalog holds (connections); nothing by default."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


__all__ = ["Catalog", "CatalogError", "TableHandle", "TableIdent", "TableNotFound"]
