"""Flink's real SQL Gateway (2.3.0, on the session's cluster): SQL jobs submitted through its REST
API, then resolved by ``lakeflow harvest --sql-gateway-url`` — DESCRIBE CATALOG / SHOW CREATE TABLE
as the real gateway answers them, its error answers, one statement per catalog and table however
many workers ask — and the stand-in's answers checked against the real ones."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import requests

from lakeflow.cli.main import main
from lakeflow.lineage.flink_rest import Connection, FlinkRestError
from lakeflow.lineage.plan import TableRef
from lakeflow.lineage.sql_gateway import SqlGatewayClient
from tests.support.fixtures_sql_gateway import RealSqlGateway, StatementFailed
from tests.standins.sql_gateway import RecordedExecutor, SqlGatewayStandIn
from tests.standins.http_stub import QuietHandler, serve, stop, url_of

pytestmark = pytest.mark.slow
CATALOG, DB = "gw", "iot"


@dataclass(frozen=True)
class Jobs:
    archive: Path  # the filesystem table's path
    catalog_root: Path
    job_ids: dict[str, str]


def wait_finished(rest_url: str, job_ids: dict[str, str], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        states = {name: requests.get(f"{rest_url}/v1/jobs/{jid}", timeout=10).json()["state"]
                  for name, jid in job_ids.items()}
        if all(s == "FINISHED" for s in states.values()):
            return
        if time.monotonic() > deadline or {"FAILED", "CANCELED"} & set(states.values()):
            raise AssertionError(f"jobs did not finish: {states}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def jobs(sql_gateway: RealSqlGateway, flink_cluster) -> Jobs:
    """Three bounded SQL jobs submitted through the gateway's v3 REST API from one session:
    datagen → filesystem table (a path), filesystem table → print, and datagen → a table created in
    that session's in-memory default_catalog."""
    s = sql_gateway.open_session()
    root = sql_gateway.create_catalog(s, CATALOG, DB)
    archive = sql_gateway.work / "archive"
    archive.mkdir()
    t = f"{CATALOG}.{DB}"
    for statement in (
            f"CREATE TABLE {t}.readings (sensor_id BIGINT, temperature DOUBLE) "
            "WITH ('connector' = 'datagen', 'number-of-rows' = '20')",
            f"CREATE TABLE {t}.archive (sensor_id BIGINT, temperature DOUBLE) "
            f"WITH ('connector' = 'filesystem', 'path' = '{archive}', 'format' = 'json')",
            f"CREATE TABLE {t}.console (sensor_id BIGINT, temperature DOUBLE) WITH ('connector' = 'print')",
            "CREATE TABLE numbers (sensor_id BIGINT, temperature DOUBLE) WITH ('connector' = 'print')"):
        sql_gateway.run(s, statement)
    job_ids = {}
    for name, insert in (("gw-filesystem", f"INSERT INTO {t}.archive SELECT * FROM {t}.readings"),
                         ("gw-print", f"INSERT INTO {t}.console SELECT * FROM {t}.archive"),
                         ("gw-catalog-table", f"INSERT INTO numbers SELECT * FROM {t}.readings")):
        sql_gateway.run(s, f"SET 'pipeline.name' = '{name}'")
        job_ids[name] = sql_gateway.run(s, insert).job_id
    wait_finished(flink_cluster.rest_url, job_ids)
    return Jobs(archive, root, job_ids)


class CountingProxy:
    """Forwards every request to the gateway; records the statements submitted through it."""

    def __init__(self, target: str) -> None:
        self.statements: list[str] = []
        proxy = self

        class Handler(QuietHandler):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "POST" and self.path.endswith("/statements"):
                    proxy.statements.append(json.loads(body)["statement"])
                answer = requests.request(self.command, target + self.path, data=body or None, timeout=60,
                                          headers={"Content-Type": "application/json"})
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_DELETE = _forward

        self.server = serve(Handler)
        self.url = url_of(self.server)


@pytest.fixture
def proxy(sql_gateway: RealSqlGateway) -> Iterator[CountingProxy]:
    p = CountingProxy(sql_gateway.url)
    yield p
    stop(p.server)


def missing(table: str) -> str:
    quoted = ".".join(f"`{p}`" for p in table.split("."))
    return (f"catalog table {table}: SQL Gateway lookup failed: SHOW CREATE TABLE {quoted}: org.apache.flink.table."
            f"api.ValidationException: Could not execute SHOW CREATE TABLE. Table with identifier {quoted} "
            "does not exist.")


def test_the_harvester_resolves_jobs_submitted_through_the_gateway(jobs, flink_cluster, proxy, tmp_path):
    out = tmp_path / "h.json"
    assert main(["harvest", "--rest-url", flink_cluster.rest_url, "--sql-gateway-url", proxy.url,
                 "--job-name-allow", "^gw-", "--output", str(out)]) == 0
    doc = json.loads(out.read_text())
    got = {j["name"]: {k: j[k] for k in ("inputs", "outputs", "skipped", "unresolved")} for j in doc["jobs"]}
    assert {j["run_id"] for j in doc["runs"]} == set(jobs.job_ids.values())
    datagen = f"{CATALOG}.{DB}.readings: connector 'datagen' is not a dataset"
    assert got == {
        "gw-filesystem": dict(inputs=[], outputs=[], skipped=[datagen], unresolved=[
            "filesystem table sink (StreamingFileWriter): the plan names neither the table nor its path"]),
        "gw-print": dict(inputs=[f"file://{jobs.archive}"], outputs=[], unresolved=[],
                         skipped=[f"{CATALOG}.{DB}.console: connector 'print' is not a dataset"]),
        "gw-catalog-table": dict(inputs=[], outputs=[], skipped=[datagen],
                                 unresolved=[missing("default_catalog.default_database.numbers")]),
    }
    # every catalog and table looked up once, although the jobs were harvested by parallel workers
    assert sorted(proxy.statements) == [
        "DESCRIBE CATALOG EXTENDED `default_catalog`", f"DESCRIBE CATALOG EXTENDED `{CATALOG}`",
        "SHOW CREATE TABLE `default_catalog`.`default_database`.`numbers`",
        f"SHOW CREATE TABLE `{CATALOG}`.`{DB}`.`archive`", f"SHOW CREATE TABLE `{CATALOG}`.`{DB}`.`console`",
        f"SHOW CREATE TABLE `{CATALOG}`.`{DB}`.`readings`"]


def test_the_client_reads_catalogs_and_ddl_as_the_gateway_answers(jobs, sql_gateway):
    client = SqlGatewayClient(Connection(sql_gateway.url, max_retries=0), operation_timeout_s=60)
    try:
        assert client.catalog_info(CATALOG) == {"name": CATALOG, "type": "test-filesystem", "comment": "",
                                                "option:default-database": DB, "option:path": str(jobs.catalog_root)}
        assert client.table_options(TableRef(CATALOG, DB, "archive")) == {
            "connector": "filesystem", "path": str(jobs.archive), "format": "json"}
        with pytest.raises(FlinkRestError) as err:  # the in-memory default_catalog has no descriptor
            client.catalog_info("default_catalog")
        assert str(err.value) == ("DESCRIBE CATALOG EXTENDED `default_catalog`: org.apache.flink.table.api."
                                  "ValidationException: Cannot obtain metadata information from Catalog "
                                  "default_catalog.")
        result = client.execute(f"SHOW TABLES IN {CATALOG}.{DB}")
        assert sorted(r[0] for r in result.rows) == ["archive", "console", "readings"]
    finally:
        client.close()


def test_concurrent_lookups_are_one_gateway_statement(jobs, proxy):
    client = SqlGatewayClient(Connection(proxy.url, max_retries=0), operation_timeout_s=60)
    barrier, results = threading.Barrier(8), []

    def ask() -> None:
        barrier.wait()
        results.append((client.catalog_info(CATALOG)["type"], client.table_options(TableRef(CATALOG, DB, "readings"))))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    assert results == [("test-filesystem", {"connector": "datagen", "number-of-rows": "20"})] * 8
    assert proxy.statements == [f"DESCRIBE CATALOG EXTENDED `{CATALOG}`", f"SHOW CREATE TABLE `{CATALOG}`.`{DB}`.`readings`"]


def test_the_stand_in_answers_in_the_real_wire_format(jobs, sql_gateway):
    """The same statements, a good one and a failing one, against the real gateway and the stand-in:
    the same answer shapes (keys, page kinds, column and error format) in v1 and v3."""
    good, bad = f"SHOW CREATE TABLE `{CATALOG}`.`{DB}`.`console`", "SHOW CREATE TABLE `x`.`y`.`z`"
    session = sql_gateway.open_session()
    real = sql_gateway.run(session, good)
    with pytest.raises(StatementFailed) as real_error:
        sql_gateway.run(session, bad)
    standin = SqlGatewayStandIn(RecordedExecutor({
        good: {"columns": real.pages[-1]["results"]["columns"], "rows": real.rows},
        bad: {"error": str(real_error.value).split(": HTTP 500: ", 1)[1]}})).start()
    try:
        fake = RealSqlGateway(standin.url, sql_gateway.work)
        for version in ("v1", "v3"):
            ours = fake.run(fake.open_session(version), good, version=version)
            theirs = sql_gateway.run(sql_gateway.open_session(version), good, version=version)
            assert ours.rows == theirs.rows and ours.columns == theirs.columns
            assert [shape(p) for p in ours.pages if p["resultType"] != "NOT_READY"] == \
                   [shape(p) for p in theirs.pages if p["resultType"] != "NOT_READY"]
            assert {shape(p) for p in ours.pages if p["resultType"] == "NOT_READY"} <= {
                shape({"resultType": "NOT_READY", "nextResultUri": "/"})}
        with pytest.raises(StatementFailed) as fake_error:
            fake.run(fake.open_session(), bad)
        assert (fake_error.value.status, fake_error.value.errors[0]) == (real_error.value.status,
                                                                         real_error.value.errors[0])
        assert str(fake_error.value) == str(real_error.value)
        assert fake_error.value.errors[1].startswith("<Exception on server side:\n")
        assert real_error.value.errors[1].startswith("<Exception on server side:\n")
    finally:
        standin.stop()


def shape(page: dict) -> tuple:
    """A result page's form: its keys, its results' keys and column form, with values left out."""
    results = page.get("results") or {}
    columns = tuple(sorted(c) for c in results.get("columns", []))
    return (tuple(sorted(page)), tuple(sorted(results)), tuple(map(tuple, columns)), page["resultType"])
