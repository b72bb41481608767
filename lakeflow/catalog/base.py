"""The Catalog protocol and the table handle every backend returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping, Optional, Protocol, Sequence

from lakeflow.credentials import VendedConfig


class CatalogError(RuntimeError):
    """A catalog call failed; ``type`` / ``code`` / ``error_id`` carry the server's words when known."""

    def __init__(self, message: str, *, type: str = "", code: int = 0, error_id: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.type = type
        self.code = code
        self.error_id = error_id

    def __str__(self) -> str:
        parts = [" ".join(p for p in (str(self.code) if self.code else "", self.type) if p), self.message]
        text = ": ".join(p for p in parts if p)
        return f"{text} (error id {self.error_id})" if self.error_id else text


class TableNotFound(CatalogError):
    """The table does not exist (or is not visible to this principal)."""


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
    """A registered generic table: where it lives and the storage config vended for it."""

    ident: TableIdent
    location: str
    format: str = "dataset"
    properties: Mapping[str, str] = field(default_factory=dict)
    storage: Optional[VendedConfig] = None
    created: bool = False  # True when this call registered it

    @property
    def expires_at(self) -> Optional[datetime]:
        return self.storage.expires_at if self.storage else None


class Catalog(Protocol):
    """What the jobs need of a catalog of generic tables. Two backends: Lakekeeper and local."""

    name: str  # "lakekeeper" or "local", also the lineage namespace's scheme

    def register(self, namespace: Sequence[str], table: str, *, location: Optional[str] = None,
                 properties: Optional[Mapping[str, str]] = None,
                 doc: Optional[str] = None) -> TableHandle:
        """Create the table (format ``dataset``); an existing table is loaded instead."""
        ...

    def load(self, namespace: Sequence[str], table: str, *, vended: bool = True) -> TableHandle:
        """The table, with vended storage credentials when ``vended``."""
        ...

    def credentials(self, namespace: Sequence[str], table: str) -> VendedConfig:
        """Fresh storage credentials for the table (the cheap refresh)."""
        ...

    def list_tables(self, namespace: Sequence[str]) -> list[TableIdent]:
        """Every generic table in the namespace."""
        ...

    def drop(self, namespace: Sequence[str], table: str, *, purge: bool = False) -> None:
        """Unregister the table; its data is deleted only when ``purge``."""
        ...
