"""The Lakekeeper client against the stand-in (real sockets; STS and S3 from moto's server).

Every request and answer here is checked against Lakekeeper's OpenAPI document by the stand-in;
the ``lakekeeper`` fixture fails a test that left a violation.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timedelta, timezone

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from lakeflow.auth import StaticToken
from lakeflow.catalog.base import CatalogError, TableNotFound
from lakeflow.catalog.errors import AccessDenied, CatalogUnavailable, error_from
from lakeflow.catalog.lakekeeper import MAX_ANSWER_BYTES, LakekeeperCatalog
from lakeflow.credentials import to_s3a
from lakeflow.http import USER_AGENT, HttpOptions
from lakeflow.secret import Secret
from tests.support.fixtures_lakekeeper import settings_for

NS = ("iot",)
FAST = HttpOptions(timeout=5, max_retries=3, backoff=0.01, jitter=0)
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def client(standin, warehouse=None, options=FAST, **kwargs) -> LakekeeperCatalog:
    return LakekeeperCatalog(standin.url, warehouse or standin.warehouse_id,
                             auth=StaticToken(Secret(standin.token)), options=options, **kwargs)


def s3_key(location: str) -> tuple[str, str]:
    bucket, _, key = location.removeprefix("s3://").partition("/")
    return bucket, key


def test_register_load_and_use_the_vended_credentials(lakekeeper):
    catalog = client(lakekeeper)
    created = catalog.register(NS, "sensor-readings", properties={"owner": "iot"})
    again = catalog.register(NS, "sensor-readings")
    assert created.created and not again.created
    assert created.location == again.location
    assert created.location.startswith(lakekeeper.warehouse.base + "/")
    assert created.format == "dataset" and again.properties == {"owner": "iot"}
    assert created.ident.warehouse == lakekeeper.warehouse_id and str(created.ident) == "iot.sensor-readings"
    assert again.storage is not None and again.storage.has_keys
    assert again.expires_at and again.expires_at > datetime.now(timezone.utc) + timedelta(minutes=50)
    # the vended credentials, translated, work with boto3 against S3 under the table prefix
    s3 = boto3.client("s3", **to_s3a(again.storage).boto3())
    bucket, key = s3_key(again.location)
    s3.put_object(Bucket=bucket, Key=f"{key}/part-0.json", Body=b"[]")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{key}/")
    assert [o["Key"] for o in listed["Contents"]] == [f"{key}/part-0.json"]
    assert lakekeeper.calls("POST")[0].headers["user-agent"] == USER_AGENT


def test_delegation_header_and_client_managed_load(lakekeeper):
    catalog = client(lakekeeper)
    catalog.register(NS, "t")
    vended = catalog.load(NS, "t")
    plain = catalog.load(NS, "t", vended=False)
    loads = lakekeeper.calls("GET", "/generic-tables/t")
    assert [r.headers["x-iceberg-access-delegation"] for r in loads[-2:]] == ["vended-credentials",
                                                                             "client-managed"]
    assert vended.storage.has_keys and not plain.storage.has_keys
    assert plain.storage.merged()["s3.endpoint"].endswith("/")  # non-secret config still comes


def test_credentials_come_from_the_servers_cache_for_half_their_lifetime(lakekeeper):
    """As Lakekeeper does: the same credentials until half their lifetime is over, then new ones."""
    lakekeeper.warehouse.sts_validity_s = 4
    catalog = client(lakekeeper)
    handle = catalog.register(NS, "t")
    again = catalog.credentials(NS, "t")
    assert again.location == handle.location
    assert again.has_keys and again.expires_at == handle.storage.expires_at
    assert again.merged()["s3.access-key-id"] == handle.storage.merged()["s3.access-key-id"]
    time.sleep(max(0.0, handle.storage.expires_at.timestamp() - 2 - time.time()) + 0.2)
    fresh = catalog.credentials(NS, "t")
    assert fresh.merged()["s3.access-key-id"] != handle.storage.merged()["s3.access-key-id"]
    assert fresh.expires_at is not None and handle.storage.expires_at is not None
    assert fresh.expires_at > handle.storage.expires_at


def test_sts_off_vends_an_entry_without_keys(lakekeeper):
    lakekeeper.warehouse.sts_enabled = False
    catalog = client(lakekeeper)
    handle = catalog.register(NS, "t")
    assert handle.storage is not None and not handle.storage.has_keys
    assert not catalog.credentials(NS, "t").has_keys


def test_warehouse_name_is_resolved_once(lakekeeper):
    catalog = client(lakekeeper, warehouse=lakekeeper.warehouse_name)
    catalog.register(NS, "a")
    catalog.list_tables(NS)
    assert catalog.warehouse_id == lakekeeper.warehouse_id
    assert len(lakekeeper.calls("GET", "/catalog/v1/config")) == 1
    assert lakekeeper.calls("GET", "/catalog/v1/config")[0].query == {"warehouse": lakekeeper.warehouse_name}
    assert all(lakekeeper.warehouse_id in r.path for r in lakekeeper.calls(contains="/lakekeeper/v1/"))
    with pytest.raises(CatalogError) as err:
        client(lakekeeper, warehouse="no-such-warehouse").list_tables(NS)
    assert (err.value.code, err.value.type) == (404, "NoSuchWarehouseException")
    assert "no-such-warehouse" in str(err.value)


def test_a_warehouse_name_in_the_url_is_refused_by_the_server(lakekeeper):
    response = requests.get(f"{lakekeeper.url}/lakekeeper/v1/{lakekeeper.warehouse_name}/namespaces/iot"
                            "/generic-tables", headers={"Authorization": f"Bearer {lakekeeper.token}"})
    error = error_from(response.status_code, response.content, what="list")
    assert (error.code, error.type) == (400, "WarehouseIdIsNotUUID")
    assert UUID_RE.match(error.error_id)


def test_multi_level_namespaces_are_joined_by_unit_separator(lakekeeper):
    lakekeeper.create_namespace(("iot", "raw data"))
    catalog = client(lakekeeper)
    handle = catalog.register(("iot", "raw data"), "t")
    assert handle.ident.namespace == ("iot", "raw data")
    assert [t.name for t in catalog.list_tables(("iot", "raw data"))] == ["t"]
    raw = lakekeeper.calls("POST")[0].raw
    assert "/namespaces/iot%1Fraw%20data/generic-tables" in raw
    sent = len(lakekeeper.requests)
    for bad in (("iot.raw",), ("a+b",), ("",), ()):
        with pytest.raises(CatalogError) as err:
            catalog.load(bad, "t")
        assert err.value.type == "InvalidNamespace"
    assert len(lakekeeper.requests) == sent  # refused before sending


def test_list_follows_page_tokens_until_absent(make_lakekeeper):
    lakekeeper = make_lakekeeper(page_size=2)
    catalog = client(lakekeeper)
    names = [f"t{i}" for i in range(5)]
    for name in names:
        catalog.register(NS, name)
    assert [t.name for t in catalog.list_tables(NS)] == names
    lists = [r for r in lakekeeper.calls("GET") if r.path.endswith("/generic-tables")]
    assert len(lists) == 4  # pages of 2, 2, 1, then an empty page without a token
    assert "pageToken" not in lists[0].query and all("pageToken" in r.query for r in lists[1:])


def test_drop_keeps_data_unless_purge(lakekeeper, moto_server):
    catalog = client(lakekeeper)
    s3 = moto_server.client("s3")
    kept = catalog.register(NS, "kept")
    bucket, key = s3_key(kept.location)
    s3.put_object(Bucket=bucket, Key=f"{key}/a.json", Body=b"[]")
    catalog.drop(NS, "kept")
    assert lakekeeper.calls("DELETE")[-1].query["purgeRequested"] == "false"
    assert s3.list_objects_v2(Bucket=bucket, Prefix=key + "/")["KeyCount"] == 1
    with pytest.raises(TableNotFound, match=r"^404 NoSuchGenericTableException: load iot\.kept: the table does not exist "):
        catalog.load(NS, "kept")
    purged = catalog.register(NS, "purged")
    bucket, key = s3_key(purged.location)
    s3.put_object(Bucket=bucket, Key=f"{key}/a.json", Body=b"[]")
    catalog.drop(NS, "purged", purge=True)
    assert lakekeeper.purged == [purged.location]
    assert s3.list_objects_v2(Bucket=bucket, Prefix=key + "/")["KeyCount"] == 0


def test_the_servers_drop_default_is_purge(lakekeeper):
    handle = client(lakekeeper).register(NS, "t")
    response = requests.delete(f"{lakekeeper.url}/lakekeeper/v1/{lakekeeper.warehouse_id}/namespaces/iot"
                               "/generic-tables/t", headers={"Authorization": f"Bearer {lakekeeper.token}"})
    assert response.status_code == 204 and lakekeeper.purged == [handle.location]


def test_rename(lakekeeper):
    catalog = client(lakekeeper)
    handle = catalog.register(NS, "old")
    catalog.rename(NS, "old", NS, "new")
    assert catalog.load(NS, "new").location == handle.location
    with pytest.raises(TableNotFound, match=r"^404 NoSuchGenericTableException: load iot\.old: the table does not exist "):
        catalog.load(NS, "old")


def test_mutations_carry_an_idempotency_key_and_reads_do_not(lakekeeper):
    catalog = client(lakekeeper)
    catalog.register(NS, "a")
    catalog.rename(NS, "a", NS, "b")
    catalog.drop(NS, "b")
    keys = {r.method: r.headers.get("idempotency-key") for r in lakekeeper.requests}
    assert all(UUID_RE.match(keys[m] or "") for m in ("POST", "DELETE"))
    assert all("idempotency-key" not in r.headers for r in lakekeeper.calls("GET"))
    assert len({r.headers["idempotency-key"] for r in lakekeeper.calls("POST")}) == 2


def test_a_lost_answer_is_replayed_not_created_twice(lakekeeper):
    lakekeeper.faults.reset(after=True, method="POST")  # the table is created, the answer lost
    handle = client(lakekeeper).register(NS, "t")
    assert handle.created  # the retry with the same key is answered 200 (Lakekeeper: a load of the table)
    posts = lakekeeper.calls("POST")
    assert len(posts) == 2 and posts[0].headers["idempotency-key"] == posts[1].headers["idempotency-key"]
    assert [p.status for p in posts] == [200, 200]  # acted (its answer reset), then the replay
    assert list(lakekeeper.warehouse.tables) == [(NS, "t")]


def test_request_in_progress_is_waited_out(lakekeeper):
    # The first attempt outlives the client's timeout; its retry finds it still running (409
    # RequestInProgress), waits and is then answered as a replay (200, a load of the table). Retries at
    # ~0.7, 1.3 and 2.5 s: the first lands well inside the 2 s the first attempt is in flight.
    lakekeeper.faults.delay(2.0, method="POST")
    catalog = client(lakekeeper, options=HttpOptions(timeout=0.4, max_retries=4, backoff=0.3, jitter=0))
    assert catalog.register(NS, "slow").created
    statuses = [r.status for r in lakekeeper.calls("POST")]
    assert 409 in statuses and statuses[-1] == 200
    assert len(lakekeeper.warehouse.tables) == 1


def test_503_with_retry_after_is_honoured(lakekeeper):
    catalog = client(lakekeeper)
    catalog.register(NS, "t")
    lakekeeper.faults.unavailable(times=2, retry_after="1")
    started = time.monotonic()
    assert catalog.load(NS, "t").location
    assert time.monotonic() - started >= 1.9  # waited as told, not FAST's 0.01 s backoff
    assert [r.status for r in lakekeeper.calls("GET", "/generic-tables/t")][-3:] == [503, 503, 200]


def test_429_is_retried_and_gives_up_with_the_servers_error(lakekeeper):
    catalog = client(lakekeeper)
    lakekeeper.faults.throttle(times=1)
    assert catalog.list_tables(NS) == []
    lakekeeper.faults.throttle(times=10)
    with pytest.raises(CatalogError) as err:
        catalog.list_tables(NS)
    assert (err.value.code, err.value.type) == (429, "TooManyRequests")
    assert len(lakekeeper.calls("GET")) == 2 + 1 + FAST.max_retries


def test_connection_reset_and_refused(lakekeeper):
    catalog = client(lakekeeper)
    catalog.register(NS, "t")
    lakekeeper.faults.reset(times=2, method="GET")
    assert catalog.load(NS, "t").location
    assert [r.status for r in lakekeeper.calls("GET", "/generic-tables/t")][-3:] == [0, 0, 200]
    dead = LakekeeperCatalog("http://127.0.0.1:9", lakekeeper.warehouse_id, options=FAST)
    with pytest.raises(CatalogError) as err:
        dead.load(NS, "t")
    assert "http://127.0.0.1:9" in str(err.value) and "refused" in str(err.value).lower()


def test_timeout_is_applied(lakekeeper):
    lakekeeper.faults.delay(1.5, method="GET")
    catalog = client(lakekeeper, options=HttpOptions(timeout=0.3, max_retries=0))
    with pytest.raises(CatalogError, match="timed out"):
        catalog.list_tables(NS)


def test_a_trickling_answer_is_cut_at_the_deadline(lakekeeper):
    """Each byte arrives well within the read timeout; the whole answer does not within the deadline."""
    catalog = client(lakekeeper, options=HttpOptions(timeout=5, max_retries=0, deadline=0.5))
    catalog.register(NS, "t")
    lakekeeper.faults.trickle(0.05, method="GET", path_contains="/generic-tables/t")
    started = time.monotonic()
    with pytest.raises(CatalogUnavailable, match="load iot.t: Lakekeeper at .* did not answer: answer not "
                                                 "complete within its deadline"):
        catalog.load(NS, "t")
    assert time.monotonic() - started < 2.5


def test_an_oversized_answer_is_refused(lakekeeper):
    lakekeeper.faults.oversize(MAX_ANSWER_BYTES, method="GET")
    with pytest.raises(CatalogUnavailable, match="answer larger than 8 MiB refused"):
        client(lakekeeper).list_tables(NS)
    assert client(lakekeeper).list_tables(NS) == []  # the next answer is read as usual


def test_an_answer_not_of_the_contracts_shape_is_named(lakekeeper):
    lakekeeper.faults.plain_text(status=200, text='{"identifiers": [{"name": "t"}]}', method="GET")
    with pytest.raises(CatalogError, match=r"list iot: unexpected answer from Lakekeeper "
                                           r"\(identifiers\.0\.namespace: Field required"):
        client(lakekeeper).list_tables(NS)


def test_errors_are_classified_once(lakekeeper):
    """One classification for every answer: not authenticated, unavailable (after retries), no answer."""
    revoked = client(lakekeeper)
    lakekeeper.revoke(lakekeeper.token)
    with pytest.raises(AccessDenied) as err:
        revoked.list_tables(NS)
    assert (err.value.code, err.value.type) == (401, "AuthenticationFailed")
    assert lakekeeper.token not in str(err.value)
    lakekeeper.accept(None)
    lakekeeper.faults.unavailable(times=10, retry_after=None)
    with pytest.raises(CatalogUnavailable) as err:
        client(lakekeeper).list_tables(NS)
    assert (err.value.code, err.value.type) == (503, "ServiceUnavailable")
    with pytest.raises(CatalogUnavailable, match="refused"):
        LakekeeperCatalog("http://127.0.0.1:9", lakekeeper.warehouse_id, options=FAST).list_tables(NS)


def test_the_catalog_closes_as_a_context_manager(lakekeeper):
    with client(lakekeeper) as catalog:
        catalog.list_tables(NS)
        pool = catalog._session.adapters["http://"].poolmanager
        assert len(pool.pools) == 1
    assert len(pool.pools) == 0


def test_plain_text_errors_are_tolerated(lakekeeper):
    lakekeeper.faults.plain_text(status=422, text="Failed to deserialize query string: pageToken")
    with pytest.raises(CatalogError) as err:
        client(lakekeeper).list_tables(NS)
    assert err.value.code == 422 and err.value.type == ""
    assert "Failed to deserialize query string" in str(err.value)


def test_location_already_taken_is_an_error_not_already_registered(lakekeeper):
    catalog = client(lakekeeper)
    first = catalog.register(NS, "first")
    with pytest.raises(CatalogError) as err:
        catalog.register(NS, "second", location=first.location + "/nested")
    assert (err.value.code, err.value.type) == (409, "LocationAlreadyTaken")
    assert UUID_RE.match(err.value.error_id)
    with pytest.raises(CatalogError, match="not a valid sublocation") as err:
        catalog.register(NS, "third", location="s3://elsewhere/x")
    assert err.value.type == "InvalidLocation"
    creates = len(lakekeeper.calls("POST", "/generic-tables"))
    with pytest.raises(CatalogError, match="already registered at"):
        catalog.register(NS, "first", location=lakekeeper.warehouse.base + "/other")
    assert len(lakekeeper.calls("POST", "/generic-tables")) == creates  # loaded first: no create sent


def test_register_loads_before_it_creates(lakekeeper):
    """An existing table is loaded, not created again: a principal that may write it needs no create."""
    catalog = client(lakekeeper)
    assert catalog.register(NS, "existing").created
    creates = len(lakekeeper.calls("POST", "/generic-tables"))
    again = catalog.register(NS, "existing")
    assert not again.created and len(lakekeeper.calls("POST", "/generic-tables")) == creates


def test_a_name_held_by_an_iceberg_table_is_not_already_registered(lakekeeper):
    lakekeeper.warehouse.iceberg_tables.add((NS, "metrics"))
    with pytest.raises(CatalogError, match="taken by an Iceberg table or view") as err:
        client(lakekeeper).register(NS, "metrics")
    assert err.value.type == "GenericTableAlreadyExists" and not isinstance(err.value, TableNotFound)


def test_errors_carry_type_message_code_and_error_id(lakekeeper):
    catalog = client(lakekeeper)
    with pytest.raises(TableNotFound) as err:
        catalog.load(NS, "missing")
    e = err.value
    assert (e.code, e.type) == (404, "NoSuchGenericTableException")
    assert "load iot.missing" in e.message and "does not exist" in e.message
    assert UUID_RE.match(e.error_id) and e.error_id in str(e)
    with pytest.raises(CatalogError) as err:
        catalog.list_tables(("nope",))
    assert (err.value.code, err.value.type) == (404, "NoSuchNamespaceException")
    assert not isinstance(err.value, TableNotFound)


def test_project_id_header(lakekeeper):
    project = str(uuid.uuid4())
    client(lakekeeper, project_id=project).list_tables(NS)
    client(lakekeeper).list_tables(NS)
    first, second = lakekeeper.calls("GET")
    assert first.headers["x-project-id"] == project and "x-project-id" not in second.headers


def test_from_settings(lakekeeper):
    catalog = LakekeeperCatalog.from_settings(settings_for(lakekeeper, WAREHOUSE_ID=lakekeeper.warehouse_name,
                                                           PROJECT_ID="p1"))
    assert catalog.register(NS, "t").created
    assert catalog.warehouse_id == lakekeeper.warehouse_id
    assert lakekeeper.calls("POST")[0].headers["x-project-id"] == "p1"


def test_vended_credentials_are_scoped_to_the_table_prefix(make_lakekeeper, moto_strict):
    lakekeeper = make_lakekeeper(s3=moto_strict)
    handle = client(lakekeeper).register(NS, "scoped")
    s3 = boto3.client("s3", **to_s3a(handle.storage).boto3())
    bucket, key = s3_key(handle.location)
    s3.put_object(Bucket=bucket, Key=f"{key}/ok.json", Body=b"[]")
    with pytest.raises(ClientError) as err:
        s3.put_object(Bucket=bucket, Key="outside.json", Body=b"[]")
    assert err.value.response["Error"]["Code"] == "AccessDenied"
    lakekeeper.faults.bogus_credentials = True
    bogus = client(lakekeeper).load(NS, "scoped")
    with pytest.raises(ClientError) as err:
        boto3.client("s3", **to_s3a(bogus.storage).boto3()).put_object(
            Bucket=bucket, Key=f"{key}/x.json", Body=b"[]")
    assert err.value.response["Error"]["Code"] == "InvalidAccessKeyId"


def test_the_endpoint_override_reaches_storage_the_vended_endpoint_cannot(lakekeeper, moto_server):
    lakekeeper.warehouse.vended_endpoint = "http://minio:9000"  # Lakekeeper's own view
    handle = client(lakekeeper).register(NS, "t")
    assert to_s3a(handle.storage).hadoop["fs.s3a.endpoint"] == "http://minio:9000"
    s3 = boto3.client("s3", **to_s3a(handle.storage, endpoint_override=moto_server.url).boto3())
    bucket, key = s3_key(handle.location)
    s3.put_object(Bucket=bucket, Key=f"{key}/a.json", Body=b"[]")


def test_the_stand_in_catches_contract_violations(lakekeeper):
    """The contract check can fail: a request the OpenAPI document forbids is recorded."""
    response = requests.post(f"{lakekeeper.url}/lakekeeper/v1/{lakekeeper.warehouse_id}/namespaces/iot"
                             "/generic-tables", json={"name": "no-format"},
                             headers={"Authorization": f"Bearer {lakekeeper.token}"})
    assert (response.status_code, response.headers["Content-Type"]) == (422, "text/plain; charset=utf-8")
    assert response.text.endswith("missing field `format` at line 1 column 21")  # as Lakekeeper (serde) says
    assert len(lakekeeper.violations) == 1 and "request POST" in lakekeeper.violations[0]
    lakekeeper.violations.clear()
