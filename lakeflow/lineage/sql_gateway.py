"""The Flink SQL Gateway client: catalog introspection for platform resolution.

REST protocol v1 (Flink 1.16+; tested against Flink 2.3.0's gateway, ``make sql-gateway-jar``):
``POST /v1/sessions`` → sessionHandle,
``POST /v1/sessions/{s}/statements`` → operationHandle, ``GET …/operations/{o}/result/{token}``
→ ``resultType`` ``NOT_READY`` (poll again), ``PAYLOAD`` (rows + ``nextResultUri``) or ``EOS``.
Lookups (``DESCRIBE CATALOG EXTENDED``, ``SHOW CREATE TABLE``, and the tables of every catalog by
``SHOW CATALOGS`` / ``SHOW DATABASES IN`` / ``SHOW TABLES IN``) go through a thread-safe,
single-flight cache: concurrent workers asking for the same catalog or table wait for one call.
A statement has an overall deadline and a row cap, and only follows a ``nextResultUri`` that is a
path on the gateway (credentials never go elsewhere); any of these failing fails that statement.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from lakeflow.lineage.flink_rest import Connection, FlinkRestError, call, new_pool
from lakeflow.lineage.plan import TableRef

V = TypeVar("V")
POLL_S = 0.05
MAX_ROWS = 10_000  # result rows of one statement (a catalog description, a table's DDL: a few)
_PATH = re.compile(r"/(?!/)[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*")  # a path (and query) on this origin


class SingleFlight(Generic[V]):
    """A cache where each key is loaded once, even when many threads ask at the same time;
    a failed load is cached too (the error is raised to every caller)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[Hashable, Future] = {}

    def get(self, key: Hashable, load: Callable[[], V]) -> V:
        with self._lock:
            future = self._futures.get(key)
            owner = future is None
            if future is None:
                future = self._futures[key] = Future()
        if owner:
            try:
                future.set_result(load())
            except BaseException as exc:  # every waiter sees the same failure
                future.set_exception(exc)
        return future.result()


@dataclass(frozen=True)
class StatementResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


class SqlGatewayClient:
    """One gateway session, opened on first use; safe to share between threads."""

    def __init__(self, conn: Connection, operation_timeout_s: float = 60.0, max_rows: int = MAX_ROWS) -> None:
        self.conn = conn
        self.base = conn.url.rstrip("/")
        self.operation_timeout_s = operation_timeout_s  # a whole statement: waiting and paging
        self.max_rows = max_rows
        self._http = new_pool(conn, retry_500=False)
        self._handle: str | None = None
        self._open_lock = threading.Lock()
        self._catalogs: SingleFlight[dict[str, str]] = SingleFlight()
        self._tables: SingleFlight[dict[str, str]] = SingleFlight()
        self._all_tables: SingleFlight[tuple[TableRef, ...]] = SingleFlight()

    def _call(self, method: str, path: str, body: dict | None = None, deadline: float = math.inf) -> Any:
        url = f"{self.base}{path}"
        return call(self._http, f"SQL Gateway {method} {url}", method, url, body, deadline)

    def _session(self) -> str:
        with self._open_lock:
            if self._handle is None:
                answer = self._call("POST", "/v1/sessions", {"sessionName": "lakeflow-harvest", "properties": {}})
                handle = answer.get("sessionHandle") if isinstance(answer, dict) else None
                if not isinstance(handle, str):
                    raise FlinkRestError(f"SQL Gateway: POST /v1/sessions answered no sessionHandle: {answer!r:.200}")
                self._handle = handle
            return self._handle

    def execute(self, statement: str) -> StatementResult:
        """Run one statement and fetch all its result pages. Errors name the statement and the
        gateway's reason (no URLs or handles: they end up in the harvest output)."""
        try:
            return self._execute(statement)
        except FlinkRestError as exc:
            raise FlinkRestError(f"{statement}: {exc.detail}", exc.status, exc.detail) from exc

    def _execute(self, statement: str) -> StatementResult:
        deadline = time.monotonic() + self.operation_timeout_s
        s = self._session()
        answer = self._by(deadline, "POST", f"/v1/sessions/{s}/statements", {"statement": statement})
        op = answer.get("operationHandle") if isinstance(answer, dict) else None
        if not isinstance(op, str):
            raise FlinkRestError(f"SQL Gateway: statement answered no operationHandle: {answer!r:.200}")
        uri: str | None = f"/v1/sessions/{s}/operations/{op}/result/0"
        columns: tuple[str, ...] = ()
        rows: list[tuple[Any, ...]] = []
        while uri:
            if time.monotonic() > deadline:
                raise FlinkRestError(f"not done after {self.operation_timeout_s:g}s")
            page = self._by(deadline, "GET", uri)
            kind = page.get("resultType") if isinstance(page, dict) else None
            if kind == "NOT_READY":
                time.sleep(POLL_S)
                continue
            if kind not in ("PAYLOAD", "EOS"):
                raise FlinkRestError(f"SQL Gateway: unexpected resultType {kind!r} for {statement!r}")
            columns, page_rows = _page(page.get("results"), columns)
            rows.extend(page_rows)
            if len(rows) > self.max_rows:
                raise FlinkRestError(f"more than {self.max_rows} result rows: refused")
            uri = _next_uri(page.get("nextResultUri")) if kind == "PAYLOAD" else None
        return StatementResult(columns, tuple(rows))

    def _by(self, deadline: float, method: str, path: str, body: dict | None = None) -> Any:
        """A call that has to be done by the statement's ``deadline``."""
        try:
            return self._call(method, path, body, deadline)
        except FlinkRestError:
            if time.monotonic() > deadline:
                raise FlinkRestError(f"not done after {self.operation_timeout_s:g}s") from None
            raise

    def catalog_info(self, catalog: str) -> dict[str, str]:
        """``DESCRIBE CATALOG EXTENDED`` (Flink 1.20+): ``type``, ``option:*``, … (cached)."""

        def load() -> dict[str, str]:
            result = self.execute(f"DESCRIBE CATALOG EXTENDED {quote(catalog)}")
            if any(len(row) < 2 for row in result.rows):
                raise FlinkRestError("SQL Gateway: malformed result page: rows without a value")
            return {str(k): "" if v is None else str(v) for k, v, *_ in result.rows}

        return self._catalogs.get(catalog, load)

    def table_options(self, table: TableRef) -> dict[str, str]:
        """The ``WITH (…)`` options of ``SHOW CREATE TABLE`` (cached)."""

        def load() -> dict[str, str]:
            result = self.execute(
                f"SHOW CREATE TABLE {'.'.join(quote(p) for p in (table.catalog, table.database, table.table) if p)}"
            )
            if not result.rows or not result.rows[0]:
                raise FlinkRestError(f"SQL Gateway: SHOW CREATE TABLE {table} returned nothing")
            return with_options(str(result.rows[0][0]))

        return self._tables.get(table, load)

    def tables(self) -> tuple[TableRef, ...]:
        """Every table (and view) of every catalog the gateway shows a new session: those of its
        catalog store (persistent catalogs); listed once per client (cached)."""

        def load() -> tuple[TableRef, ...]:
            found = []
            for catalog in self._column("SHOW CATALOGS"):
                for database in self._column(f"SHOW DATABASES IN {quote(catalog)}"):
                    tables = self._column(f"SHOW TABLES IN {quote(catalog)}.{quote(database)}")
                    found += [TableRef(catalog, database, table) for table in tables]
            return tuple(sorted(found))

        return self._all_tables.get("tables", load)

    def _column(self, statement: str) -> list[str]:
        return [str(row[0]) for row in self.execute(statement).rows if row and row[0] is not None]

    def close(self) -> None:
        """Close the gateway session (best effort) and the connection pool."""
        try:
            if self._handle is not None:
                self._call("DELETE", f"/v1/sessions/{self._handle}")
        except FlinkRestError:
            pass
        finally:
            self._http.close()


def _page(results: Any, columns: tuple[str, ...]) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
    """A result page's columns (the previous ones when it names none) and rows. A page of another
    shape is an error that does not quote it (a table's DDL may hold secrets)."""
    results = results or {}
    named = (results.get("columns") or []) if isinstance(results, dict) else None
    data = (results.get("data") or []) if isinstance(results, dict) else None
    fields = [r.get("fields") if isinstance(r, dict) else None for r in data] if isinstance(data, list) else None
    if not isinstance(named, list) or fields is None or not all(isinstance(f, list) for f in fields):
        raise FlinkRestError("SQL Gateway: malformed result page")
    if named:
        columns = tuple(str(c.get("name") if isinstance(c, dict) else c) for c in named)
    return columns, [tuple(f or ()) for f in fields]


def _next_uri(uri: Any) -> str | None:
    """The next page's path; anything that could lead elsewhere than the gateway is refused."""
    if uri is None or isinstance(uri, str) and _PATH.fullmatch(uri):
        return uri
    raise FlinkRestError(f"nextResultUri {uri!r:.200} refused: expected a path on the gateway")


def quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


_OPTION = re.compile(r"'((?:[^']|'')*)'\s*=\s*'((?:[^']|'')*)'")


def with_options(ddl: str) -> dict[str, str]:
    """The ``'key' = 'value'`` pairs of a DDL's ``WITH (…)`` clause."""
    at = ddl.upper().rfind("WITH (")
    if at < 0:
        return {}
    return {k.replace("''", "'"): v.replace("''", "'") for k, v in _OPTION.findall(ddl[at:])}
