"""Lakekeeper's generic-table REST API (``/lakekeeper/v1``) as a :class:`~lakeflow.catalog.base.Catalog`.

Wire facts (``docs/lakekeeper.md``): the warehouse UUID is the URL prefix (a name is resolved
through ``GET /catalog/v1/config``); namespace levels are joined by U+001F and percent-encoded;
vended credentials are asked for with ``X-Iceberg-Access-Delegation``; drop purges data unless
``purgeRequested=false``; mutations carry an ``Idempotency-Key`` so that retries replay.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from dataclasses import replace
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar
from urllib.parse import quote

import requests

from lakeflow.auth import AuthError, BearerAuth, TokenProvider, token_provider
from lakeflow.catalog.base import CatalogError, TableHandle, TableIdent, TableNotFound
from lakeflow.catalog.locations import OBJECT_STORE_SCHEMES, check_location
from lakeflow.credentials import VendedConfig, parse_vended
from lakeflow.http import HttpOptions, new_session
from lakeflow.settings import Settings, SettingsError, is_uuid

log = logging.getLogger(__name__)

DELEGATION_HEADER = "X-Iceberg-Access-Delegation"
NAMESPACE_SEPARATOR = "\x1f"
FORMAT = "dataset"
# Lakekeeper's storage profiles (S3, GCS, ADLS); lakeflow's engines use the S3 ones.
SERVED_SCHEMES = (*OBJECT_STORE_SCHEMES, "gs", "abfss")
_ERROR_ID = re.compile(r"Error ID:\s*(\S+)")
T = TypeVar("T")


class LakekeeperCatalog:
    """Generic tables in one Lakekeeper warehouse. Thread-safe (one requests session)."""

    name = "lakekeeper"

    def __init__(self, url: str, warehouse: str, *, auth: Optional[TokenProvider] = None,
                 options: HttpOptions = HttpOptions(), project_id: Optional[str] = None) -> None:
        """``warehouse`` is the warehouse UUID or its name (resolved on first use)."""
        self.url = url.rstrip("/")
        self.warehouse = warehouse
        self.auth = auth
        self.project_id = project_id
        self._options = options
        self._session = new_session(options, BearerAuth(auth) if auth else None)
        self._warehouse_id: Optional[str] = warehouse if is_uuid(warehouse) else None
        self._resolve_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> "LakekeeperCatalog":
        """The catalog LAKEKEEPER / WAREHOUSE_ID / TOKEN or OAUTH_* / PROJECT_ID / HTTP_* describe."""
        if not settings.warehouse:
            raise SettingsError("WAREHOUSE_ID is missing: expected the warehouse UUID (or its name)")
        options = HttpOptions(timeout=settings.http_timeout_s, max_retries=settings.http_max_retries)
        return cls(settings.lakekeeper, settings.warehouse, auth=token_provider(settings, options),
                   options=options, project_id=settings.project_id)

    def __repr__(self) -> str:
        return f"LakekeeperCatalog(url={self.url!r}, warehouse={self.warehouse!r}, auth={self.auth!r})"

    def close(self) -> None:
        self._session.close()

    # -- the Catalog protocol ----------------------------------------------------------------

    @property
    def warehouse_id(self) -> str:
        """The warehouse UUID (the URL prefix), resolving a warehouse name once."""
        if self._warehouse_id is None:
            with self._resolve_lock:
                if self._warehouse_id is None:
                    self._warehouse_id = self._resolve_warehouse(self.warehouse)
        return self._warehouse_id

    def register(self, namespace: Sequence[str], table: str, *, location: Optional[str] = None,
                 properties: Optional[Mapping[str, str]] = None,
                 doc: Optional[str] = None) -> TableHandle:
        """Create the table (format ``dataset``) or, when it exists already, load it.

        Only ``GenericTableAlreadyExists`` means "already registered"; ``LocationAlreadyTaken``
        and every other error is raised.
        """
        what = f"register {_dotted(namespace, table)}"
        body: dict[str, Any] = {"name": table, "format": FORMAT}
        if location:
            body["base-location"] = check_location(location, OBJECT_STORE_SCHEMES, what=f"{what}: location")
        if properties:
            body["properties"] = dict(properties)
        if doc:
            body["doc"] = doc
        try:
            self._call("POST", self._namespace_path(namespace) + "/generic-tables", what=what,
                       json=body, idempotent=True)
        except CatalogError as exc:
            if exc.type != "GenericTableAlreadyExists":
                raise
            return self._existing(namespace, table, location, exc)
        log.debug("registered %s in warehouse %s", _dotted(namespace, table), self.warehouse)
        return replace(self.load(namespace, table), created=True)

    def load(self, namespace: Sequence[str], table: str, *, vended: bool = True) -> TableHandle:
        """The table; with vended storage credentials unless ``vended`` is False (client-managed)."""
        response = self._call("GET", self._table_path(namespace, table),
                              what=f"load {_dotted(namespace, table)}",
                              headers={DELEGATION_HEADER: "vended-credentials" if vended else "client-managed"})
        return self._decode(response, f"load {_dotted(namespace, table)}",
                            lambda body: self._handle(namespace, body))

    def credentials(self, namespace: Sequence[str], table: str) -> VendedConfig:
        """Fresh storage credentials (``…/credentials``, cheaper than a load)."""
        what = f"credentials for {_dotted(namespace, table)}"
        response = self._call("GET", self._table_path(namespace, table) + "/credentials", what=what)

        def parse(body: Mapping[str, Any]) -> VendedConfig:
            entries = body["storage-credentials"]
            return parse_vended(str(entries[0]["prefix"]) if entries else "", None, entries)

        return self._decode(response, what, parse)

    def list_tables(self, namespace: Sequence[str]) -> list[TableIdent]:
        """Every generic table in the namespace, following ``next-page-token`` until it is absent."""
        what = f"list {'.'.join(namespace)}"
        path = self._namespace_path(namespace) + "/generic-tables"
        tables: list[TableIdent] = []
        token: Optional[str] = None
        seen: set[str] = set()
        while True:
            response = self._call("GET", path, what=what, params={"pageToken": token} if token else None)
            page = self._decode(response, what, lambda body: (
                [TableIdent(self.warehouse_id, tuple(i["namespace"]), str(i["name"]))
                 for i in body["identifiers"]], body.get("next-page-token")))
            tables += page[0]
            token = page[1]
            if not token:
                return tables
            if token in seen:
                raise CatalogError(f"{what}: the server repeated page token {token!r}")
            seen.add(token)

    def drop(self, namespace: Sequence[str], table: str, *, purge: bool = False) -> None:
        """Unregister the table; its data is deleted only when ``purge`` (the server's default is to purge)."""
        self._call("DELETE", self._table_path(namespace, table),
                   what=f"drop {_dotted(namespace, table)}",
                   params={"purgeRequested": "true" if purge else "false"},
                   idempotent=True, expect=204)

    def rename(self, namespace: Sequence[str], table: str,
               new_namespace: Sequence[str], new_table: str) -> None:
        """Rename (or move) a table; its location stays where it is."""
        self._call("POST", f"{self._prefix_path()}/generic-tables/rename",
                   what=f"rename {_dotted(namespace, table)} to {_dotted(new_namespace, new_table)}",
                   json={"source": {"namespace": list(namespace), "name": table},
                         "destination": {"namespace": list(new_namespace), "name": new_table}},
                   idempotent=True, expect=204)

    # -- internals -----------------------------------------------------------------------------

    def _resolve_warehouse(self, name: str) -> str:
        what = f"resolve warehouse {name!r}"
        response = self._call("GET", "/catalog/v1/config", what=what, params={"warehouse": name})

        def parse(body: Mapping[str, Any]) -> str:
            prefix = (body.get("overrides") or {}).get("prefix") or body["defaults"]["prefix"]
            return str(prefix)

        warehouse_id = self._decode(response, what, parse)
        log.debug("warehouse %r is %s", name, warehouse_id)
        return warehouse_id

    def _existing(self, namespace: Sequence[str], table: str, location: Optional[str],
                  conflict: CatalogError) -> TableHandle:
        """The table a create found already there, if it is a generic table where we want it."""
        try:
            handle = self.load(namespace, table)
        except TableNotFound:
            raise CatalogError(f"register {_dotted(namespace, table)}: the name is taken by an "
                               "Iceberg table or view", type=conflict.type, code=conflict.code,
                               error_id=conflict.error_id) from None
        if location and handle.location.rstrip("/") != location.rstrip("/"):
            raise CatalogError(f"register {_dotted(namespace, table)}: already registered at "
                               f"{handle.location}, not at {location}", type=conflict.type,
                               code=conflict.code, error_id=conflict.error_id)
        log.debug("%s is already registered", _dotted(namespace, table))
        return handle

    def _handle(self, namespace: Sequence[str], body: Mapping[str, Any]) -> TableHandle:
        table = body["table"]
        answered = f"Lakekeeper's location for {_dotted(namespace, str(table['name']))}"
        location = check_location(str(table["base-location"]), SERVED_SCHEMES, what=answered)
        return TableHandle(
            ident=TableIdent(self.warehouse_id, tuple(namespace), str(table["name"])),
            location=location,
            format=str(table["format"]),
            properties={str(k): str(v) for k, v in (table.get("properties") or {}).items()},
            storage=parse_vended(location, body.get("config"), body.get("storage-credentials")),
        )

    def _prefix_path(self) -> str:
        return f"/lakekeeper/v1/{quote(self.warehouse_id, safe='')}"

    def _namespace_path(self, namespace: Sequence[str]) -> str:
        return f"{self._prefix_path()}/namespaces/{encode_namespace(namespace)}"

    def _table_path(self, namespace: Sequence[str], table: str) -> str:
        if table in ("", ".", ".."):
            raise CatalogError(f"table name {table!r}: expected a name (not empty, '.' or '..')",
                               type="InvalidName", code=400)
        return f"{self._namespace_path(namespace)}/generic-tables/{quote(table, safe='')}"

    def _call(self, method: str, path: str, *, what: str, params: Optional[Mapping[str, str]] = None,
              json: Optional[Mapping[str, Any]] = None, headers: Optional[Mapping[str, str]] = None,
              idempotent: bool = False, expect: int = 200) -> requests.Response:
        """Send one request (retried by the session); a non-``expect`` answer raises CatalogError.

        A 409 ``RequestInProgress`` (an earlier attempt of this call still running on the server)
        is waited out and re-sent with the same key, which then replays that attempt's result.
        """
        sent = dict(headers or {})
        if self.project_id:
            sent["x-project-id"] = self.project_id
        if idempotent:
            sent["Idempotency-Key"] = str(uuid.uuid4())  # one key for all retries of this call
        attempt = 0
        while True:
            try:
                response = self._session.request(method, self.url + path, params=params, json=json,
                                                 headers=sent)
            except AuthError as exc:
                raise CatalogError(f"{what}: {exc}", type="AuthenticationFailed") from None
            except requests.RequestException as exc:
                raise CatalogError(f"{what}: Lakekeeper at {self.url} did not answer: {_reason(exc)}",
                                   type=type(exc).__name__) from None
            log.debug("%s %s -> %s", method, path, response.status_code)
            if response.status_code == expect:
                return response
            error = error_from(what, response)
            if error.type != "RequestInProgress" or attempt == self._options.max_retries:
                raise error
            time.sleep(self._options.backoff * 2 ** attempt)
            attempt += 1

    @staticmethod
    def _decode(response: requests.Response, what: str, parse: Callable[[Any], T]) -> T:
        try:
            return parse(response.json())
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise CatalogError(f"{what}: unexpected answer from Lakekeeper "
                               f"({type(exc).__name__}: {exc})", code=response.status_code) from None


def encode_namespace(namespace: Sequence[str]) -> str:
    """The namespace path segment: levels joined by U+001F, percent-encoded (spaces as ``%20``)."""
    levels = list(namespace)
    for level in levels:
        if not level or any(c in level for c in ".+" + NAMESPACE_SEPARATOR):
            raise CatalogError(f"namespace level {level!r}: expected a non-empty name without "
                               "'.', '+' or U+001F", type="InvalidNamespace", code=400)
    if not levels:
        raise CatalogError("namespace is empty: expected at least one level",
                           type="InvalidNamespace", code=400)
    return quote(NAMESPACE_SEPARATOR.join(levels), safe="")


def error_from(what: str, response: requests.Response) -> CatalogError:
    """A CatalogError from a Lakekeeper error answer: JSON ``{"error": …}`` or plain text."""
    try:
        error = response.json()["error"]
        message, kind = str(error["message"]), str(error.get("type") or "")
        code = int(error.get("code") or response.status_code)
        stack = [str(s) for s in error.get("stack") or ()]
    except (ValueError, KeyError, TypeError, AttributeError):
        text = " ".join(response.text.split())[:500] or response.reason or "no details"
        return CatalogError(f"{what}: {text}", code=response.status_code)
    error_id = next((m.group(1) for s in stack if (m := _ERROR_ID.search(s))), "")
    cls = TableNotFound if kind == "NoSuchGenericTableException" else CatalogError
    return cls(f"{what}: {message}", type=kind, code=code, error_id=error_id)


def _reason(exc: requests.RequestException) -> str:
    """The cause of a requests failure (urllib3's reason, e.g. "… Connection refused")."""
    cause = exc.args[0] if exc.args else exc
    return str(getattr(cause, "reason", None) or cause)


def _dotted(namespace: Sequence[str], table: str) -> str:
    return ".".join((*namespace, table))
