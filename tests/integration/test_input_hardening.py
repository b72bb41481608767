"""Bad input is refused early with a message naming the thing and what is expected: table and
namespace names, locations (no way out of the local warehouse, no odd schemes, also not from a
misbehaving Lakekeeper), URLs and secrets in the environment (never echoed).

The unit tests (no process): tests/unit/test_input_hardening.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakeflow.catalog.base import CatalogError
from lakeflow.catalog.lakekeeper import LakekeeperCatalog
from tests.support.fixtures_lakekeeper import settings_for
from tests.unit.test_input_hardening import catalog  # noqa: F401 (fixtures, constants)

LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")


def test_cli_refuses_a_traversing_table_name_and_location(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "LAKEFLOW_HOME": str(tmp_path / "home"), "LAKEFLOW_ENV_FILE": os.devnull}
    done = subprocess.run([LAKEFLOW, "register", "--table", "../../escaped"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "TABLE='../../escaped': expected letters, digits" in done.stderr
    done = subprocess.run([LAKEFLOW, "register", "--location", "file:///etc/lakeflow"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "400 InvalidLocation: location file:///etc/lakeflow lies outside the warehouse file://" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "escaped").exists()


@pytest.mark.parametrize("location, expected", [
    ("/data/iot", "not a file path"),
    ("file:///etc/iot", "scheme 'file' is not supported: expected s3:// or s3a://"),
    ("s3://bucket/warehouse/../other-table", "'.' and '..' path segments"),
    ("s3:///no-bucket", "expected s3://<bucket>/<path>"),
])
def test_lakekeeper_register_checks_the_location_before_sending(lakekeeper, location, expected):
    catalog = LakekeeperCatalog.from_settings(settings_for(lakekeeper))
    with pytest.raises(CatalogError, match=expected) as err:
        catalog.register(("iot",), "t", location=location)
    assert err.value.type == "InvalidLocation"
    assert lakekeeper.calls("POST") == []


def test_dot_table_names_never_reach_the_server(lakekeeper):
    catalog = LakekeeperCatalog.from_settings(settings_for(lakekeeper))
    for name in (".", ".."):
        with pytest.raises(CatalogError, match="expected a name"):
            catalog.load(("iot",), name)
    assert lakekeeper.calls() == []


@pytest.mark.parametrize("served", ["file:///etc", "s3://bucket/warehouse/%2e%2e/other", "/var/data"])
def test_a_location_lakekeeper_answers_is_checked_too(lakekeeper, served):
    catalog = LakekeeperCatalog.from_settings(settings_for(lakekeeper))
    catalog.register(("iot",), "t")
    lakekeeper.warehouse.tables[(("iot",), "t")].location = served  # a misbehaving server
    with pytest.raises(CatalogError, match="Lakekeeper's location for iot.t") as err:
        catalog.load(("iot",), "t")
    assert err.value.type == "InvalidLocation"
