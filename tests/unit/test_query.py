"""``lakeflow query``: SQL over a real compacted table — raw part files compacted by ``lakeflow compact``
(arrow engine, embedded catalog) — checked against the readings written; the time filter prunes
``ts_day`` partitions (pyiceberg's plan); error cases; and one run against the Iceberg REST server.

Unit tests: they start no process. The real-process tests: tests/integration/test_query.py."""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Callable

import pytest

from lakeflow.cli.main import main
from lakeflow.query import day_bounds, default_sql, time_filter
from lakeflow.schema import load_schema
from lakeflow.schema.declared import parse_schema, default_schema_text
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts

DAY_MS = 1763683200000                 # 2025-11-21T00:00:00Z


START = DAY_MS + 12 * 3_600_000        # 12:00, every 5 minutes for 50 hours: three UTC days


ROWS = readings("run-a", 600, start_ms=START, step_ms=300_000, seed=1)


TARGET = "sensor-readings-compacted"


def cells(line: str) -> list[str]:
    """The values of one row of DuckDB's box rendering."""
    return [c.strip() for c in line.split("│")[1:-1]]


def day_of(row: dict) -> date:
    return datetime.fromtimestamp(row["timestamp_ms"] / 1000, tz=timezone.utc).date()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> LakeflowHome:
    home = make_home(tmp_path_factory.mktemp("query"))
    write_parts(home.raw, ROWS, 50)
    done = home.compact("--engine", "arrow")
    assert done.returncode == 0, done.stderr[-3000:]
    return home


@pytest.fixture
def query(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Done]:
    """``lakeflow query`` in this process (imports paid once), in ``home``'s environment."""
    def run(home: LakeflowHome, *args: str) -> Done:
        for name in list(os.environ):
            if name not in home.env:
                monkeypatch.delenv(name)
        for name, value in home.env.items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        try:
            code = main(["query", *args])
        except SystemExit as exc:   # argparse
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return Done(code, out, err)
    return run


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


def test_counts_per_sensor_and_day_match_the_readings(home: LakeflowHome, query: Callable[..., Done]) -> None:
    done = query(home, "--format", "csv", "SELECT sensor_id, ts::date AS day, count(*) AS n FROM readings "
                                          "GROUP BY ALL ORDER BY ALL")
    assert done.returncode == 0, done.stderr
    got = {(r["sensor_id"], r["day"]): int(r["n"]) for r in csv.DictReader(io.StringIO(done.stdout))}
    assert got == dict(Counter((r["sensor_id"], day_of(r).isoformat()) for r in ROWS))


def test_a_day_reads_only_its_partition(home: LakeflowHome, query: Callable[..., Done]) -> None:
    table = home.iceberg_table(TARGET)
    all_files = list(table.scan().plan_files())
    day_files = list(table.scan(row_filter=time_filter("ts", *day_bounds(date(2025, 11, 22)))).plan_files())
    assert len(all_files) >= 3 and 0 < len(day_files) < len(all_files)
    assert {t.file.partition[0] for t in day_files} == {(date(2025, 11, 22) - date(1970, 1, 1)).days}

    done = query(home, "--day", "2025-11-22", "--format", "json",
                 "SELECT count(*) AS n, min(ts) AS lo, max(ts) AS hi FROM readings")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"n": sum(day_of(r) == date(2025, 11, 22) for r in ROWS),
                                        "lo": "2025-11-22T00:00:00+00:00", "hi": "2025-11-22T23:55:00+00:00"}]


def test_since_and_until_bound_the_rows(home: LakeflowHome, query: Callable[..., Done]) -> None:
    done = query(home, "--since", "2025-11-21T23:00Z", "--until", "2025-11-22T01:00", "--format", "csv",
                 "SELECT count(*) AS n FROM readings")
    lo, hi = DAY_MS + 23 * 3_600_000, DAY_MS + 25 * 3_600_000
    expected = sum(lo <= r["timestamp_ms"] < hi for r in ROWS)
    assert done.returncode == 0 and done.stdout.splitlines() == ["n", str(expected)] and 0 < expected < len(ROWS)


def test_max_rows_cuts_the_output_and_says_so(home: LakeflowHome, query: Callable[..., Done]) -> None:
    sql = "SELECT seq, sensor_id, temperature FROM readings ORDER BY seq"
    table = query(home, "--max-rows", "3", sql)
    assert table.returncode == 0 and "… 597 more rows" in table.stdout
    shown = [cells(line) for line in table.stdout.splitlines() if line.startswith("│")]
    assert [r[0] for r in shown if r[0].isdigit()] == ["0", "1", "2"]
    as_csv = query(home, "--format", "csv", "--max-rows", "3", sql)
    assert len(as_csv.stdout.splitlines()) == 4 and "… 597 more rows" in as_csv.stderr
    everything = query(home, "--format", "json", sql)   # csv/json print every row by default
    assert [r["seq"] for r in json.loads(everything.stdout)] == list(range(600))
    assert everything.stderr == ""


@pytest.mark.parametrize("sql, message", [("SELECT nope FROM readings", "Binder Error"),
                                          ("SELEC 1", "Parser Error")])
def test_sql_errors_exit_2_with_duckdbs_message(home: LakeflowHome, query: Callable[..., Done], sql: str,
                                                message: str) -> None:
    done = query(home, sql)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"lakeflow query: {message}") and "Traceback" not in done.stderr


def test_a_missing_table_says_to_compact_first(home: LakeflowHome, query: Callable[..., Done]) -> None:
    done = query(home, "--target-table", "not-compacted")
    assert done.returncode == 2
    assert "no Iceberg table iot.not-compacted in the local catalog: run `make compact` first" in done.stderr


def test_bad_arguments_exit_2(home: LakeflowHome, query: Callable[..., Done]) -> None:
    both = query(home, "--day", "2025-11-22", "--since", "2025-11-22")
    assert both.returncode == 2 and "--day cannot be combined" in both.stderr
    bad = query(home, "--since", "yesterday")
    assert bad.returncode == 2 and "expected an ISO date or date-time" in bad.stderr


def test_an_empty_table_gives_empty_results(tmp_path: Path, query: Callable[..., Done]) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    empty = make_home(tmp_path)
    catalog = SqlCatalog("lakeflow", uri=f"sqlite:///{empty.home / 'iceberg.db'}",
                         warehouse=(empty.home / "iceberg").as_uri())
    catalog.create_namespace(("iot",))
    schema = load_schema().iceberg_schema()
    catalog.create_table(("iot", TARGET), schema=schema, partition_spec=load_schema().partition_spec(schema))
    done = query(empty, "--format", "json", "SELECT count(*) AS n FROM readings")
    assert done.returncode == 0 and json.loads(done.stdout) == [{"n": 0}]
    assert "has no rows yet" in done.stderr


def test_the_default_query_counts_records_per_value_of_the_keys_first_field(home: LakeflowHome,
                                                                           query: Callable[..., Done]) -> None:
    done = query(home, "--format", "json")
    assert done.returncode == 0, done.stderr
    expected = Counter(r["sensor_id"] for r in ROWS)
    assert [(r["sensor_id"], r["records"]) for r in json.loads(done.stdout)] == sorted(expected.items())


def test_the_default_query_fits_any_declared_schema() -> None:
    doc = json.loads(default_schema_text())
    doc["x-lakeflow"]["key"] = ["location", "seq"]
    assert default_sql(parse_schema(json.dumps(doc))) == (
        'SELECT "location", count(*) AS records, min("ts") AS first, max("ts") AS last FROM readings '
        'GROUP BY "location" ORDER BY "location"')
    doc["x-lakeflow"] = {"event-time": "timestamp_ms", "event-time-column": "taken"}
    assert default_sql(parse_schema(json.dumps(doc))) == (
        'SELECT count(*) AS records, min("taken") AS first, max("taken") AS last FROM readings')
