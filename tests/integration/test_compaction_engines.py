"""The two compaction engines on the same raw files make the same table: the ``arrow`` engine (one task
in the driver) and the ``spark`` engine (tasks in Spark's Python workers, shares cut small here so that
duplicates meet across tasks) — per file what it held, the same bad records with the same reasons, the
same rows in the same partitions, the same duplicates dropped (in the batch and against the table's
files), the same undeclared fields counted. For lakeflow's default schema and for a nested user schema
(structs, lists, a map, a decimal, timestamps, booleans, nulls).

Spark runs in this process through PySpark's launcher (as ``lakeflow compact`` runs it): one local[2]
session for the module.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeflow.compaction import launch
from lakeflow.compaction.arrow.engine import ArrowEngine
from lakeflow.compaction.engine import Compacted, Engine, WritePlan
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.naming import records_dir
from lakeflow.compaction.parse import EMPTY, MALFORMED
from lakeflow.compaction.rows import Writer
from lakeflow.schema import load_schema
from lakeflow.schema.arrow import record_schema
from lakeflow.schema.declared import parse_schema
from lakeflow.schema.examples import example
from lakeflow.schema.model import TableSchema
from tests.support.fixtures_compaction import json_array, readings
from tests.unit.test_schema import DEVICE

DAY = 1763683200000              # 2025-11-21T00:00:00Z
NEXT_DAY = DAY + 86_400_000
DEFAULT = load_schema()
NESTED = parse_schema(json.dumps(DEVICE))


@dataclass(frozen=True)
class Case:
    rel: str
    content: bytes
    records: int = 0             # records in it
    bad: int = 0                 # of them, breaking the contract
    reason: str | None = None    # quarantined whole: EMPTY or MALFORMED


def mistyped(run: str) -> list[dict]:
    """Six readings, four of them breaking the contract."""
    good = readings(run, 6, start_ms=DAY + 7_200_000, seed=9)
    good[1]["seq"] = "1"                       # a string for a long
    good[2]["temperature"] = True              # a boolean for a double
    good[3].pop("location")                    # a required field missing
    good[4]["sensor_id"] = 7                   # a number for a string
    good[5]["firmware"] = "2.1"                # an undeclared field: counted, kept out
    return good


CROSSING = readings("run-a", 12, start_ms=NEXT_DAY - 6_000, seed=1)     # 6 readings each side of midnight UTC
GOOD_B = readings("run-b", 10, start_ms=DAY + 3_600_000, seed=2)
# the same key in two files, one larger: the larger file's reading stays (the lowest file id)
DUP_SMALL = readings("run-d", 4, start_ms=DAY + 5_000_000, seed=4)
DUP_LARGE = [{**r, "temperature": r["temperature"] + 100, "location": "x" * 40} for r in DUP_SMALL]
HELD = readings("run-h", 5, start_ms=DAY + 9_000_000, seed=5)          # keys the table already holds (3 of them)

DEFAULT_CASES = [
    Case("2025-11-21--23/part-sink-0-0.json", json_array(CROSSING).encode(), 12),
    Case("part-oneline-0-0.json", json.dumps(GOOD_B[:5]).encode(), 5),
    Case("part-pretty-0-0.json", json.dumps(GOOD_B[5:], indent=2).encode(), 5),
    Case("part-empty-0-0.json", b"", reason=EMPTY),
    Case("part-blank-0-0.json", b" \n\t\r\n ", reason=EMPTY),
    Case("part-brackets-0-0.json", b"[]"),
    Case("part-truncated-0-0.json", json_array(GOOD_B[:3])[:-40].encode(), reason=MALFORMED),
    Case("part-text-0-0.json", b"this is not JSON\n", reason=MALFORMED),
    Case("part-scalar-0-0.json", b"42", reason=MALFORMED),
    Case("part-numbers-0-0.json", b"[1, 2]", reason=MALFORMED),
    Case("part-mistyped-0-0.json", json_array(mistyped("run-m")).encode(), 6, 4),
    Case("part-dup-small-0-0.json", json_array(DUP_SMALL).encode(), 4),
    Case("part-dup-large-0-0.json", json_array(DUP_LARGE).encode(), 4),
    Case("part-held-0-0.json", json_array(HELD).encode(), 5),
    Case("part-invalid-utf8-0-0.json", b'[{"sensor_id":"\xff"}]', reason=MALFORMED),
]


def nested_cases() -> list[Case]:
    records = [example(NESTED, n) for n in range(40)]
    records[3]["tags"] = {"site": "a", "room": None}          # a null map value: bad (its values are not nullable)
    records[4]["ok"] = None                                    # [boolean, null]: allowed
    records[5]["gps"] = {"lat": 1.0}                           # gps.lon required: bad
    records[6]["battery"] = "3.777"                            # too many decimal places: bad
    records[7]["event_time"] = "2025-11-21T23:59:59.999999+05:00"
    records[8]["samples"] = [{"x": 1}, {"x": None}, None]     # optional inner field, null element: bad (items required)
    again = [dict(records[n], ok=False) for n in range(10, 15)]  # duplicates of 10-14, in a smaller file
    return [
        Case("part-nested-0-0.json", json_array(records[:20]).encode(), 20, 4),
        Case("part-nested-1-0.json", json.dumps(records[20:], indent=1).encode(), 20),
        Case("part-nested-2-0.json", json_array(again).encode(), 5),
    ]


def write_raw(folder: Path, cases: list[Case]) -> tuple[Storage, list[FileEntry]]:
    for case in cases:
        path = folder / case.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(case.content)
    raw = Storage(folder.as_uri())
    files = raw.list()
    assert len(files) == len(cases)
    return raw, files


@dataclass
class Run:
    """One engine's compaction of a folder of raw files."""

    done: Compacted
    raw: Storage
    target: Storage
    plan: WritePlan

    def rows(self) -> list[dict]:
        tables = [pq.read_table(self.target.local_path(w.rel)) for w in self.done.written]
        rows = pa.concat_tables(tables).to_pylist() if tables else []
        return sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))

    def partitions(self) -> set[str]:
        return {w.partition_path for w in self.done.written}

    def bad_records(self) -> list[tuple[str, str, dict]]:
        out = []
        for entry in self.target.list(self.plan.records):  # under the Iceberg table, never the raw one
            for line in self.target.read(entry.rel).decode().splitlines():
                b = json.loads(line)
                out.append((self.raw.relative(b["file"]), b["reason"], json.loads(b["record"])))
        return sorted(out, key=repr)


def plan_for(schema: TableSchema, staging: str) -> WritePlan:
    table = schema.iceberg_schema()
    return WritePlan(schema, table, schema.partition_spec(table), {}, f"data/_staging/{staging}",
                     records_dir(staging), 1 << 30, 50.0)


def held_file(target: Storage, schema: TableSchema) -> str:
    """A data file of the table holding three of HELD's keys (written as the engines write)."""
    table = schema.iceberg_schema()
    writer = Writer(schema, table, schema.partition_spec(table), {}, target)
    (w,) = writer.write(pa.Table.from_pylist(HELD[:3], schema=record_schema(schema.fields)), 1, "data/held", "held")
    return target.uri(w.rel)


@pytest.fixture(scope="module")
def spark_engine() -> Iterator[Callable[[Storage, Storage], Engine]]:
    """SparkEngines sharing one in-process session (PySpark's launcher, as ``lakeflow compact``), its
    shares cut at 2 KB so that a batch makes several tasks."""
    from pyspark import SparkContext

    from lakeflow.compaction.spark import engine as spark_module

    engines: list[Engine] = []
    with pytest.MonkeyPatch.context() as patch:
        for key, value in launch.submit_env(os.environ, launch.spark_options("local[2]")).items():
            patch.setenv(key, value)
        patch.setattr(spark_module, "BATCH_BYTES", 2048)

        def make(raw: Storage, target: Storage) -> Engine:
            engines.append(spark_module.SparkEngine(raw, target, "lakeflow-test-engines"))
            return engines[-1]

        yield make
        if engines:
            engines[-1].close()  # stops the session
        gateway = SparkContext._gateway
        if gateway is not None:  # end the JVM too: a later session must not inherit this one's launch options
            gateway.shutdown()
            gateway.proc.stdin.close()
            gateway.proc.wait(timeout=60)
            SparkContext._gateway = SparkContext._jvm = None


def compact(engine: Engine, raw: Storage, files: list[FileEntry], target: Storage, schema: TableSchema,
            name: str) -> Run:
    plan = plan_for(schema, name)
    held = held_file(target, schema) if schema is DEFAULT else None
    done = engine.compact(files, plan, lambda lo, hi: [held] if held and lo <= HELD[0]["timestamp_ms"] <= hi else [])
    return Run(done, raw, target, plan)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory,
         spark_engine: Callable[[Storage, Storage], Engine]) -> dict[tuple[str, str], Run]:
    out = {}
    from lakeflow.compaction.spark import engine as spark_module

    for label, schema, cases in (("default", DEFAULT, DEFAULT_CASES), ("nested", NESTED, nested_cases())):
        raw, files = write_raw(tmp_path_factory.mktemp(f"raw-{label}"), cases)
        for name in ("arrow", "spark", "spark-large"):
            target = Storage(tmp_path_factory.mktemp(f"target-{label}-{name}").as_uri())
            engine = ArrowEngine(raw, target) if name == "arrow" else spark_engine(raw, target)
            with pytest.MonkeyPatch.context() as patch:  # a large batch's route: hash files compared by range
                patch.setattr(spark_module, "HASHES_TO_DRIVER_BYTES", 0 if name == "spark-large" else 1 << 30)
                out[(label, name)] = compact(engine, raw, files, target, schema, f"{label}-{name}")
    return out


def summaries(run: Run) -> dict[str, tuple]:
    return {rel: (s.records, s.bad, s.reason, s.min_ms, s.max_ms) for rel, s in run.done.files.items()}


@pytest.mark.slow
@pytest.mark.parametrize("label, cases", [("default", DEFAULT_CASES), ("nested", nested_cases())])
def test_each_file_is_read_as_the_contract_says(runs: dict, label: str, cases: list[Case]) -> None:
    for engine in ("arrow", "spark", "spark-large"):
        got = runs[(label, engine)].done.files
        for case in cases:
            s = got[case.rel]
            assert (s.records, s.bad, s.reason) == (case.records, case.bad, case.reason), (engine, case.rel)


@pytest.mark.slow
@pytest.mark.parametrize("label, spark_route", [("default", "spark"), ("nested", "spark"),
                                                ("default", "spark-large"), ("nested", "spark-large")])
def test_the_engines_make_the_same_table(runs: dict, label: str, spark_route: str) -> None:
    arrow, spark = runs[(label, "arrow")], runs[(label, spark_route)]
    assert summaries(spark) == summaries(arrow)
    assert spark.rows() == arrow.rows() and arrow.rows()
    assert spark.partitions() == arrow.partitions()
    assert spark.bad_records() == arrow.bad_records() and len(arrow.bad_records()) == arrow.done.bad_records
    assert {e.rel for e in arrow.raw.list()} == set(arrow.done.files)  # the raw table: its part files, no more
    assert spark.done.duplicates_dropped == arrow.done.duplicates_dropped
    assert spark.done.undeclared == arrow.done.undeclared
    assert len(spark.done.written) > len(arrow.done.written)  # several tasks: files of their own


@pytest.mark.slow
def test_the_default_batch_keeps_one_reading_per_key_the_larger_files(runs: dict) -> None:
    arrow = runs[("default", "arrow")]
    rows = arrow.rows()
    keys = [(r["sensor_id"], r["run_id"], r["seq"]) for r in rows]
    assert len(keys) == len(set(keys))
    duplicated = {(r["sensor_id"], r["run_id"], r["seq"]) for r in DUP_SMALL}
    assert {r["location"] for r in rows if (r["sensor_id"], r["run_id"], r["seq"]) in duplicated} == {"x" * 40}
    held = {(r["sensor_id"], r["run_id"], r["seq"]) for r in HELD[:3]}
    assert not held & set(keys)  # the table holds them already
    good = sum(c.records - c.bad for c in DEFAULT_CASES)
    assert arrow.done.duplicates_dropped == len(DUP_SMALL) + len(held) == good - len(rows)
    assert arrow.done.undeclared == {"firmware": 1}
    assert arrow.partitions() == {"ts_day=2025-11-21", "ts_day=2025-11-22"}
    reasons = {reason for _, reason, _ in arrow.bad_records()}
    assert reasons == {"field seq: expected an integer, got a string", "field temperature: expected a number, got a boolean",
                       "missing field location", "field sensor_id: expected a string, got an integer"}


@pytest.mark.slow
def test_the_nested_batch_holds_its_values_as_declared(runs: dict) -> None:
    run = runs[("nested", "arrow")]
    rows = {r["seq"]: r for r in run.rows()}
    assert len(rows) == 40 - 4 and run.done.duplicates_dropped == 5
    assert rows[0]["tags"] == [("k0", "tags-0"), ("k1", "tags-1")]
    assert rows[4]["ok"] is None and rows[10]["ok"] is True     # the first file's reading of 10 stayed
    assert str(rows[7]["event_time"]) == "2025-11-21 18:59:59.999999+00:00"
    assert all(p.startswith("event_time_day=2025-11-") and "/device_id_bucket=" in p for p in run.partitions())
    table = pq.read_table(run.target.local_path(run.done.written[0].rel))
    assert table.schema.field("gps").metadata[b"PARQUET:field_id"]  # field ids: renames are safe
