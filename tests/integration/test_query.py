"""``lakeflow query``: SQL over a real compacted table — raw part files compacted by ``lakeflow compact``
(arrow engine, embedded catalog) — checked against the readings written; the time filter prunes
``ts_day`` partitions (pyiceberg's plan); error cases; and one run against the Iceberg REST server.

The unit tests (no process): tests/unit/test_query.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures_compaction import LakeflowHome
from tests.support.iceberg_rest import WAREHOUSE_NAME, IcebergRestServer
from tests.unit.test_query import DAY_MS, ROWS, START, cells, home  # noqa: F401 (fixtures, constants)

LAKEFLOW = Path(sys.executable).parent / "lakeflow"


def run_query(home: LakeflowHome, *args: str) -> subprocess.CompletedProcess:
    """``lakeflow query`` as a user runs it: the installed script, in a process of its own."""
    return subprocess.run([str(LAKEFLOW), "query", *args], env=home.env, cwd=home.home.parent,
                          text=True, capture_output=True, timeout=120)


def test_default_query_summarises_each_sensor(home: LakeflowHome) -> None:
    done = run_query(home)
    assert done.returncode == 0, done.stderr
    rows = [cells(line) for line in done.stdout.splitlines() if "sensor-0" in line]
    assert [(r[0], r[1]) for r in rows] == [(f"sensor-00{i}", "120") for i in range(1, 6)], done.stdout
    assert "2025-11-21 12:00:00+00" in done.stdout and "2025-11-23 13:55:00+00" in done.stdout


@pytest.mark.slow
def test_query_through_the_iceberg_rest_catalog(iceberg_rest: IcebergRestServer, tmp_path: Path) -> None:
    """Lakekeeper's route: the table on moto S3 behind the REST catalog, read with the vended keys;
    neither the token nor the keys appear in the output."""
    from lakeflow.compaction.commit import commit
    from lakeflow.schema import load_schema
    from tests.integration.test_iceberg_rest import _put_parquet, _settings, _target

    settings = _settings(iceberg_rest, tmp_path)
    target = _target(iceberg_rest, settings, "query-rest", "s3://raw-bucket/raw/query")
    data = _put_parquet(target, "f1", range(7))
    commit(target, [data], "s3://raw-bucket/raw/query/_lakeflow/l1.json.gz", "s3://raw-bucket/raw/query", "run-1", {},
           load_schema())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEKEEPER", "WAREHOUSE", "TOKEN", "OAUTH_",
                                                                      "COMPACT_", "LAKEFLOW_", "AWS_"))}
    env.update({"LAKEKEEPER": iceberg_rest.url, "WAREHOUSE_ID": WAREHOUSE_NAME, "TOKEN": "token-not-to-print",
                "S3_ENDPOINT": iceberg_rest.s3.url, "AWS_REGION": iceberg_rest.s3.region,
                "LAKEFLOW_HOME": str(tmp_path), "LAKEFLOW_ENV_FILE": os.devnull, "NAMESPACE": "iot",
                "TABLE": "query-raw", "COMPACT_TABLE": "query-rest"})
    sql = "SELECT count(*) AS n, sum(seq) AS s FROM readings"
    done = subprocess.run([str(LAKEFLOW), "query", "--format", "csv", sql], env=env, cwd=tmp_path, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["n,s", "7,21"]
    for secret in ("token-not-to-print", iceberg_rest.secret_key):
        assert secret not in done.stdout + done.stderr
