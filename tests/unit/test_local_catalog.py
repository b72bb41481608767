"""The embedded local catalog: the same protocol as Lakekeeper, on a file:// warehouse."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

import pytest

from lakeflow.catalog import open_catalog
from lakeflow.catalog.base import CatalogError, TableNotFound
from lakeflow.catalog.local import LocalCatalog
from lakeflow.settings import load_settings

NS = ("iot", "raw")


@pytest.fixture
def catalog(tmp_path) -> LocalCatalog:
    return LocalCatalog(tmp_path / "home")


def test_register_is_idempotent_and_creates_the_directory(catalog):
    first = catalog.register(NS, "readings", properties={"owner": "iot"})
    again = catalog.register(NS, "readings")
    assert first.created and not again.created
    assert first.location == again.location
    assert first.location.startswith((catalog.warehouse_dir.as_uri()))
    assert Path(urlparse(first.location).path).is_dir()
    assert again.properties == {"owner": "iot"} and again.format == "dataset"
    assert str(again.ident) == "iot.raw.readings"


def test_load_list_and_missing_tables(catalog):
    catalog.register(NS, "b")
    catalog.register(NS, "a")
    catalog.register(("other",), "c")
    assert [t.name for t in catalog.list_tables(NS)] == ["a", "b"]
    assert catalog.load(NS, "a").storage is not None
    with pytest.raises(TableNotFound) as err:
        catalog.load(NS, "missing")
    assert err.value.type == "NoSuchGenericTableException" and err.value.code == 404


def test_drop_keeps_data_unless_purged(catalog):
    kept = Path(urlparse(catalog.register(NS, "kept").location).path)
    (kept / "part-0.json").write_text("[]")
    catalog.drop(NS, "kept")
    assert (kept / "part-0.json").exists()
    purged = Path(urlparse(catalog.register(NS, "purged").location).path)
    catalog.drop(NS, "purged", purge=True)
    assert not purged.exists()
    with pytest.raises(TableNotFound):
        catalog.drop(NS, "purged")


def test_locations_must_not_overlap_nor_leave_the_warehouse(catalog):
    parent = catalog.register(NS, "parent")
    with pytest.raises(CatalogError) as err:
        catalog.register(NS, "child", location=parent.location + "/child")
    assert err.value.type == "LocationAlreadyTaken" and err.value.code == 409
    with pytest.raises(CatalogError, match="outside the warehouse") as err:
        catalog.register(NS, "escape", location="file:///tmp/elsewhere")
    assert err.value.type == "InvalidLocation"
    with pytest.raises(CatalogError, match="expected a file:// URI"):
        catalog.register(NS, "s3", location="s3://bucket/x")


def test_bad_names_are_refused(catalog):
    with pytest.raises(CatalogError, match="invalid name 'a b'"):
        catalog.register(("a b",), "t")


def test_concurrent_registration_creates_once(catalog):
    with ThreadPoolExecutor(8) as pool:
        handles = list(pool.map(lambda _: catalog.register(NS, "raced"), range(8)))
    assert sum(h.created for h in handles) == 1
    assert len({h.location for h in handles}) == 1


def test_open_catalog_picks_local_without_lakekeeper(tmp_path):
    settings = load_settings({"LAKEFLOW_HOME": str(tmp_path)}, Path("/nonexistent"))
    catalog = open_catalog(settings)
    assert catalog.name == "local"
    assert catalog.register(settings.namespace, settings.table).location.startswith(tmp_path.as_uri())
