"""Flink's real SQL Gateway (``flink-sql-gateway`` of the wheel's version, from Maven Central) on
the session's standalone cluster, and a small client of its REST API (v3) to submit statements.

The gateway keeps created catalogs in a file catalog store, and the tests' catalogs are Flink's
file-backed test catalog (``'type' = 'test-filesystem'``): what one session creates, every other
session (the harvester's) sees, as with a persistent catalog. A table created in the in-memory
``default_catalog`` stays in its session's catalog, as on any real gateway.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
import requests

from lakeflow.runtime import jars
from lakeflow.runtime.flink_cluster import FlinkCluster
from tests.support.fixtures_servers import free_port


def catalog_jar_set() -> jars.JarSet:
    """``org.apache.flink:flink-table-filesystem-test-utils`` (the ``test-filesystem`` catalog)."""
    v = jars.flink_version()
    name = "flink-table-filesystem-test-utils"
    return jars.JarSet("test-catalog", v, f"{name}-{v}.jar", f"{name}.pom.xml", "@FLINK_VERSION@",
                       f"org.apache.flink:{name}:{v} (~23 KB)", name, "test")


class StatementFailed(RuntimeError):
    """The gateway answered an error; ``errors`` is its ``errors`` list."""

    def __init__(self, statement: str, status: int, errors: list[str]) -> None:
        causes = [line[len("Caused by: "):] for e in errors for line in e.splitlines() if line.startswith("Caused by: ")]
        super().__init__(f"{statement}: HTTP {status}: {(causes or errors or ['?'])[-1]}")
        self.status, self.errors = status, errors


@dataclass(frozen=True)
class Result:
    columns: list[str]
    rows: list[list[Any]]
    job_id: Optional[str]
    pages: list[dict]  # every answer of the result fetches, as the gateway sent it


@dataclass(frozen=True)
class RealSqlGateway:
    url: str
    work: Path  # where the tests' test-filesystem catalogs keep their tables

    def open_session(self, version: str = "v3") -> str:
        answer = requests.post(f"{self.url}/{version}/sessions", json={"sessionName": "tests"}, timeout=30)
        answer.raise_for_status()
        return answer.json()["sessionHandle"]

    def run(self, session: str, statement: str, version: str = "v3", timeout: float = 120.0) -> Result:
        """Submit one statement and fetch its result pages (``rowFormat=JSON``) to EOS."""
        op = requests.post(f"{self.url}/{version}/sessions/{session}/statements", json={"statement": statement},
                           timeout=30)
        if op.status_code != 200:
            raise StatementFailed(statement, op.status_code, op.json().get("errors", []))
        uri: Optional[str] = (f"/{version}/sessions/{session}/operations/{op.json()['operationHandle']}"
                              "/result/0?rowFormat=JSON")
        deadline, pages, rows = time.monotonic() + timeout, [], []
        columns: list[str] = []
        job_id = None
        while uri:
            answer = requests.get(self.url + uri, timeout=30)
            if answer.status_code != 200:
                raise StatementFailed(statement, answer.status_code, answer.json().get("errors", []))
            page = answer.json()
            pages.append(page)
            if page["resultType"] == "NOT_READY":
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{statement}: not ready after {timeout:.0f}s")
                time.sleep(0.1)
                continue
            columns = [c["name"] for c in page["results"]["columns"]] or columns
            rows += [d["fields"] for d in page["results"]["data"]]
            job_id = page.get("jobID") or job_id
            uri = page.get("nextResultUri") if page["resultType"] == "PAYLOAD" else None
        return Result(columns, rows, job_id, pages)

    def create_catalog(self, session: str, name: str, default_database: str) -> Path:
        """A ``test-filesystem`` catalog (kept in the gateway's catalog store); returns its folder."""
        root = self.work / "catalogs" / name
        (root / default_database).mkdir(parents=True)
        self.run(session, f"CREATE CATALOG {name} WITH ('type' = 'test-filesystem', 'path' = '{root}', "
                          f"'default-database' = '{default_database}')")
        return root


@pytest.fixture(scope="session")
def sql_gateway(flink_cluster: FlinkCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSqlGateway]:
    """Flink's SQL Gateway for the session's cluster, started once (~5 s) and stopped at the end."""
    work = tmp_path_factory.mktemp("sql-gateway")
    (work / "catalog-store").mkdir()
    catalog_jars = jars.fetch(catalog_jar_set())
    url = flink_cluster.start_sql_gateway(free_port(), jars=catalog_jars, conf={
        "table.catalog-store.kind": "file", "table.catalog-store.file.path": str(work / "catalog-store")})
    try:
        yield RealSqlGateway(url, work)
    finally:
        flink_cluster.stop(kind="sql-gateway")
