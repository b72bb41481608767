"""The two compaction engines on the same raw files: the ``arrow`` engine (pyarrow in the driver)
must read, set aside and write exactly what the ``spark`` engine does (Spark's ``multiLine`` JSON
reader, PERMISSIVE, explicit schema — lakeflow.compaction.spark.read).

Every input below also states what Spark makes of it, so a change in either engine fails naming
the input. Where Spark is surprising the arrow engine follows it: string fields keep other values'
source text, doubles take "NaN", only a file's first JSON value counts, one non-object element
spoils a whole array, and a file whose only record holds no schema field counts as malformed.
Two known divergences are pinned per engine: single-quoted JSON (DIVERGENT) and which of two
different readings with the same key survives (CONFLICTING).

Spark runs in this process through PySpark's launcher (as ``lakeflow compact`` runs it): one
local[2] session for the module.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

import pyarrow as pa
import pytest

from lakeflow.compaction import launch
from lakeflow.compaction.arrow.engine import ArrowEngine
from lakeflow.compaction.arrow.read import SCHEMA
from lakeflow.compaction.engine import Engine, FileSummary
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.schema import TS
from lakeflow.readings import KEY, NAMES, TIME
from tests.support.fixtures_compaction import json_array, readings

DAY = 1763683200000              # 2025-11-21T00:00:00Z
NEXT_DAY = DAY + 86_400_000
MALFORMED = "malformed"          # the file is one all-null row in Spark, quarantined whole
MISSING = object()               # a field left out of a record
Row = tuple                      # one reading's values in NAMES order


def record(i: int, run: str, **raw: object) -> str:
    """Reading ``i`` of ``run`` as JSON text; ``raw`` replaces fields by source text (or MISSING)."""
    fields: dict[str, object] = {
        "sensor_id": '"sensor-001"', "run_id": json.dumps(run), "seq": str(i), "timestamp_ms": str(DAY + 7_200_000 + i),
        "temperature": "20.5", "humidity": "41.25", "pressure": "1001.5", "location": '"lab-north"'}
    fields.update(raw)
    return "{" + ",".join(f'"{k}":{v}' for k, v in fields.items() if v is not MISSING) + "}"


def parsed(i: int, run: str, **values: object) -> Row:
    """What both engines must read from ``record(i, run, …)``: a mistyped field is None."""
    out = {"sensor_id": "sensor-001", "run_id": run, "seq": i, "timestamp_ms": DAY + 7_200_000 + i,
           "temperature": 20.5, "humidity": 41.25, "pressure": 1001.5, "location": "lab-north", **values}
    return tuple(out[n] for n in NAMES)


def row(reading: dict) -> Row:
    return tuple(reading[n] for n in NAMES)


# (source text replacing fields, what is read) — in one file of the sink's layout (pyarrow's
# NDJSON path) and again in an indented array (the Python path).
MISTYPED: list[tuple[dict, dict]] = [
    ({"seq": '"5"'}, {"seq": None}),                          # a string for a bigint
    ({"seq": "1.5"}, {"seq": None}),                          # floats for a bigint, even a whole one
    ({"seq": "2.0"}, {"seq": None}),
    ({"seq": str(2 ** 64)}, {"seq": None}),                   # beyond int64
    ({"seq": str(2 ** 63 - 1)}, {"seq": 2 ** 63 - 1}),        # int64's largest: fine
    ({"timestamp_ms": '"1763690400000"'}, {"timestamp_ms": None}),
    ({"temperature": "21"}, {"temperature": 21.0}),           # an int for a double: fine
    ({"humidity": "true"}, {"humidity": None}),               # a bool for a double
    ({"temperature": '"NaN"'}, {"temperature": math.nan}),    # Spark's allowNonNumericNumbers
    ({"pressure": "1" + "0" * 400}, {"pressure": math.inf}),  # beyond any double: Infinity, as in Java
    ({"location": "12"}, {"location": "12"}),                 # string fields keep other values' source text
    ({"location": "1.50"}, {"location": "1.50"}),
    ({"sensor_id": "false"}, {"sensor_id": "false"}),
    ({"location": '{"room": 4, "floors": [1, 2.50]}'}, {"location": '{"room": 4, "floors": [1, 2.50]}'}),
    ({"location": '"caf\\u00e9 \\ud800"'}, {"location": "café ?"}),  # a lone surrogate: '?', as Java encodes it
    ({"pressure": MISSING}, {"pressure": None}),
    ({"location": "null"}, {"location": None}),
    ({"temperature": "NaN", "pressure": "-Infinity", "seq": "true"},   # a bad record holding non-finite doubles
     {"temperature": math.nan, "pressure": -math.inf, "seq": None}),
    ({"firmware": '"2.1.0"'}, {}),                            # unknown fields are ignored
]

GOOD_B = readings("run-b", 10, start_ms=DAY + 3_600_000, seed=2)
CROSSING = readings("run-a", 12, start_ms=NEXT_DAY - 6_000, seed=1)    # 6 readings each side of midnight UTC
# the same (run_id, seq) in two files: seq 0-1 with other values, seq 2-3 identical (a replay)
DUP_0 = readings("run-d", 4, start_ms=DAY + 5_000_000, seed=4)
DUP_1 = [{**r, "temperature": r["temperature"] + 100} if r["seq"] < 2 else r for r in DUP_0]


@dataclass(frozen=True)
class Case:
    rel: str
    content: bytes
    rows: Union[list[Row], str]   # what Spark reads: rows ([] for none) or MALFORMED


def _cases() -> list[Case]:
    sink = "[" + ",\n".join(record(i, "run-m0", **raw) for i, (raw, _) in enumerate(MISTYPED)) + "]\n"
    indented = "[\n  " + ",\n  ".join(record(i, "run-m1", **raw) for i, (raw, _) in enumerate(MISTYPED)) + "\n]\n"
    good = record(0, "run-q")
    return [
        Case("2025-11-21--23/part-sink-0-0.json", json_array(CROSSING).encode(), [row(r) for r in CROSSING]),
        Case("part-oneline-0-0.json", json.dumps(GOOD_B[:5]).encode(), [row(r) for r in GOOD_B[:5]]),
        Case("part-pretty-0-0.json", json.dumps(GOOD_B[5:], indent=2).encode(), [row(r) for r in GOOD_B[5:]]),
        Case("part-empty-0-0.json", b"", []),
        Case("part-blank-0-0.json", b" \n\t\r\n ", []),
        Case("part-brackets-0-0.json", b"[]", []),
        Case("part-truncated-0-0.json", json_array(GOOD_B[:3])[:-40].encode(), MALFORMED),
        Case("part-text-0-0.json", b"this is not JSON\n", MALFORMED),
        Case("part-object-0-0.json", good.encode(), [parsed(0, "run-q")]),            # one record
        Case("part-scalar-0-0.json", b"42", MALFORMED),
        Case("part-numbers-0-0.json", b"[1, 2]", MALFORMED),
        Case("part-mistyped-0-0.json", sink.encode(), [parsed(i, "run-m0", **v) for i, (_, v) in enumerate(MISTYPED)]),
        Case("part-mistyped-1-0.json", indented.encode(),
             [parsed(i, "run-m1", **v) for i, (_, v) in enumerate(MISTYPED)]),
        Case("part-trailing-comma-0-0.json", f"[{record(1, 'run-q')},\n{record(2, 'run-q')},\n]".encode(), MALFORMED),
        Case("part-crlf-0-0.json", f"[{record(3, 'run-q')},\r\n{record(4, 'run-q')}\r\n]\r\n".encode(),
             [parsed(3, "run-q"), parsed(4, "run-q")]),
        Case("part-dup-0-0.json", json_array(DUP_0).encode(), [row(r) for r in DUP_0]),
        Case("part-dup-1-0.json", json_array(DUP_1).encode(), [row(r) for r in DUP_1]),
        # Spark's less obvious rules
        Case("part-empty-object-0-0.json", b"[{}]", MALFORMED),                      # one all-null row
        Case("part-no-field-0-0.json", b'[{"firmware": "2.1.0"}]', MALFORMED),
        Case("part-two-empty-0-0.json", b"[{},\n{}]", [(None,) * len(NAMES)] * 2),   # two: bad records
        Case("part-null-element-0-0.json", f"[null,\n{good}]".encode(), MALFORMED),
        Case("part-mixed-0-0.json", f"[{good}, 5]".encode(), MALFORMED),
        Case("part-trailing-data-0-0.json", f"[{record(5, 'run-q')}] and more\n".encode(), [parsed(5, "run-q")]),
        Case("part-two-arrays-0-0.json", f"[{record(6, 'run-q')}]\n[{record(7, 'run-q')}]\n".encode(),
             [parsed(6, "run-q")]),
        # lines the NDJSON path must not take for records
        Case("part-missing-comma-0-0.json", f"[{record(8, 'run-q')}\n{record(9, 'run-q')}]".encode(), MALFORMED),
        Case("part-two-per-line-0-0.json", f"[{good}{good},\n,\n{good}]".encode(), MALFORMED),
        Case("part-invalid-utf8-0-0.json", record(10, "run-q", location='"\xff"').encode("latin-1"), MALFORMED),
    ]


CASES = _cases()
# Single quotes: Spark's JSON reader allows them (allowSingleQuotes, on by default), Python's json
# and pyarrow do not. Following Spark would take a JSON parser of our own; not worth it for files
# no sink writes — so the arrow engine quarantines the file that Spark compacts.
DIVERGENT = Case("part-single-quotes-0-0.json", record(11, "run-s").replace('"', "'").encode(), [parsed(11, "run-s")])
DIVERGENT_ARROW = MALFORMED


def expected_summary(rows: Union[list[Row], str]) -> Optional[FileSummary]:
    if rows == MALFORMED:
        return FileSummary(rows=1, bad_rows=1, malformed=True, min_ms=None, max_ms=None)
    if not rows:
        return None
    times = [r[NAMES.index(TIME)] for r in rows if None not in r]
    return FileSummary(rows=len(rows), bad_rows=sum(None in r for r in rows), malformed=False,
                       min_ms=min(times, default=None), max_ms=max(times, default=None))


def norm(value: object) -> object:
    """NaN equal to itself, for set and list comparisons."""
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def tuples(rows: list) -> list[tuple]:
    return sorted((tuple(norm(v) for v in r) for r in rows), key=repr)


# --- the engines -------------------------------------------------------------------------------

@dataclass
class Batch:
    """One engine's read of a folder of raw files."""

    engine: Engine
    raw: Storage
    files: list[FileEntry]
    summaries: dict[str, FileSummary]

    def rows(self) -> dict[str, list[tuple]]:
        """Every row read (good and bad) by file (rel), as the engine holds them."""
        out: dict[str, list[tuple]] = {}
        if isinstance(self.engine, ArrowEngine):
            table = self.engine.rows
            for r in table.to_pylist():
                out.setdefault(self.engine.files[r["_file"]], []).append(tuple(r[n] for n in NAMES))
        else:
            rels = {self.raw.spark_path(f.rel): f.rel for f in self.files}
            for r in self.engine.rows.collect():
                out.setdefault(rels[r["_file"]], []).append(tuple(r[n] for n in NAMES))
        return {rel: tuples(rs) for rel, rs in out.items()}


def write_raw(folder: Path, cases: list[Case]) -> tuple[Storage, list[FileEntry]]:
    for case in cases:
        path = folder / case.rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(case.content)
    raw = Storage(folder.as_uri())
    return raw, raw.list()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Storage:
    return Storage(tmp_path_factory.mktemp("target").as_uri())


@pytest.fixture(scope="module")
def spark_engine(target: Storage) -> Iterator[Callable[[Storage], Engine]]:
    """SparkEngines sharing one in-process session (PySpark's launcher, as ``lakeflow compact``)."""
    from pyspark import SparkContext

    from lakeflow.compaction.spark.engine import SparkEngine

    engines: list[SparkEngine] = []
    with pytest.MonkeyPatch.context() as patch:
        for key, value in launch.submit_env(os.environ, launch.spark_options("local[2]")).items():
            patch.setenv(key, value)

        def make(raw: Storage) -> Engine:
            engines.append(SparkEngine(raw, target, None, None, "lakeflow-test-engines"))
            return engines[-1]

        yield make
        for engine in engines[:-1]:
            if engine.rows is not None:
                engine.rows.unpersist()
        if engines:
            engines[-1].close()  # stops the session
        gateway = SparkContext._gateway
        if gateway is not None:  # end the JVM too: a later session must not inherit this one's launch options
            gateway.shutdown()
            gateway.proc.stdin.close()
            gateway.proc.wait(timeout=60)
            SparkContext._gateway = SparkContext._jvm = None


def read(engine: Engine, raw: Storage, files: list[FileEntry]) -> Batch:
    return Batch(engine=engine, raw=raw, files=files, summaries=engine.read(files))


@pytest.fixture(scope="module")
def raw_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Storage, list[FileEntry]]:
    raw, files = write_raw(tmp_path_factory.mktemp("raw"), CASES)
    assert len(files) == len(CASES)
    return raw, files


@pytest.fixture(scope="module")
def arrow(raw_files: tuple[Storage, list[FileEntry]], target: Storage) -> Batch:
    raw, files = raw_files
    return read(ArrowEngine(raw, target), raw, files)


@pytest.fixture(scope="module")
def spark(raw_files: tuple[Storage, list[FileEntry]], spark_engine: Callable[[Storage], Engine]) -> Batch:
    raw, files = raw_files
    return read(spark_engine(raw), raw, files)


def check_read(batch: Batch, cases: list[Case]) -> None:
    """Each file's summary and rows as the cases state them."""
    got = batch.rows()
    for case in cases:
        assert batch.summaries.get(case.rel) == expected_summary(case.rows), case.rel
        if case.rows != MALFORMED:
            assert got.get(case.rel, []) == tuples(case.rows), case.rel
    assert set(batch.summaries) <= {c.rel for c in cases}


# --- reading -------------------------------------------------------------------------------------

def test_arrow_reads_each_input_as_spark_does(arrow: Batch) -> None:
    check_read(arrow, CASES)


@pytest.mark.slow
def test_spark_reads_each_input_as_stated(spark: Batch) -> None:
    check_read(spark, CASES)


@pytest.mark.slow
def test_engines_agree_on_every_file(spark: Batch, arrow: Batch) -> None:
    assert arrow.summaries == spark.summaries
    theirs, ours = spark.rows(), arrow.rows()
    for rel, summary in spark.summaries.items():
        if not summary.malformed:   # (Spark's null row of a malformed file is nowhere used)
            assert ours[rel] == theirs[rel], rel


def bad_records(raw: Storage, rel: str) -> list[dict]:
    """The JSON lines an engine wrote under ``rel``, the record parsed too (strict JSON: no NaN)."""
    def strict(word: str) -> None:
        raise ValueError(f"not JSON: {word}")

    out = []
    for entry in raw.list(rel):
        if entry.rel.rsplit("/", 1)[-1].startswith((".", "_")):
            continue
        for line in raw.read(entry.rel).decode().splitlines():
            r = json.loads(line, parse_constant=strict)
            out.append({**r, "record": json.loads(r["record"], parse_constant=strict)})
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True))


def spark_json(value: object) -> object:
    """As Spark's ``to_json`` writes a value: NaN and infinities as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return value


def expected_bad_records(raw: Storage, cases: list[Case]) -> list[dict]:
    out = []
    for case in cases:
        if case.rows == MALFORMED:
            continue
        for r in case.rows:
            if None in r:
                missing = ", ".join(n for n, v in zip(NAMES, r) if v is None)
                out.append({"file": raw.spark_path(case.rel), "reason": f"missing, null or mistyped: {missing}",
                            "record": {n: spark_json(v) for n, v in zip(NAMES, r) if v is not None}})
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True))


def write_bad(batch: Batch, name: str) -> list[dict]:
    """The engine's bad records, the malformed files quarantined (as a run does)."""
    batch.engine.write_bad_records([rel for rel, s in batch.summaries.items() if s.malformed], f"_bad/{name}")
    return bad_records(batch.raw, f"_bad/{name}")


def test_arrow_bad_records(arrow: Batch) -> None:
    assert write_bad(arrow, "arrow") == expected_bad_records(arrow.raw, CASES)


@pytest.mark.slow
def test_engines_write_the_same_bad_records(spark: Batch, arrow: Batch) -> None:
    theirs = write_bad(spark, "spark")
    assert theirs == expected_bad_records(spark.raw, CASES)
    assert write_bad(arrow, "arrow-parity") == theirs


# --- writing -------------------------------------------------------------------------------------

# Two readings with the same (run_id, seq) and different values (a replay has equal ones) is a case
# no sink produces, and Spark does not define which one dropDuplicates keeps. In practice, locally,
# it keeps the one in the file it packs first: the largest (ties: in the file system's listing
# order). The arrow engine keeps the first in path order. Both keep exactly one; emulating Spark's
# file packing is not worth it.
CONFLICTING = {(r["run_id"], r["seq"]) for r in DUP_1 if r not in DUP_0}
KEPT = {"spark": DUP_1, "arrow": DUP_0}


def written(target: Storage, staging: str) -> dict[str, list[dict]]:
    """Rows of each Parquet file under ``staging``, by path under it."""
    out = {}
    for entry in target.list(staging):
        name = entry.rel.rsplit("/", 1)[-1]
        if name.endswith(".parquet") and not name.startswith((".", "_")):
            out[entry.rel[len(staging) + 1:]] = target.read_parquet(entry.rel, [*NAMES, TS]).to_pylist()
    return out


def schema_of(target: Storage, staging: str) -> set[tuple]:
    """(field, Arrow type, Parquet physical and logical type) of every file under ``staging``."""
    out = set()
    for entry in target.list(staging):
        if entry.rel.endswith(".parquet"):
            meta = target.parquet_metadata(entry.rel)
            types = meta.schema.to_arrow_schema()
            for i in range(len(meta.schema)):
                col = meta.schema.column(i)
                out.add((col.name, str(types.field(col.name).type), col.physical_type, str(col.logical_type)))
    return out


def expected_rows(engine: str, held: set[tuple] = frozenset()) -> list[Row]:
    """The good rows, one per (run_id, seq) not ``held`` by the table: the first in path order,
    except for CONFLICTING keys."""
    kept: dict[tuple, Row] = {}
    for case in sorted(CASES, key=lambda c: c.rel):
        for r in case.rows if case.rows != MALFORMED else []:
            if None not in r:
                kept.setdefault((r[NAMES.index("run_id")], r[NAMES.index("seq")]), r)
    kept.update({(r["run_id"], r["seq"]): row(r) for r in KEPT[engine] if (r["run_id"], r["seq"]) in CONFLICTING})
    return [r for key, r in kept.items() if key not in held]


def check_written(files: dict[str, list[dict]], expected: list[Row], max_files: int) -> None:
    """The expected rows once each, ``ts`` = timestamp_ms, one UTC day per folder, files sorted."""
    rows = [r for rs in files.values() for r in rs]
    assert len({tuple(r[k] for k in KEY) for r in rows}) == len(rows), "a (run_id, seq) written twice"
    assert tuples([tuple(r[n] for n in NAMES) for r in rows]) == tuples(expected)
    for path, rs in files.items():
        assert rs, path
        for r in rs:
            assert r[TS] == datetime.fromtimestamp(r[TIME] / 1000, timezone.utc)
            assert path.split("/", 1)[0] == f"ts_day={r[TS]:%Y-%m-%d}", path
        order = [(r[TIME], r["run_id"], r["seq"]) for r in rs]
        assert order == sorted(order), path
    days = {p.split("/", 1)[0] for p in files}
    assert len(days) <= len(files) <= max_files + len(days) - 1  # about ``files`` ranges, cut at midnight


def as_set(files: dict[str, list[dict]]) -> set[tuple]:
    """Every row with ``ts``, but those of CONFLICTING keys."""
    return {tuple(norm(r[n]) for n in (*NAMES, TS)) for rs in files.values() for r in rs
            if (r["run_id"], r["seq"]) not in CONFLICTING}


@pytest.mark.parametrize("files", [1, 3])
def test_arrow_writes(arrow: Batch, target: Storage, files: int) -> None:
    arrow.engine.write([], files, f"arrow-{files}")
    check_written(written(target, f"arrow-{files}"), expected_rows("arrow"), files)


@pytest.mark.slow
@pytest.mark.parametrize("files", [1, 3])
def test_engines_write_the_same_parquet(spark: Batch, arrow: Batch, target: Storage, files: int) -> None:
    spark.engine.write([], files, f"spark-{files}")
    arrow.engine.write([], files, f"arrow-{files}-parity")
    theirs, ours = written(target, f"spark-{files}"), written(target, f"arrow-{files}-parity")
    assert len(json_array(DUP_1)) > len(json_array(DUP_0))  # Spark keeps the larger file's reading
    check_written(theirs, expected_rows("spark"), files)
    check_written(ours, expected_rows("arrow"), files)
    assert as_set(ours) == as_set(theirs)
    assert {p.split("/", 1)[0] for p in ours} == {p.split("/", 1)[0] for p in theirs} == {
        "ts_day=2025-11-21", "ts_day=2025-11-22"}
    schema = schema_of(target, f"spark-{files}")
    assert schema_of(target, f"arrow-{files}-parity") == schema
    assert {c[:3] for c in schema} == {
        *((n, "string", "BYTE_ARRAY") for n in ("sensor_id", "run_id", "location")),
        *((n, "int64", "INT64") for n in ("seq", "timestamp_ms")),
        *((n, "double", "DOUBLE") for n in ("temperature", "humidity", "pressure")),
        (TS, "timestamp[us, tz=UTC]", "INT64")}
    assert any(c[0] == TS and "isAdjustedToUTC=true, timeUnit=microseconds" in c[3] for c in schema)


@pytest.mark.slow
def test_engines_leave_out_keys_the_table_holds(spark: Batch, arrow: Batch, target: Storage) -> None:
    held = [CROSSING[0], CROSSING[7], GOOD_B[2], DUP_0[0]]
    target.write_parquet("data/existing.parquet",  # a table data file; one key the batch does not have
                         pa.Table.from_pylist([*held, {**CROSSING[1], "run_id": "run-elsewhere"}], schema=SCHEMA))
    existing = [target.uri("data/existing.parquet")]
    spark.engine.write(existing, 1, "spark-existing")
    arrow.engine.write(existing, 1, "arrow-existing")
    keys = {(r["run_id"], r["seq"]) for r in held}
    theirs, ours = written(target, "spark-existing"), written(target, "arrow-existing")
    check_written(theirs, expected_rows("spark", keys), 1)
    check_written(ours, expected_rows("arrow", keys), 1)
    assert as_set(ours) == as_set(theirs)


# --- the documented divergence -------------------------------------------------------------------

@pytest.mark.slow
def test_single_quoted_json_divergence(tmp_path: Path, spark_engine: Callable[[Storage], Engine],
                                       target: Storage) -> None:
    raw, files = write_raw(tmp_path, [DIVERGENT])
    assert read(spark_engine(raw), raw, files).summaries == {DIVERGENT.rel: expected_summary(DIVERGENT.rows)}
    assert read(ArrowEngine(raw, target), raw, files).summaries == {DIVERGENT.rel: expected_summary(DIVERGENT_ARROW)}
