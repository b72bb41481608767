"""Lakekeeper's generic-table REST API (``/lakekeeper/v1``) as a :class:`~lakeflow.catalog.base.Catalog`.

Wire facts (``docs/lakekeeper.md``): the warehouse UUID is the URL prefix (a name is resolved
through ``GET /catalog/v1/config``); namespace levels are joined by U+001F and percent-encoded;
vended credentials are asked for with ``X-Iceberg-Access-Delegation``; drop purges data unless
``purgeRequested=false``; mutations carry an ``Idempotency-Key`` so that retries replay. Payloads
are the typed models of :mod:`lakeflow.catalog.wire`; answers are read within
``HttpOptions.deadline`` and :data:`MAX_ANSWER_BYTES` (:func:`lakeflow.http.read_body`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TypeVar
from urllib.parse import quote

import requests
from pydantic import ValidationError

from lakeflow.auth import AuthError, BearerAuth, TokenProvider, principal_name, token_provider
from lakeflow.catalog.base import Catalog, TableHandle, TableIdent
from lakeflow.catalog.errors import CatalogError, TableNotFound, catalog_error, error_from, unanswered
from lakeflow.catalog.locations import check_location
from lakeflow.catalog.wire import (
    CatalogConfig,
    CreateGenericTableRequest,
    GetWarehouseResponse,
    ListGenericTablesResponse,
    LoadGenericTableCredentialsResponse,
    LoadGenericTableResponse,
    Payload,
    RenameGenericTableRequest,
    RenameGenericTableTarget,
    StorageCredential,
)
from lakeflow.credentials import VendedConfig, parse_vended
from lakeflow.http import HttpOptions, new_session, read_body
from lakeflow.settings import Settings, SettingsError, is_uuid
from lakeflow.uris import S3_SCHEMES

log = logging.getLogger(__name__)

DELEGATION_HEADER = "X-Iceberg-Access-Delegation"
NAMESPACE_SEPARATOR = "\x1f"
FORMAT = "dataset"
# Lakekeeper's storage profiles (S3, GCS, ADLS); lakeflow's engines use the S3 ones.
SERVED_SCHEMES = (*S3_SCHEMES, "gs", "abfss")
MAX_ANSWER_BYTES = 8 * 1024 * 1024  # a page of 100 identifiers or a load answer is a few KiB
MAX_ERROR_BYTES = 64 * 1024  # an error answer: its start is enough for the message
M = TypeVar("M", bound=Payload)


class LakekeeperCatalog(Catalog):
    """Generic tables in one Lakekeeper warehouse. Thread-safe (one requests session)."""

    name = "lakekeeper"

    def __init__(
        self,
        url: str,
        warehouse: str,
        *,
        auth: TokenProvider | None = None,
        options: HttpOptions = HttpOptions(),
        project_id: str | None = None,
        principal: str = "",
    ) -> None:
        """``warehouse`` is the warehouse UUID or its name (resolved on first use); ``principal`` names
        who the token stands for in refusals (:func:`~lakeflow.auth.principal_name`)."""
        self.url = url.rstrip("/")
        self.warehouse = warehouse
        self.auth = auth
        self.project_id = project_id
        self.principal = principal
        self._options = options
        self._session = new_session(options, BearerAuth(auth) if auth else None)
        self._warehouse_id: str | None = warehouse if is_uuid(warehouse) else None
        self._resolve_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> LakekeeperCatalog:
        """The catalog LAKEKEEPER / WAREHOUSE_ID / TOKEN or OAUTH_* / PROJECT_ID / HTTP_* describe."""
        if not settings.warehouse:
            raise SettingsError("WAREHOUSE_ID is missing: expected the warehouse UUID (or its name)")
        options = HttpOptions(timeout=settings.http_timeout_s, max_retries=settings.http_max_retries)
        return cls(
            settings.lakekeeper,
            settings.warehouse,
            auth=token_provider(settings, options),
            options=options,
            project_id=settings.project_id,
            principal=principal_name(settings),
        )

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

    def iceberg_warehouse(self) -> str:
        """The ``warehouse`` of Lakekeeper's Iceberg REST catalog (``/catalog/v1/config``), which
        names a warehouse by name only (``<name>`` or ``<project-id>/<name>``): a configured name as
        it is, a UUID looked up in the management API (``GET /management/v1/warehouse/{id}``)."""
        if not is_uuid(self.warehouse):
            return self.warehouse
        what = f"look up the name of warehouse {self.warehouse}"
        path = f"/management/v1/warehouse/{quote(self.warehouse, safe='')}"
        found = _parse(GetWarehouseResponse, self._call("GET", path, what=what), what)
        return f"{found.project_id}/{found.name}" if found.project_id else found.name

    def register(
        self,
        namespace: Sequence[str],
        table: str,
        *,
        location: str | None = None,
        properties: Mapping[str, str] | None = None,
        doc: str | None = None,
    ) -> TableHandle:
        """Load the table; create it (format ``dataset``) when it does not exist yet. Loading first, a
        principal that may write an existing table needs no privilege to create one.

        Only ``GenericTableAlreadyExists`` (another registered it meanwhile) means "already registered";
        ``LocationAlreadyTaken`` and every other error is raised.
        """
        what = f"register {_dotted(namespace, table)}"
        try:
            return self._found(namespace, table, location, self.load(namespace, table))
        except TableNotFound:
            pass
        body = CreateGenericTableRequest(
            name=table,
            format=FORMAT,
            doc=doc or None,
            properties=dict(properties) if properties else None,
            base_location=check_location(location, S3_SCHEMES, what=f"{what}: location") if location else None,
        )
        try:
            self._call(
                "POST", self._namespace_path(namespace) + "/generic-tables", what=what, body=body, idempotent=True
            )
        except CatalogError as exc:
            if exc.type != "GenericTableAlreadyExists":
                raise
            return self._existing(namespace, table, location, exc)
        log.debug("registered %s in warehouse %s", _dotted(namespace, table), self.warehouse)
        return replace(self.load(namespace, table), created=True)

    def load(self, namespace: Sequence[str], table: str, *, vended: bool = True) -> TableHandle:
        """The table; with vended storage credentials unless ``vended`` is False (client-managed)."""
        what = f"load {_dotted(namespace, table)}"
        answer = self._call(
            "GET",
            self._table_path(namespace, table),
            what=what,
            headers={DELEGATION_HEADER: "vended-credentials" if vended else "client-managed"},
        )
        return self._handle(namespace, _parse(LoadGenericTableResponse, answer, what))

    def credentials(self, namespace: Sequence[str], table: str) -> VendedConfig:
        """Fresh storage credentials (``…/credentials``, cheaper than a load)."""
        what = f"credentials for {_dotted(namespace, table)}"
        answer = self._call("GET", self._table_path(namespace, table) + "/credentials", what=what)
        entries = _parse(LoadGenericTableCredentialsResponse, answer, what).storage_credentials
        return _vended(entries[0].prefix if entries else "", None, entries)

    def list_tables(self, namespace: Sequence[str]) -> list[TableIdent]:
        """Every generic table in the namespace, following ``next-page-token`` until it is absent."""
        what = f"list {'.'.join(namespace)}"
        path = self._namespace_path(namespace) + "/generic-tables"
        tables: list[TableIdent] = []
        token: str | None = None
        seen: set[str] = set()
        while True:
            answer = self._call("GET", path, what=what, params={"pageToken": token} if token else None)
            page = _parse(ListGenericTablesResponse, answer, what)
            tables += [TableIdent(self.warehouse_id, tuple(i.namespace), i.name) for i in page.identifiers]
            token = page.next_page_token
            if not token:
                return tables
            if token in seen:
                raise CatalogError(f"{what}: the server repeated page token {token!r}")
            seen.add(token)

    def drop(self, namespace: Sequence[str], table: str, *, purge: bool = False) -> None:
        """Unregister the table; its data is deleted only when ``purge`` (the server's default is to purge)."""
        self._call(
            "DELETE",
            self._table_path(namespace, table),
            what=f"drop {_dotted(namespace, table)}",
            params={"purgeRequested": "true" if purge else "false"},
            idempotent=True,
            expect=204,
        )

    def rename(self, namespace: Sequence[str], table: str, new_namespace: Sequence[str], new_table: str) -> None:
        """Rename (or move) a table; its location stays where it is."""
        body = RenameGenericTableRequest(
            source=RenameGenericTableTarget(namespace=list(namespace), name=table),
            destination=RenameGenericTableTarget(namespace=list(new_namespace), name=new_table),
        )
        self._call(
            "POST",
            f"{self._prefix_path()}/generic-tables/rename",
            what=f"rename {_dotted(namespace, table)} to {_dotted(new_namespace, new_table)}",
            body=body,
            idempotent=True,
            expect=204,
        )

    # -- internals -----------------------------------------------------------------------------

    def _resolve_warehouse(self, name: str) -> str:
        what = f"resolve warehouse {name!r}"
        answer = self._call("GET", "/catalog/v1/config", what=what, params={"warehouse": name})
        config = _parse(CatalogConfig, answer, what)
        try:
            warehouse_id = config.prefix
        except ValueError as exc:
            raise CatalogError(f"{what}: unexpected answer from Lakekeeper ({exc})") from None
        log.debug("warehouse %r is %s", name, warehouse_id)
        return warehouse_id

    def _existing(
        self, namespace: Sequence[str], table: str, location: str | None, conflict: CatalogError
    ) -> TableHandle:
        """The table a create found already there, if it is a generic table where we want it."""
        try:
            handle = self.load(namespace, table)
        except TableNotFound:
            raise CatalogError(
                f"register {_dotted(namespace, table)}: the name is taken by an Iceberg table or view",
                type=conflict.type,
                code=conflict.code,
                error_id=conflict.error_id,
            ) from None
        return self._found(namespace, table, location, handle, conflict)

    def _found(
        self,
        namespace: Sequence[str],
        table: str,
        location: str | None,
        handle: TableHandle,
        conflict: CatalogError | None = None,
    ) -> TableHandle:
        """``handle``, the registered table, if it is where we want it."""
        if location and handle.location.rstrip("/") != location.rstrip("/"):
            raise CatalogError(
                f"register {_dotted(namespace, table)}: already registered at {handle.location}, not at {location}",
                type=conflict.type if conflict else "",
                code=conflict.code if conflict else 0,
                error_id=conflict.error_id if conflict else "",
            )
        log.debug("%s is already registered", _dotted(namespace, table))
        return handle

    def _handle(self, namespace: Sequence[str], answer: LoadGenericTableResponse) -> TableHandle:
        table = answer.table
        answered = f"Lakekeeper's location for {_dotted(namespace, table.name)}"
        location = check_location(table.base_location, SERVED_SCHEMES, what=answered)
        return TableHandle(
            ident=TableIdent(self.warehouse_id, tuple(namespace), table.name),
            location=location,
            format=table.format,
            properties=dict(table.properties or {}),
            storage=_vended(location, answer.config, answer.storage_credentials),
        )

    def _prefix_path(self) -> str:
        return f"/lakekeeper/v1/{quote(self.warehouse_id, safe='')}"

    def _namespace_path(self, namespace: Sequence[str]) -> str:
        return f"{self._prefix_path()}/namespaces/{encode_namespace(namespace)}"

    def _table_path(self, namespace: Sequence[str], table: str) -> str:
        if table in ("", ".", ".."):
            raise CatalogError(
                f"table name {table!r}: expected a name (not empty, '.' or '..')", type="InvalidName", code=400
            )
        return f"{self._namespace_path(namespace)}/generic-tables/{quote(table, safe='')}"

    def _call(
        self,
        method: str,
        path: str,
        *,
        what: str,
        params: Mapping[str, str] | None = None,
        body: Payload | None = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool = False,
        expect: int = 200,
    ) -> bytes:
        """Send one request (retried by the session); the answer's body when it is ``expect``, read
        within the deadline and size cap. Any other answer raises its :class:`CatalogError`.

        A 409 ``RequestInProgress`` (an earlier attempt of this call still running on the server)
        is waited out and re-sent with the same key, which then replays that attempt's result.
        """
        sent = dict(headers or {})
        if self.project_id:
            sent["x-project-id"] = self.project_id
        if idempotent:
            sent["Idempotency-Key"] = str(uuid.uuid4())  # one key for all retries of this call
        json = body.wire() if body is not None else None
        server = f"Lakekeeper at {self.url}"
        attempt = 0
        while True:
            try:
                response = self._session.request(
                    method, self.url + path, params=params, json=json, headers=sent, stream=True
                )
                log.debug("%s %s -> %s", method, path, response.status_code)
                deadline = time.monotonic() + self._options.deadline
                ok = response.status_code == expect
                answer = read_body(response, deadline, MAX_ANSWER_BYTES if ok else MAX_ERROR_BYTES, cut=not ok)
            except AuthError as exc:
                raise catalog_error(what, str(exc), type="AuthenticationFailed") from None
            except requests.RequestException as exc:  # refused, reset, timed out; AnswerRefused
                raise unanswered(what, server, exc) from None
            if ok:
                return answer
            error = error_from(
                response.status_code, answer, what=what, reason=response.reason, principal=self.principal
            )
            if error.type != "RequestInProgress" or attempt == self._options.max_retries:
                raise error
            time.sleep(self._options.backoff * 2**attempt)
            attempt += 1


def _parse(model: type[M], answer: bytes, what: str) -> M:
    """The answer as ``model``; an answer that is not one is an error naming what is wrong."""
    try:
        return model.model_validate_json(answer)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the answer"
        raise CatalogError(
            f"{what}: unexpected answer from Lakekeeper ({where}: {first['msg']}; {exc.error_count()} error(s))"
        ) from None


def _vended(
    location: str, config: Mapping[str, str] | None, credentials: Sequence[StorageCredential] | None
) -> VendedConfig:
    return parse_vended(location, config, [{"prefix": c.prefix, "config": c.config} for c in credentials or ()])


def encode_namespace(namespace: Sequence[str]) -> str:
    """The namespace path segment: levels joined by U+001F, percent-encoded (spaces as ``%20``)."""
    levels = list(namespace)
    for level in levels:
        if not level or any(c in level for c in ".+" + NAMESPACE_SEPARATOR):
            raise CatalogError(
                f"namespace level {level!r}: expected a non-empty name without '.', '+' or U+001F",
                type="InvalidNamespace",
                code=400,
            )
    if not levels:
        raise CatalogError("namespace is empty: expected at least one level", type="InvalidNamespace", code=400)
    return quote(NAMESPACE_SEPARATOR.join(levels), safe="")


def _dotted(namespace: Sequence[str], table: str) -> str:
    return ".".join((*namespace, table))
