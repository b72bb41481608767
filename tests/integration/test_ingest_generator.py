"""The synthetic source on a user's nested schema (TABLE_SCHEMA): a bounded local run of the job writes
records that fit the schema's record contract (lakeflow/schema/records.py), each once, fields in
declared order, the SQL's values as the Python twin makes them.

The unit tests (no process): tests/unit/test_ingest_generator.py."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from lakeflow.schema import load_schema
from lakeflow.schema.records import RecordContract
from tests.integration.test_ingest_flink import JOB, Run, job_env
from tests.support.envs import INGEST_PY
from tests.support.sink_layout import assert_sink_path, files_under
from tests.unit.test_ingest_generator import VIBRATION

pytestmark = pytest.mark.slow


def test_synthetic_records_of_a_nested_user_schema_fit_its_contract(tmp_path: Path) -> None:
    declared = tmp_path / "vibration.schema.json"
    properties = {**VIBRATION["properties"], "device_id": {"type": "string"}}  # unhinted key field: the devices
    declared.write_text(json.dumps({**VIBRATION, "properties": properties}))
    schema = load_schema(declared)
    started = time.time()
    proc = subprocess.run([INGEST_PY, str(JOB), "--parallelism", "2"], cwd=tmp_path, capture_output=True, text=True,
                          env=job_env(tmp_path, TABLE_SCHEMA=str(declared), NUM_RECORDS="600"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = Run(tmp_path, proc.stdout, proc.stderr, started)
    records = []
    for rel, path in files_under(run.table_dir).items():
        assert not rel.rsplit("/", 1)[-1].startswith("."), f"left in progress: {rel}"
        assert_sink_path(rel, started)
        records += json.loads(path.read_text(), parse_float=Decimal)
    assert sorted(r["counter"] for r in records) == list(range(600))  # the key field: the tick's seq
    contract = RecordContract(schema.contract())
    for r in records:
        assert list(r) == list(schema.names)
        contract.check(r)
        device = r["counter"] % 5
        assert r["device_id"] == f"device_id-{device + 1:03d}" and r["site"] == ("north", "süd")[device % 2]
        at = datetime.fromisoformat(r["measured_at"].replace("Z", "+00:00"))
        assert abs(at.timestamp() - started) < 600 and r["measured_at"].endswith("Z")
        assert len(r["accel"]) == 2 and len(r["samples"]) == 3 and set(r["tags"]) == {"key1", "key2"}
        assert r["day"] == r["measured_at"][:10] and r["local"] == r["measured_at"][:-1]
        assert Decimal("52.0") <= r["gps"]["lat"] <= Decimal("53.0") and r["gps"]["lat"].as_tuple().exponent >= -5
        assert 0 <= r["battery"] <= 100 and r["battery"].as_tuple().exponent >= -1
    assert "Wrote " in proc.stdout and ", 600 readings" in proc.stdout
