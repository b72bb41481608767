"""The synthetic source on a user's nested schema (TABLE_SCHEMA): ``SensorRecords`` on the JVM makes the
records its Python twin makes (``Generator.record``), every kind of field and hint; a bounded local run of
the job writes records that fit the schema's record contract (lakeflow/schema/records.py), each once,
fields in declared order.

The unit tests (no process): tests/unit/test_ingest_generator.py."""

from __future__ import annotations

import json
import random
import subprocess
import textwrap
import time
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from lakeflow.ingest.sensors import Generator
from lakeflow.schema import load_schema
from lakeflow.schema.records import RecordContract
from tests.integration.test_ingest_flink import JOB, Run, job_env
from tests.support.envs import INGEST_PY
from tests.support.sink_layout import assert_sink_path, files_under
from tests.unit.test_ingest_generator import T0, VIBRATION, vibration

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

# Beside the vibration sensor's fields: the hints and kinds it has none of
MORE_FIELDS = {
    "ratio": {"type": "number", "x-lakeflow-generate": {"kind": "per-device", "values": [1.5, 2.25, -0.125]}},
    "ratio32": {"type": "number", "x-iceberg-type": "float", "x-lakeflow-generate": {"kind": "per-device",
                                                                                    "values": [0.1, 7]}},
    "open": {"type": "boolean", "x-lakeflow-generate": {"kind": "per-device", "values": [True, False, False]}},
    "price": {"type": "number", "x-iceberg-type": "decimal(7,2)", "x-lakeflow-generate": {"kind": "per-device",
                                                                                          "values": [19.5, 3]}},
    "steps": {"type": "integer", "x-lakeflow-generate": {"kind": "daily-cycle", "low": -40.0, "spread": 90.0,
                                                         "prime": 7, "amplitude": 12.5}},
    "load": {"type": "number", "x-lakeflow-generate": {"kind": "daily-cycle", "low": 5.0, "amplitude": -2.0,
                                                       "min": 3.5, "max": 6.5, "places": 3}},
    "serial": {"type": "string", "maxLength": 2, "x-lakeflow-generate": {"kind": "sequence"}},
    "run": {"type": "string", "maxLength": 3, "x-lakeflow-generate": {"kind": "run-id"}},
    "at_ms": {"type": "integer", "x-lakeflow-generate": {"kind": "event-time"}},
    "unit": {"type": "integer", "x-iceberg-type": "int", "x-lakeflow-generate": {"kind": "device"}},
}


class _Centre(random.Random):
    """A twin's random source at the middle of its range: no noise, every coin false."""

    def random(self) -> float:
        return 0.5


def _same(spec: dict, made, twin, path: str = "") -> None:
    """``made`` (the JVM's) is ``twin`` (Python's, noise-free): exactly, a number within its noise and last place."""
    if "object" in spec:
        assert list(made) == list(twin), path
        for key, member in spec["object"]:
            _same(member, made[json.loads(key)], twin[json.loads(key)], f"{path}.{json.loads(key)}")
    elif "array" in spec:
        assert len(made) == len(twin), path
        for i, item in enumerate(spec["array"]):
            _same(item, made[i], twin[i], f"{path}[{i}]")
    elif spec["make"] == "coin":
        assert isinstance(made, bool), path
    elif spec["kind"] in ("double", "float", "decimal") or spec.get("noise"):
        place = 10 ** -spec.get("scale", 0)
        assert abs(Decimal(str(made)) - Decimal(str(twin))) <= Decimal(spec.get("noise", 0) / 2 + place), (path, made, twin)
        assert Decimal(str(made)).as_tuple().exponent >= -spec.get("scale", 0), (path, made)
    else:
        assert made == twin and type(made) is type(twin), (path, made, twin)


def test_the_jvms_records_are_the_python_twins_of_every_kind_and_hint(tmp_path: Path) -> None:
    schema = vibration(**MORE_FIELDS)
    generator = Generator(schema, 7, "run-42")
    ticks = [(seq, T0 + seq * 21_013) for seq in range(0, 2400, 40)]  # half a day; seq past 99: cut to maxLength 2
    script = textwrap.dedent("""
        import json, os, sys
        from pyflink.java_gateway import get_gateway
        from pyflink.util.java_utils import add_jars_to_context_class_loader
        from lakeflow.ingest.helpers_jar import jar_path
        spec, sensors, ticks = json.loads(sys.stdin.read())
        answers = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)  # whatever PyFlink prints goes to stderr
        add_jars_to_context_class_loader([jar_path().as_uri()])
        records = get_gateway().jvm.lakeflow.flink.SensorRecords(spec, sensors)
        answers.write(json.dumps([records.record(seq, at) for seq, at in ticks]))
        answers.flush()
    """)
    proc = subprocess.run([INGEST_PY, "-c", script], input=json.dumps([generator.spec(), 7, ticks]), cwd=ROOT,
                          env={**job_env(tmp_path), "FLINK_LOG_DIR": str(tmp_path)}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    made = json.loads(proc.stdout)
    spec, contract = json.loads(generator.spec()), RecordContract(schema.contract())
    for (seq, at), text in zip(ticks, made, strict=True):
        record = json.loads(text, parse_float=Decimal)
        contract.check(record)
        _same(spec, record, generator.record(seq, at, _Centre()))
    assert {json.loads(t)["open"] for t in made} == {True, False} and json.loads(made[-1])["serial"] == "23"


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
