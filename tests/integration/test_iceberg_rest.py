"""lakeflow's Lakekeeper route of compaction against a real Iceberg REST catalog (Apache Iceberg's REST
test server, tests/support/iceberg_rest.py) at ``{LAKEKEEPER}/catalog``, its warehouse on moto S3 with
signatures and IAM policies enforced: pyiceberg's RestCatalog exactly as lakeflow builds it, the
table created by ``open_target``, ``commit`` adding Parquet on S3, stale commits refused by the server.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
import requests
from botocore.exceptions import ClientError

from lakeflow.compaction.commit import LEDGER_PROPERTY, CommitConflict, Target, commit, iceberg_catalog, open_target
from lakeflow.schema import load_schema
from lakeflow.settings import Settings, load_settings
from tests.support.fixtures_compaction import written_file
from tests.support.iceberg_rest import ARTIFACTS, WAREHOUSE_NAME, IcebergRestServer, IcebergRestUnavailable, ensure_server_jars

DAY_MS = 1763683200000  # 2025-11-21T00:00:00Z
NAMESPACE = ("iot",)


def _settings(server: IcebergRestServer, home: Path) -> Settings:
    return load_settings({"LAKEKEEPER": server.url, "WAREHOUSE_ID": WAREHOUSE_NAME, "TOKEN": "not-checked",
                          "S3_ENDPOINT": server.s3.url, "HTTP_TIMEOUT_S": "30", "LAKEFLOW_HOME": str(home),
                          "LAKEFLOW_ENV_FILE": os.devnull})


def _target(server: IcebergRestServer, settings: Settings, table: str, source: str) -> Target:
    """``open_target`` on lakeflow's own RestCatalog. The server vends keys but no endpoint or region
    (Lakekeeper vends both): S3_ENDPOINT reaches pyiceberg's FileIO, the region is a client property."""
    catalog = iceberg_catalog(settings)
    catalog.properties["s3.region"] = server.s3.region
    return open_target(catalog, NAMESPACE, table, source, load_schema(), s3_endpoint=settings.s3_endpoint)


def _s3(server: IcebergRestServer, access_key: str, secret_key: str):
    return boto3.client("s3", endpoint_url=server.s3.url, region_name=server.s3.region,
                        aws_access_key_id=access_key, aws_secret_access_key=secret_key)


def _put_parquet(target: Target, tag: str, seqs: range):
    """Readings ``seqs`` as a data file of the table (under data/<tag>/), written as the engines write
    them through lakeflow's own storage access (the vended keys, S3_ENDPOINT): (URI, WrittenFile)."""
    rows = [{"sensor_id": "sensor-001", "run_id": "r", "seq": s, "timestamp_ms": DAY_MS + s, "temperature": 1.0,
             "humidity": 50.0, "pressure": 1000.0, "location": "lab"} for s in seqs]
    return written_file(target, rows, tag=tag)


@pytest.mark.slow  # Maven is a JVM
def test_missing_jars_offline_fail_naming_the_artifacts(tmp_path: Path) -> None:
    """Offline with an empty cache: Maven fails and the error names what to fetch."""
    with pytest.raises(IcebergRestUnavailable) as err:
        ensure_server_jars(tmp_path / "cache", mvn=("mvn", "--offline"))
    assert "iceberg-open-api:1.11.0:test-fixtures" in str(err.value) and ARTIFACTS in str(err.value)
    assert not (tmp_path / "cache" / "jars").exists()


@pytest.mark.slow
def test_config_names_the_prefix_and_lakeflow_catalog_uses_it(iceberg_rest: IcebergRestServer,
                                                              tmp_path: Path) -> None:
    config = requests.get(f"{iceberg_rest.catalog_url}/v1/config", params={"warehouse": WAREHOUSE_NAME}, timeout=10)
    assert config.status_code == 200 and config.json()["overrides"]["prefix"] == iceberg_rest.prefix
    assert requests.get(f"{iceberg_rest.url}/v1/config", timeout=10).status_code == 404   # only under /catalog

    catalog = iceberg_catalog(_settings(iceberg_rest, tmp_path))
    assert catalog.properties["uri"] == iceberg_rest.catalog_url and catalog.properties["prefix"] == iceberg_rest.prefix
    catalog.create_namespace_if_not_exists(("config_check",))
    listed = requests.get(f"{iceberg_rest.catalog_url}/v1/{iceberg_rest.prefix}/namespaces", timeout=10).json()
    assert ["config_check"] in listed["namespaces"]


@pytest.mark.slow
def test_open_target_commit_and_a_stale_commit_conflicts(iceberg_rest: IcebergRestServer, tmp_path: Path) -> None:
    settings = _settings(iceberg_rest, tmp_path)
    source = "s3://raw-bucket/raw/sensor-readings"
    target = _target(iceberg_rest, settings, "commit-conflict", source)
    stale = _target(iceberg_rest, settings, "commit-conflict", source)   # a concurrent run's view: no snapshot
    assert target.location == f"{iceberg_rest.warehouse}/iot/commit-conflict"
    assert target.table.spec().fields[0].name == "ts_day" and target.snapshot_id is None

    # what the server vends in the load-table response: the catalog's own key pair, no session token,
    # endpoint or region (S3_ENDPOINT, a region client property above); pyiceberg and lakeflow's storage use the pair
    loaded = requests.get(f"{iceberg_rest.catalog_url}/v1/{iceberg_rest.prefix}/namespaces/iot/tables/commit-conflict",
                          headers={"X-Iceberg-Access-Delegation": "vended-credentials"}, timeout=10).json()
    assert loaded["config"] == {"s3.access-key-id": iceberg_rest.access_key,
                                "s3.secret-access-key": iceberg_rest.secret_key}
    assert not loaded.get("storage-credentials")
    assert target.table.io.properties["s3.access-key-id"] == iceberg_rest.access_key

    first = _put_parquet(target, "f1", range(3))
    snap = commit(target, [first], f"{source}/_lakeflow/l1.json.gz", source, "run-1", {"lakeflow.raw-files": "2"}, load_schema())
    other = _put_parquet(target, "f2", range(3, 5))
    with pytest.raises(CommitConflict, match="changed while this run worked"):
        commit(stale, [other], f"{source}/_lakeflow/l2.json.gz", source, "run-2", {}, load_schema())

    behind = _target(iceberg_rest, settings, "commit-conflict", source)      # at snapshot 1
    assert behind.snapshot_id == snap
    snap2 = commit(target, [other], f"{source}/_lakeflow/l2.json.gz", source, "run-2", {}, load_schema())
    with pytest.raises(CommitConflict, match="changed while this run worked"):
        commit(behind, [], f"{source}/_lakeflow/l3.json.gz", source, "run-3", {}, load_schema())

    # a fresh load through the server: two snapshots, the ledger of run 2, the rows read from moto
    # with the vended keys (moto checks every signature and the key's IAM policy)
    table = _target(iceberg_rest, settings, "commit-conflict", source).table
    assert [s.snapshot_id for s in table.metadata.snapshots] == [snap, snap2]
    assert table.properties[LEDGER_PROPERTY] == f"{source}/_lakeflow/l2.json.gz"
    assert table.snapshot_by_id(snap).summary["lakeflow.raw-files"] == "2"
    assert sorted(table.scan().to_arrow().column("seq").to_pylist()) == [0, 1, 2, 3, 4]


@pytest.mark.slow
def test_moto_enforces_the_vended_keys(iceberg_rest: IcebergRestServer, tmp_path: Path) -> None:
    """The warehouse's S3 really checks credentials: the vended pair reads the table's files, a wrong
    secret or an unknown key is refused."""
    target = _target(iceberg_rest, _settings(iceberg_rest, tmp_path), "enforced", "s3://raw-bucket/raw/enforced")
    bucket, key = target.table.metadata_location.removeprefix("s3://").split("/", 1)
    props = target.table.io.properties
    _s3(iceberg_rest, props["s3.access-key-id"], props["s3.secret-access-key"]).get_object(Bucket=bucket, Key=key)
    with pytest.raises(ClientError, match="SignatureDoesNotMatch"):
        _s3(iceberg_rest, props["s3.access-key-id"], "wrong-secret").get_object(Bucket=bucket, Key=key)
    with pytest.raises(ClientError, match="InvalidAccessKeyId"):
        _s3(iceberg_rest, "AKIAUNKNOWN000000000", "x").get_object(Bucket=bucket, Key=key)
