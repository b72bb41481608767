"""pyiceberg's errors from the Iceberg REST commit, mapped to lakeflow's CatalogError subclasses
(lakeflow.catalog.errors), against the real Iceberg REST server (tests/support/iceberg_rest.py): a stale
commit (409) and a dropped table (404) provoked for real; 403, 500 and 503 injected by a stand-in
proxy in front of it that answers the commit with an Iceberg REST ``ErrorResponse``."""

from __future__ import annotations

import os
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Optional

import pytest
import requests

from lakeflow.catalog.errors import (AccessDenied, CatalogError, CatalogUnavailable, CommitConflict,
                                     CommitStateUnknown, TableNotFound)
from lakeflow.compaction.commit import Target, commit, iceberg_catalog, open_target
from lakeflow.schema import load_schema
from lakeflow.settings import Settings, load_settings
from tests.support.iceberg_rest import WAREHOUSE_NAME, IcebergRestServer
from tests.standins.http_stub import QuietHandler, send_json, serve, stop, url_of

TOKEN = "tok-never-shown-3f9a"
SOURCE = "s3://raw-bucket/raw/errors"
_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}


class _Proxy:
    """Forwards to the Iceberg REST server; answers the next commit (``POST …/tables/<t>``) with
    ``status`` and an Iceberg REST error body when one is queued."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.inject: Optional[tuple[int, str]] = None
        self.commits = 0
        self.server: Optional[ThreadingHTTPServer] = None

    def __enter__(self) -> "_Proxy":
        proxy = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "POST" and "/tables/" in self.path and not self.path.endswith("/metrics"):
                    proxy.commits += 1
                    if proxy.inject:
                        status, kind = proxy.inject
                        proxy.inject = None
                        send_json(self, status, {"error": {"message": f"injected {status}", "type": kind,
                                                           "code": status}})
                        return
                answer = requests.request(self.command, proxy.upstream + self.path, data=body, timeout=30,
                                          headers={k: v for k, v in self.headers.items() if k.lower() not in _HOP})
                self.send_response(answer.status_code)
                for key, value in answer.headers.items():
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_DELETE = do_HEAD = _forward  # noqa: N815

        self.server = serve(Handler)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.server is not None
        stop(self.server)

    @property
    def url(self) -> str:
        assert self.server is not None
        return url_of(self.server)


@pytest.fixture
def proxy(iceberg_rest: IcebergRestServer) -> Iterator[_Proxy]:
    with _Proxy(iceberg_rest.url) as running:
        yield running


def _settings(lakekeeper: str, server: IcebergRestServer, home: Path) -> Settings:
    return load_settings({"LAKEKEEPER": lakekeeper, "WAREHOUSE_ID": WAREHOUSE_NAME, "TOKEN": TOKEN,
                          "S3_ENDPOINT": server.s3.url, "HTTP_TIMEOUT_S": "30", "HTTP_MAX_RETRIES": "0",
                          "LAKEFLOW_HOME": str(home), "LAKEFLOW_ENV_FILE": os.devnull})


def _target(settings: Settings, server: IcebergRestServer, table: str) -> Target:
    catalog = iceberg_catalog(settings)
    catalog.properties["s3.region"] = server.s3.region
    return open_target(catalog, ("iot",), table, SOURCE, load_schema(), s3_endpoint=settings.s3_endpoint)


def _commit(target: Target, run: str) -> int:
    return commit(target, [], f"{SOURCE}/_lakeflow/{run}.json.gz", SOURCE, run, {}, load_schema())


def _named(err: CatalogError, table: str) -> None:
    assert f"commit to Iceberg table iot.{table}: " in str(err) and TOKEN not in str(err)


def test_a_concurrent_commit_is_a_conflict(iceberg_rest: IcebergRestServer, tmp_path: Path) -> None:
    settings = _settings(iceberg_rest.url, iceberg_rest, tmp_path)
    ours, theirs = (_target(settings, iceberg_rest, "err-conflict") for _ in range(2))
    _commit(theirs, "run-1")
    with pytest.raises(CommitConflict) as err:
        _commit(ours, "run-2")
    assert (err.value.code, err.value.type) == (409, "CommitFailedException")
    assert "the table changed while this run worked; nothing was committed" in str(err.value)
    _named(err.value, "err-conflict")


def test_a_dropped_table_is_not_found(iceberg_rest: IcebergRestServer, tmp_path: Path) -> None:
    settings = _settings(iceberg_rest.url, iceberg_rest, tmp_path)
    target = _target(settings, iceberg_rest, "err-dropped")
    iceberg_catalog(settings).drop_table(("iot", "err-dropped"))
    with pytest.raises(TableNotFound) as err:
        _commit(target, "run-1")
    assert err.value.type == "NoSuchTableException"  # pyiceberg's commit drops the 404: a plain RESTError
    _named(err.value, "err-dropped")


@pytest.mark.parametrize("status, kind, mapped", [
    (403, "ForbiddenException", AccessDenied),
    (500, "ServerError", CommitStateUnknown),        # pyiceberg: CommitStateUnknownException
    (503, "ServiceUnavailableException", CatalogUnavailable),
])
def test_refused_and_failed_commits(iceberg_rest: IcebergRestServer, proxy: _Proxy, tmp_path: Path,
                                    status: int, kind: str, mapped: type[CatalogError]) -> None:
    settings = _settings(proxy.url, iceberg_rest, tmp_path)
    table = f"err-{status}"
    target = _target(settings, iceberg_rest, table)
    proxy.inject = (status, kind)
    with pytest.raises(mapped) as err:
        _commit(target, "run-1")
    assert type(err.value) is mapped and (err.value.code, err.value.type) == (status, kind)
    assert f"injected {status}" in str(err.value)
    _named(err.value, table)
    assert proxy.commits == 1   # went through the proxy, and was not re-sent
    assert _commit(target, "run-2")  # nothing was applied: the table is still where the run planned
