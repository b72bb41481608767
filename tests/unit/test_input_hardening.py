"""Bad input is refused early with a message naming the thing and what is expected: table and
namespace names, locations (no way out of the local warehouse, no odd schemes, also not from a
misbehaving Lakekeeper), URLs and secrets in the environment (never echoed).

Unit tests: they start no process. The real-process tests: tests/integration/test_input_hardening.py."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from lakeflow.catalog.base import CatalogError
from lakeflow.catalog.local import LocalCatalog
from lakeflow.catalog.locations import check_location
from lakeflow.settings import SettingsError, load_settings


def settings_error(**env: str) -> str:
    with pytest.raises(SettingsError) as err:
        load_settings({"LAKEFLOW_ENV_FILE": os.devnull, **env})
    return str(err.value)


@pytest.mark.parametrize("name, value", [
    ("TABLE", ".."), ("TABLE", "../../etc"), ("TABLE", "a/b"), ("TABLE", "/etc"), ("TABLE", "%2e%2e"),
    ("TABLE", "x\ny"), ("NAMESPACE", "iot..raw"), ("NAMESPACE", "../iot"), ("NAMESPACE", "iot/raw"),
    ("NAMESPACE", ".iot"),
])
def test_names_that_could_leave_the_warehouse_are_refused(name, value):
    message = settings_error(**{name: value})
    assert f"{name}={value!r}: expected" in message


@pytest.mark.parametrize("name, value, expected", [
    ("LAKEKEEPER", "ftp://catalog:8181", "expected an http(s) URL"),
    ("LAKEKEEPER", "file:///etc/passwd", "expected an http(s) URL"),
    ("LAKEKEEPER", "http://catalog:8181/?warehouse=x", "expected a base URL without '?' or '#'"),
    ("LAKEKEEPER", "http://catalog:99999", "expected an http(s) URL"),
    ("S3_ENDPOINT", "s3://minio:9000", "expected an http(s) URL"),
    ("OAUTH_TOKEN_URL", "javascript:alert(1)", "expected an http(s) URL"),
])
def test_urls_must_be_http(name, value, expected):
    env = {name: value, "WAREHOUSE_ID": "demo"}
    if name == "OAUTH_TOKEN_URL":
        env.update(OAUTH_CLIENT_ID="c", OAUTH_CLIENT_SECRET="s")
    message = settings_error(**env)
    assert f"{name}={value!r}: {expected}" in message


@pytest.mark.parametrize("name", ["LAKEKEEPER", "S3_ENDPOINT", "OAUTH_TOKEN_URL"])
def test_credentials_inside_a_url_are_refused_without_echoing_them(name):
    env = {name: "https://admin:pa55w0rd-in-url@catalog.example:8181", "WAREHOUSE_ID": "demo"}
    if name == "OAUTH_TOKEN_URL":
        env.update(OAUTH_CLIENT_ID="c", OAUTH_CLIENT_SECRET="s")
    message = settings_error(**env)
    assert f"{name}: credentials inside the URL are not allowed" in message
    assert "pa55w0rd" not in message


@pytest.mark.parametrize("name, value", [
    ("TOKEN", "Zq9vK Xw7pL"), ("TOKEN", "Zq9vK\r\nX-Injected: Xw7pL"), ("OAUTH_CLIENT_SECRET", "Zq9vK\tXw7pL"),
])
def test_secrets_must_be_one_token_and_are_never_echoed(name, value):
    env = {"LAKEKEEPER": "http://catalog:8181", "WAREHOUSE_ID": "demo", name: value}
    if name.startswith("OAUTH"):
        env.update(OAUTH_TOKEN_URL="http://idp/token", OAUTH_CLIENT_ID="lakeflow")
    message = settings_error(**env)
    assert f"{name}: expected one token without spaces or control characters" in message
    for part in value.split():
        assert part not in message


def test_header_values_must_be_one_line():
    message = settings_error(LAKEKEEPER="http://catalog:8181", WAREHOUSE_ID="demo", TOKEN="t",
                             PROJECT_ID="p\r\nX-Injected: 1")
    assert "PROJECT_ID='p\\r\\nX-Injected: 1': expected one line without control characters" in message


@pytest.fixture
def catalog(tmp_path: Path) -> LocalCatalog:
    return LocalCatalog(tmp_path / "home")


def outside(tmp_path: Path) -> Path:
    return tmp_path / "outside"


@pytest.mark.parametrize("location, expected", [
    ("{warehouse}/../../outside", "'.' and '..' path segments are not allowed"),
    ("{warehouse}/%2e%2e/%2E%2E/outside", "'.' and '..' path segments are not allowed"),
    ("{warehouse}/./iot/t", "'.' and '..' path segments are not allowed"),
    ("{tmp}/outside", "not a file path"),
    ("outside", "not a file path"),
    ("C:\\warehouse\\t", "not a file path"),
    ("s3://bucket/iot/t", "scheme 's3' is not supported: expected file://"),
    ("hdfs://namenode/iot/t", "scheme 'hdfs' is not supported"),
    ("javascript:alert(1)", "scheme 'javascript' is not supported"),
    ("file://otherhost{warehouse_path}/t", "a file:// location names no host"),
    ("{warehouse}/t?x=1", "'?', '#' and '\\' are not allowed"),
    ("{warehouse}/t\n", "without control characters"),
    ("file:///{tmp}/outside", "lies outside the warehouse"),
])
def test_local_locations_cannot_leave_the_warehouse(catalog, tmp_path, location, expected):
    warehouse = catalog.warehouse_dir
    location = location.format(warehouse=warehouse.as_uri(), warehouse_path=warehouse, tmp=tmp_path)
    with pytest.raises(CatalogError, match=re.escape(expected)) as err:
        catalog.register(("iot",), "t", location=location)
    assert err.value.type == "InvalidLocation" and err.value.code == 400
    assert warehouse.as_uri() in str(err.value)  # says where locations may go
    assert not outside(tmp_path).exists()
    with pytest.raises(CatalogError):
        catalog.load(("iot",), "t")  # nothing registered


def test_a_symlink_out_of_the_warehouse_is_outside(catalog, tmp_path):
    outside(tmp_path).mkdir()
    catalog.warehouse_dir.mkdir(parents=True)
    (catalog.warehouse_dir / "link").symlink_to(outside(tmp_path))
    with pytest.raises(CatalogError, match="lies outside the warehouse"):
        catalog.register(("iot",), "t", location=(catalog.warehouse_dir / "link" / "t").as_uri())
    assert list(outside(tmp_path).iterdir()) == []


def test_good_local_locations_still_work(catalog, tmp_path):
    inside = catalog.warehouse_dir / "custom place" / "t"
    handle = catalog.register(("iot",), "t", location=inside.as_uri() + "/")
    assert handle.location == inside.as_uri() and inside.is_dir()  # %20 decoded, no literal '%20' folder
    assert not (catalog.warehouse_dir / "custom%20place").exists()
    assert check_location("file://localhost/w/t", ("file",)) == "file://localhost/w/t"
