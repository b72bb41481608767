"""A user's own schema through ``lakeflow compact`` (real processes, embedded catalog): a nested schema
compacted and queried; an evolution planned, then applied in the commit that writes the data, old and
new records compacting together; two compactors racing an evolution (one applies it, the other waits
its turn or is refused, nothing twice); a refused change leaving the table and the raw files as they were.
The same evolution through Apache's Iceberg REST server on S3: tests/integration/test_compaction_s3.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lakeflow.schema.declared import parse_schema
from lakeflow.schema.examples import example
from tests.support.fixtures_compaction import LakeflowHome, json_array, make_home
from tests.unit.test_schema import DEVICE

TARGET = "sensor-readings-compacted"


def lakeflow(home: LakeflowHome, schema: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lakeflow.cli", *args], env={**home.env, "TABLE_SCHEMA": str(schema)},
                          cwd=home.home.parent, capture_output=True, text=True, timeout=300)


def declare(tmp_path: Path, name: str, doc: dict) -> Path:
    path = tmp_path / f"{name}.schema.json"
    path.write_text(json.dumps(doc))
    return path


def v2_of(doc: dict) -> dict:
    """A firmware update: gps gains alt, accel's floats become doubles, a new top-level field."""
    new = json.loads(json.dumps(doc))
    new["$defs"]["position"]["properties"]["alt"] = {"type": "number"}
    new["properties"]["accel"]["items"]["x-iceberg-type"] = "double"
    new["properties"]["rssi"] = {"type": "integer"}
    return new


@pytest.fixture
def home(tmp_path: Path) -> LakeflowHome:
    return make_home(tmp_path)


def records(doc: dict, start: int, count: int, **extra: object) -> list[dict]:
    schema = parse_schema(json.dumps(doc))
    return [example(schema, n) | extra for n in range(start, start + count)]


def test_a_nested_user_schema_is_compacted_and_queried(home: LakeflowHome, tmp_path: Path) -> None:
    v1 = declare(tmp_path, "v1", DEVICE)
    (home.raw / "part-a-0-0.json").write_text(json_array(records(DEVICE, 0, 30)))
    (home.raw / "part-a-0-1.json").write_text(json_array([{**records(DEVICE, 30, 1)[0], "seq": "x"}]))
    done = lakeflow(home, v1, "compact")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows       31 in → 30 out (0 duplicates, 1 quarantined records)" in done.stdout
    query = lakeflow(home, v1, "query", "--format", "json")
    assert query.returncode == 0, query.stderr
    assert sum(r["records"] for r in json.loads(query.stdout)) == 30 and "device_id" in json.loads(query.stdout)[0]
    nested = lakeflow(home, v1, "query", "--format", "json",
                      "SELECT gps.lat AS lat, accel[1] AS x, battery, tags['k0'] AS k0 FROM readings WHERE seq = 2")
    assert json.loads(nested.stdout) == [{"lat": 2.5, "x": 2.5, "battery": "2.55", "k0": "tags-2"}]  # a decimal: exact
    shown = lakeflow(home, v1, "schema", "show")
    assert "gps: struct<lat: double, lon: double>" in shown.stdout and "partitioning day, bucket[4](device_id)" in shown.stdout


def test_an_evolution_is_applied_in_the_commit_that_writes_the_data(home: LakeflowHome, tmp_path: Path) -> None:
    v1, v2 = declare(tmp_path, "v1", DEVICE), declare(tmp_path, "v2", v2_of(DEVICE))
    (home.raw / "part-a-0-0.json").write_text(json_array(records(DEVICE, 0, 10)))
    assert lakeflow(home, v1, "compact").returncode == 0
    before = home.iceberg_table(TARGET)
    ids = {f.name: f.field_id for f in before.schema().fields}

    plan = lakeflow(home, v2, "schema", "plan", "--json")
    assert plan.returncode == 0, plan.stderr
    assert [(c["action"], c["field"], c["change"]) for c in json.loads(plan.stdout)["changes"]] == [
        ("apply", "gps.alt", "add double"), ("apply", "accel[]", "float → double"), ("apply", "rssi", "add long")]
    assert home.iceberg_table(TARGET).schema() == before.schema()  # planning changes nothing

    # in the same window: records of the old firmware and of the new one
    (home.raw / "part-b-0-0.json").write_text(json_array(records(DEVICE, 10, 5)))
    newer = records(v2_of(DEVICE), 15, 5, rssi=-70)
    for r in newer:
        r["gps"]["alt"] = 12.5
    (home.raw / "part-b-0-1.json").write_text(json_array(newer))
    done = lakeflow(home, v2, "compact")
    assert done.returncode == 0, done.stderr[-3000:]
    table = home.iceberg_table(TARGET)
    assert table.metadata.current_snapshot().summary["lakeflow.rows-in"] == "10"
    assert len(table.metadata.schemas) == 2  # one schema change, in the data commit (no separate snapshot)
    after = {f.name: f.field_id for f in table.schema().fields}
    assert {k: after[k] for k in ids} == ids and str(table.schema().find_field("accel.element").field_type) == "double"
    rows = {r["seq"]: r for r in table.scan().to_arrow().to_pylist()}
    assert len(rows) == 20
    assert rows[3]["rssi"] is None and rows[3]["gps"]["alt"] is None      # compacted before the change
    assert rows[12]["rssi"] is None and rows[17]["rssi"] == -70 and rows[17]["gps"]["alt"] == 12.5


def test_two_compactors_racing_an_evolution_apply_it_once(home: LakeflowHome, tmp_path: Path) -> None:
    v1, v2 = declare(tmp_path, "v1", DEVICE), declare(tmp_path, "v2", v2_of(DEVICE))
    (home.raw / "part-a-0-0.json").write_text(json_array(records(DEVICE, 0, 10)))
    assert lakeflow(home, v1, "compact").returncode == 0
    (home.raw / "part-b-0-0.json").write_text(json_array(records(v2_of(DEVICE), 10, 10, rssi=-60)))
    env = {**home.env, "TABLE_SCHEMA": str(v2)}
    procs = [subprocess.Popen([sys.executable, "-m", "lakeflow.cli", "compact"], env=env, cwd=home.home.parent,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in outcomes)
    assert codes in ([0, 0], [0, 3]), outcomes  # 3: the other held the table's lease
    if codes == [0, 3]:
        assert "refused: the Iceberg table" in next(err for code, err in outcomes if code == 3) or \
            "lease" in next(err for code, err in outcomes if code == 3)
    table = home.iceberg_table(TARGET)
    assert len(table.metadata.schemas) == 2 and [f.name for f in table.schema().fields].count("rssi") == 1
    seqs = [r["seq"] for r in table.scan().to_arrow().to_pylist()]
    assert sorted(seqs) == list(range(20))


def test_a_refused_change_leaves_the_table_and_the_raw_files_as_they_were(home: LakeflowHome, tmp_path: Path) -> None:
    v1 = declare(tmp_path, "v1", DEVICE)
    (home.raw / "part-a-0-0.json").write_text(json_array(records(DEVICE, 0, 10)))
    assert lakeflow(home, v1, "compact").returncode == 0
    bad = json.loads(json.dumps(DEVICE))
    bad["properties"]["seq"] = {"type": "string"}
    bad["properties"]["gps"] = {"type": "array", "items": {"type": "number"}}
    v_bad = declare(tmp_path, "bad", bad)
    (home.raw / "part-b-0-0.json").write_text(json_array(records(DEVICE, 10, 5)))
    files = sorted((p.relative_to(home.home), p.stat().st_mtime_ns) for p in home.home.rglob("*") if p.is_file()
                   and "lineage" not in p.parts and p.name != ".catalog.lock")
    table = home.iceberg_table(TARGET)
    plan = lakeflow(home, v_bad, "schema", "plan")
    assert plan.returncode == 2 and "refuse   seq: long → string" in plan.stdout
    done = lakeflow(home, v_bad, "compact")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "lakeflow compact: schema change refused, nothing committed: seq: long → string: not a promotion the "
        "Iceberg spec allows (int → long, float → double, decimal(P,S) → decimal(P',S), P' > P) "
        "(and 1 more: lakeflow schema plan lists them)")
    after = home.iceberg_table(TARGET)
    assert after.metadata.current_snapshot_id == table.metadata.current_snapshot_id
    assert after.schema() == table.schema()
    left = sorted((p.relative_to(home.home), p.stat().st_mtime_ns) for p in home.home.rglob("*") if p.is_file()
                  and "lineage" not in p.parts and "_lakeflow" not in p.parts and p.name != ".catalog.lock")
    assert left == [f for f in files if "_lakeflow" not in f[0].parts]  # raw files and table files untouched
