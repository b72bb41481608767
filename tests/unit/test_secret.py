"""lakeflow.secret: which keys are secret, credentials in URLs, and dataset names built from them."""

from __future__ import annotations

import pytest

from lakeflow.lineage.config import from_mapping
from lakeflow.lineage.datasets import DatasetId, from_location
from lakeflow.lineage.flink_rest import Connection
from lakeflow.lineage.plan import Reference, TableRef
from lakeflow.lineage.resolve import Resolver
from lakeflow.lineage.sql_gateway import SqlGatewayClient
from lakeflow.secret import is_secret_key, redact, redact_url, strip_credentials
from tests.standins.sql_gateway import RecordedExecutor, SqlGatewayStandIn

SECRET_KEYS = ["sasl.jaas.config", "pwd", "PWD", "apikey", "api-key", "api_key", "api.key", "private-key",
               "private_key", "credential", "rest.credential", "http.auth", "Authorization",
               "basic.auth.user.info", "ssl.keystore.password", "db.passwd", "s3.secret-access-key",
               "fs.s3a.secret.key", "fs.s3a.access.key", "s3.access-key-id", "aws_session_token",
               "adls.sas-token.acct", "fs.s3a.encryption.key", "TOKEN", "OAUTH_CLIENT_SECRET",
               "FLINK_API_PASSWORD", "DATAHUB_GMS_TOKEN", "AWS_SECRET_ACCESS_KEY"]
PLAIN_KEYS = ["fs.s3a.aws.credentials.provider", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CREDENTIAL_PROFILES_FILE",
              "s3.session-token-expires-at-ms", "OAUTH_TOKEN_URL", "OAUTH_CLIENT_ID", "oauth2-server-uri",
              "s3.endpoint", "fs.s3a.endpoint.region", "rest.port", "AWS_PROFILE", "PATH", "HOME", "auth.type",
              "s3.sse.type", "lakeflow.table.location", "author"]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_credential_keys_are_secret(key):
    assert is_secret_key(key)
    assert redact({key: "v4lue"}) == {key: "***"}


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_keys_naming_no_secret_are_shown(key):
    assert not is_secret_key(key)


@pytest.mark.parametrize("url, stripped", [
    ("jdbc:mysql://app:pa55@db:3306/shop", "jdbc:mysql://db:3306/shop"),
    ("jdbc:mysql://app:pa@55@db:3306/shop", "jdbc:mysql://db:3306/shop"),
    ("jdbc:postgresql://db:5432/shop?user=app&password=pa55&ssl=true", "jdbc:postgresql://db:5432/shop?ssl=true"),
    ("jdbc:postgresql://db:5432/shop?ssl=true&password=pa55", "jdbc:postgresql://db:5432/shop?ssl=true"),
    ("jdbc:postgresql://db/shop?user=app&password=pa55", "jdbc:postgresql://db/shop"),
    ("jdbc:sqlserver://db:1433;databaseName=shop;user=sa;password=pa55", "jdbc:sqlserver://db:1433;databaseName=shop"),
    ("jdbc:oracle:thin:app/pa55@//db:1521/svc", "jdbc:oracle:thin:@//db:1521/svc"),
    ("http://admin:pa55@jm:8081", "http://jm:8081"),
    ("s3://bucket/a@b/c.json", "s3://bucket/a@b/c.json"),
    ("http://jm:8081/x?a=1", "http://jm:8081/x?a=1"),
])
def test_strip_credentials(url, stripped):
    assert strip_credentials(url) == stripped


@pytest.mark.parametrize("url, shown", [
    ("http://admin:pa55@lk:8181", "http://admin:***@lk:8181"),
    ("http://admin:pa/55@lk:8181", "http://admin:***@lk:8181"),   # not a valid URL, still hidden
    ("http://t0ken@lk:8181", "http://***@lk:8181"),
    ("jdbc:sqlserver://db;user=sa;password=pa55", "jdbc:sqlserver://db;user=sa;password=***"),
    ("https://kc/token?client_secret=pa55&x=1", "https://kc/token?client_secret=***&x=1"),
])
def test_redact_url_hides_passwords(url, shown):
    assert redact_url(url) == shown


def test_dataset_names_hold_no_credentials():
    assert DatasetId("mysql://app:pa55@db:3306", "shop.users") == DatasetId("mysql://db:3306", "shop.users")
    assert DatasetId("mssql://db:1433;user=sa;password=pa55", "shop.dbo.users").namespace == "mssql://db:1433"
    assert from_location("hdfs://app:pa55@nn:8020/raw") == DatasetId("hdfs://nn:8020", "raw")
    assert "pa55" not in from_location("s3a://AKIAX:pa55@bucket/raw").datahub_urn()


def test_jdbc_tables_resolve_without_credentials():
    """JDBC URLs from a catalog's base-url or a table's options: the dataset and every message
    hold no user or password."""
    def ddl(url: str) -> dict:
        return {"columns": [{"name": "result", "logicalType": {"type": "VARCHAR", "nullable": True}}],
                "rows": [[f"CREATE TABLE x (a INT) WITH ('connector' = 'jdbc', 'url' = '{url}')"]]}

    standin = SqlGatewayStandIn(RecordedExecutor({
        "SHOW CREATE TABLE `h`.`shop`.`users`": ddl("jdbc:mysql://app:pa55@db:3306/shop"),
        "SHOW CREATE TABLE `h`.`shop`.`orders`": ddl("jdbc:postgresql://db:5432/shop?user=app&password=pa55"),
        "SHOW CREATE TABLE `h`.`shop`.`items`": ddl("jdbc:sqlserver://db:1433;user=sa;password=pa55"),
        "SHOW CREATE TABLE `h`.`shop`.`other`": ddl("jdbc:derby://app:pa55@db/shop;password=pa55"),
    })).start()
    client = SqlGatewayClient(Connection(standin.url, max_retries=1, backoff_s=0.01), operation_timeout_s=5)
    try:
        resolver = Resolver(from_mapping({"connection": {"rest_api_url": "http://x"}}), client)
        refs = [Reference("source", "table", "v", f"TableSourceScan {t}", table=TableRef("h", "shop", t))
                for t in ("users", "orders", "items", "other")]
        resolutions = resolver.resolve(refs, {})
    finally:
        client.close()
        standin.stop()
    datasets = {r.dataset for r in resolutions if r.dataset}
    assert datasets == {DatasetId("mysql://db:3306", "shop.users"), DatasetId("postgres://db:5432", "shop.public.orders"),
                        DatasetId("mssql://db:1433", "dbo.items")}
    assert [r.unresolved for r in resolutions if r.unresolved]
    assert "pa55" not in repr(resolutions)


def test_the_published_rest_url_holds_no_credentials(recorded_jobmanager):
    """harvest() from a config whose REST URL carries ``user:password@``: flow and run URLs
    (DataHub ``externalUrl``) are published without them."""
    from lakeflow.lineage.harvest import harvest

    host = recorded_jobmanager.url.removeprefix("http://")
    graph = harvest(from_mapping({"connection": {"rest_api_url": f"http://admin:pa55@{host}"}})).graph
    urls = [f.url for f in graph.flows if f.url] + [r.url for r in graph.runs if r.url]
    assert urls and all(u.startswith(f"{recorded_jobmanager.url}/#/job/") for u in urls)
