"""The embedded default catalog: a JSON registry beside a ``file://`` warehouse, no service needed."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from lakeflow.catalog.base import Catalog, TableHandle, TableIdent
from lakeflow.catalog.errors import CatalogError, TableNotFound
from lakeflow.catalog.locations import check_location, local_path
from lakeflow.credentials import VendedConfig

_LEVEL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$")
LOCAL_WAREHOUSE = "local"


class LocalCatalog(Catalog):
    """Generic tables registered in ``<home>/catalog.json``, stored under ``<home>/warehouse``."""

    name = "local"

    def __init__(self, home: Path) -> None:
        self.home = Path(home).resolve()
        self.warehouse_dir = self.home / "warehouse"
        self._registry = self.home / "catalog.json"

    @property
    def warehouse_id(self) -> str:
        return LOCAL_WAREHOUSE

    def register(
        self,
        namespace: Sequence[str],
        table: str,
        *,
        location: str | None = None,
        properties: Mapping[str, str] | None = None,
        doc: str | None = None,
    ) -> TableHandle:
        key = self._key(namespace, table)
        with self._locked() as tables:
            if key in tables:
                return self._handle(namespace, table, tables[key], created=False)
            loc = self._location(namespace, table, location)
            taken = [k for k, t in tables.items() if _overlaps(t["base-location"], loc)]
            if taken:
                raise CatalogError(f"location {loc} overlaps table {taken[0]}", type="LocationAlreadyTaken", code=409)
            entry = {
                "id": str(uuid.uuid4()),
                "format": "dataset",
                "base-location": loc,
                "properties": dict(properties or {}),
                "doc": doc,
            }
            tables[key] = entry
        local_path(loc).mkdir(parents=True, exist_ok=True)
        return self._handle(namespace, table, entry, created=True)

    def load(self, namespace: Sequence[str], table: str, *, vended: bool = True) -> TableHandle:
        with self._locked() as tables:
            entry = tables.get(self._key(namespace, table))
        if entry is None:
            raise TableNotFound(
                f"table {'.'.join((*namespace, table))} does not exist", type="NoSuchGenericTableException", code=404
            )
        return self._handle(namespace, table, entry, created=False)

    def credentials(self, namespace: Sequence[str], table: str) -> VendedConfig:
        return self.load(namespace, table).storage

    def list_tables(self, namespace: Sequence[str]) -> list[TableIdent]:
        prefix = ".".join(namespace) + "\x00"
        with self._locked() as tables:
            names = sorted(k[len(prefix) :] for k in tables if k.startswith(prefix))
        return [TableIdent(LOCAL_WAREHOUSE, tuple(namespace), n) for n in names]

    def drop(self, namespace: Sequence[str], table: str, *, purge: bool = False) -> None:
        with self._locked() as tables:
            entry = tables.pop(self._key(namespace, table), None)
        if entry is None:
            raise TableNotFound(
                f"table {'.'.join((*namespace, table))} does not exist", type="NoSuchGenericTableException", code=404
            )
        if purge:
            shutil.rmtree(local_path(entry["base-location"]), ignore_errors=True)

    # -- internals -------------------------------------------------------------------------

    def _key(self, namespace: Sequence[str], table: str) -> str:
        for part in (*namespace, table):
            if not _LEVEL.match(part):
                raise CatalogError(
                    f"invalid name {part!r}: expected letters, digits, '_' or '-'", type="InvalidName", code=400
                )
        return ".".join(namespace) + "\x00" + table

    def _location(self, namespace: Sequence[str], table: str, location: str | None) -> str:
        root = self.warehouse_dir.resolve()
        if location is None:
            path = root.joinpath(*namespace, table)
        else:
            try:
                path = local_path(check_location(location, ("file",)))
            except CatalogError as exc:
                raise CatalogError(
                    f"{exc.message}; expected a file:// URI under {root.as_uri()}", type=exc.type, code=exc.code
                ) from None
        path = path.resolve()  # symlinks followed: a link out of the warehouse is outside too
        if root != path and root not in path.parents:
            raise CatalogError(
                f"location {path.as_uri()} lies outside the warehouse {root.as_uri()}", type="InvalidLocation", code=400
            )
        return path.as_uri()

    def _handle(self, namespace: Sequence[str], table: str, entry: dict, *, created: bool) -> TableHandle:
        return TableHandle(
            ident=TableIdent(LOCAL_WAREHOUSE, tuple(namespace), table),
            location=entry["base-location"],
            format=entry.get("format", "dataset"),
            properties=dict(entry.get("properties") or {}),
            storage=VendedConfig(location=entry["base-location"]),
            created=created,
        )

    @contextmanager
    def _locked(self) -> Iterator[dict]:
        """The registry, read and (if changed) rewritten atomically under an exclusive lock."""
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / ".catalog.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            tables = json.loads(self._registry.read_text()) if self._registry.exists() else {}
            before = json.dumps(tables, sort_keys=True)
            yield tables
            if json.dumps(tables, sort_keys=True) != before:
                tmp = self._registry.with_suffix(".tmp")
                tmp.write_text(json.dumps(tables, sort_keys=True, indent=1))
                os.replace(tmp, self._registry)


def _overlaps(a: str, b: str) -> bool:
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)
