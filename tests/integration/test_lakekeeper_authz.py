"""Lakekeeper with OpenFGA authorization as lakeflow's jobs meet it (fixture ``authz_lakehouse``,
tests/support/lakehouse.py: the stand-ins with authorization on, Apache's Iceberg REST server behind
``/catalog``, moto with IAM enforced): each job runs as its own OAuth client, with only the grants
the recording showed it needs (recorded-authz-0.13.3/README.md), and the credentials it is vended
are worth what its privilege is on S3.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from lakeflow.catalog import open_catalog
from lakeflow.credentials import VendedConfig, to_s3a
from lakeflow.settings import load_settings
from tests.support.fixtures_lakekeeper import NAMESPACE
from tests.support.lakehouse import AuthorizedLakehouse

pytestmark = pytest.mark.slow


def _refused(call) -> None:
    with pytest.raises(ClientError) as err:
        call()
    assert err.value.response["Error"]["Code"] == "AccessDenied"


def test_ingest_writes_with_namespace_create_and_compact_reads_only_with_select(
        authz_lakehouse: AuthorizedLakehouse) -> None:
    lake = authz_lakehouse
    ingest = load_settings(lake.env_for("lf-ingest"))
    load_path = f"/lakekeeper/v1/{lake.warehouse_id}/namespaces/{NAMESPACE[0]}/generic-tables/{ingest.table}"
    refused = lake.call("lf-ingest", "POST", f"/lakekeeper/v1/{lake.warehouse_id}/namespaces/{NAMESPACE[0]}"
                        "/generic-tables", {"name": ingest.table, "format": "dataset"})
    assert (refused.status_code, refused.json()["error"]["type"]) == (404, "NoSuchNamespaceException")

    lake.grant("lf-ingest", "create", lake.namespace())  # what ingestion needs: it owns what it registers
    handle = open_catalog(ingest).register(ingest.namespace, ingest.table)
    assert lake.authz.assignments(lake.generic_table(ingest.table)) == [
        {"type": "ownership", "user": "oidc~lf-ingest"}]
    written = open_catalog(ingest).load(ingest.namespace, ingest.table, vended=True).storage.merged()
    writer = boto3.client("s3", **to_s3a(VendedConfig(handle.location, written)).boto3())
    bucket, prefix = handle.location.removeprefix("s3://").split("/", 1)
    writer.put_object(Bucket=bucket, Key=f"{prefix}/part-0.json", Body=b"[]")
    writer.put_object(Bucket=bucket, Key=f"{prefix}/part-1.json", Body=b"[]")
    writer.delete_object(Bucket=bucket, Key=f"{prefix}/part-1.json")  # read-write-delete

    compact = load_settings(lake.env_for("lf-compact"))
    unseen = lake.call("lf-compact", "GET", load_path)
    assert (unseen.status_code, unseen.json()["error"]["type"]) == (404, "NoSuchGenericTableException")
    lake.grant("lf-compact", "select", lake.generic_table(ingest.table))
    read = open_catalog(compact).load(compact.namespace, compact.table, vended=True).storage.merged()
    assert read["s3.access-key-id"] != written["s3.access-key-id"]
    reader = boto3.client("s3", **to_s3a(VendedConfig(handle.location, read)).boto3())
    assert reader.get_object(Bucket=bucket, Key=f"{prefix}/part-0.json")["Body"].read() == b"[]"
    listed = reader.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/")["Contents"]
    assert [o["Key"] for o in listed] == [f"{prefix}/part-0.json"]
    _refused(lambda: reader.put_object(Bucket=bucket, Key=f"{prefix}/part-2.json", Body=b"[]"))
    _refused(lambda: reader.delete_object(Bucket=bucket, Key=f"{prefix}/part-0.json"))

    # the compaction may not drop it nor grant itself more; the unrelated principal sees nothing
    drop = lake.call("lf-compact", "DELETE", load_path)
    assert (drop.status_code, drop.json()["error"]["type"]) == (403, "GenericTableActionForbidden")
    escalate = lake.call("lf-compact", "POST", f"/management/v1/permissions/warehouse/{lake.warehouse_id}/"
                         f"generic-table/{lake.generic_table(ingest.table).rsplit('/', 1)[1]}/assignments",
                         {"writes": [{"type": "modify", "user": "oidc~lf-compact"}]})
    assert (escalate.status_code, escalate.json()["error"]["type"]) == (401, "Unauthorized")
    other = lake.call("lf-other", "GET", load_path)
    assert (other.status_code, other.json()["error"]["type"]) == (404, "NoSuchGenericTableException")


def test_an_iceberg_table_is_its_creators_and_only_described_to_a_namespace_creator(
        authz_lakehouse: AuthorizedLakehouse) -> None:
    lake = authz_lakehouse
    tables = f"/catalog/v1/{lake.warehouse_id}/namespaces/{NAMESPACE[0]}/tables"
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "x", "type": "long", "required": False}]}
    denied = lake.call("lf-compact", "POST", tables, {"name": "compacted", "schema": schema})
    assert (denied.status_code, denied.json()["error"]["type"]) == (404, "NoSuchNamespaceException")

    lake.grant("lf-compact", "create", lake.namespace())
    lake.grant("lf-ingest", "create", lake.namespace())
    created = lake.call("lf-compact", "POST", tables, {"name": "compacted", "schema": schema},
                        **{"X-Iceberg-Access-Delegation": "vended-credentials"}).json()
    location = created["metadata"]["location"]
    bucket, prefix = location.removeprefix("s3://").split("/", 1)
    owner = boto3.client("s3", **to_s3a(VendedConfig(location, created["config"])).boto3())
    owner.put_object(Bucket=bucket, Key=f"{prefix}/data/part-0.parquet", Body=b"PAR1")
    _refused(lambda: owner.put_object(Bucket=bucket, Key=f"{prefix}-other/part-0.parquet", Body=b"PAR1"))
    assert lake.authz.assignments(lake.table("compacted")) == [{"type": "ownership", "user": "oidc~lf-compact"}]

    described = lake.call("lf-ingest", "GET", f"{tables}/compacted")  # namespace create: describe, no data
    assert described.status_code == 200 and set(described.json()) == {"metadata", "metadata-location"}
    credentials = lake.call("lf-ingest", "GET", f"{tables}/compacted/credentials")
    assert (credentials.status_code, credentials.json()["error"]["message"]) == (
        403, f"Table action `read_data` forbidden on table 'iot.compacted' in warehouse `{lake.warehouse_id}`")
    commit = lake.call("lf-ingest", "POST", f"{tables}/compacted", {
        "identifier": {"namespace": list(NAMESPACE), "name": "compacted"}, "requirements": [],
        "updates": [{"action": "set-properties", "updates": {"probe": "lf-ingest"}}]})
    assert (commit.status_code, commit.json()["error"]["type"]) == (403, "TableActionForbidden")
    unseen = lake.call("lf-other", "GET", f"{tables}/compacted")
    assert (unseen.status_code, unseen.json()["error"]["type"]) == (404, "NoSuchTableException")
    dropped = lake.call("lf-ingest", "DELETE", f"{tables}/compacted")
    assert (dropped.status_code, dropped.json()["error"]["message"]) == (
        403, f"Table action `can_drop` forbidden on table 'iot.compacted' in warehouse `{lake.warehouse_id}`")
    assert lake.call("lf-compact", "DELETE", f"{tables}/compacted").status_code == 204  # its owner's
    gone = lake.call("lf-compact", "GET", f"{tables}/compacted")
    assert (gone.status_code, gone.json()["error"]["type"]) == (404, "NoSuchTableException")
