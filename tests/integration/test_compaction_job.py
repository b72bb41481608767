"""The compaction job end to end: ``lakeflow compact`` with each engine — Spark (local[2]) and
pyarrow in the driver — real pyiceberg, embedded catalogs.

One scenario per engine, shared by the assertions: a crash between writing Parquet and
committing, the recovering run, a rerun with nothing new, new files (some re-delivering rows the
table holds) under two concurrent runs, and a run refused by a held lock. Both engines must give
the same answers.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lakeflow.compaction.config import CRASH_EXIT, ENV_CRASH_AT
from lakeflow.compaction.parse import EMPTY, MALFORMED
from lakeflow.compaction.files import Storage
from lakeflow.compaction.lease import Lease
from lakeflow.compaction.naming import timestamp
from lakeflow.cli.main import EXIT_BUSY
from lakeflow.lineage.openlineage import read_events
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_in_progress, write_parts

pytestmark = pytest.mark.slow

DAY = 1763683200000            # 2025-11-21T00:00:00Z
START = DAY + 22 * 3_600_000   # run-a starts at 22:00 and crosses midnight
TARGET = "sensor-readings-compacted"


@dataclass
class Step:
    code: int
    stdout: str
    stderr: str
    report: dict


def compact(home: LakeflowHome, name: str, *args: str, **env: str) -> Step:
    path = home.home.parent / f"report-{name}.json"
    done = home.compact("--report", str(path), *args, extra_env=env)
    report = json.loads(path.read_text()) if path.exists() else {}
    return Step(done.returncode, done.stdout, done.stderr, report)


def key(row: dict) -> tuple:
    return (row["run_id"], row["seq"])


def table_rows(home: LakeflowHome) -> dict[tuple, dict]:
    """The Iceberg table's rows by (run_id, seq); fails on a duplicate key."""
    rows = home.iceberg_table(TARGET).scan().to_arrow().to_pylist()
    by_key = {key(r): r for r in rows}
    assert len(by_key) == len(rows), "duplicate (run_id, seq) in the table"
    return by_key


def expected(rows: list[dict]) -> dict[tuple, dict]:
    return {key(r): {**r, "ts": datetime.fromtimestamp(r["timestamp_ms"] / 1000, tz=timezone.utc)} for r in rows}


@pytest.fixture(scope="module", params=["spark", "arrow"])
def scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Raw files as the Flink sink commits them, plus every kind of bad input; one engine."""
    home = make_home(tmp_path_factory.mktemp(f"compact-{request.param}"))
    home.env["COMPACT_ENGINE"] = request.param
    run_a = readings("run-a", 600, start_ms=START, step_ms=20_000, seed=1)       # 22:00 → 01:20 (two days)
    run_b = readings("run-b", 200, start_ms=DAY + 3_600_000, step_ms=5_000, seed=2)  # same seq values as run-a
    a_files = write_parts(home.raw, run_a, 25, bucket_folders=True)              # 24 files, hourly folders
    write_parts(home.raw / "batch b", run_b, 25)                                 # 8 files (a space: URI quoting)
    shutil.copy(a_files[3], home.raw / "part-replayed-0-0.json")                 # 25 rows delivered twice
    write_in_progress(home.raw, run_a[:10])
    (home.raw / "part-bad-0-0.json").write_text("")                              # empty
    (home.raw / "part-bad-0-1.json").write_text(json.dumps(run_a[:5])[:-30])     # truncated
    (home.raw / "part-bad-0-2.json").write_text('{"not": "an array"')            # not JSON
    run_c = readings("run-c", 10, start_ms=DAY + 7_200_000, seed=3)
    broken = [dict(r) for r in run_c]
    broken[2]["seq"] = "three"                                                   # mistyped
    broken[5]["location"] = None                                                 # null
    (home.raw / "part-mixed-0-0.json").write_text(json.dumps(broken))
    good_c = [r for i, r in enumerate(run_c) if i not in (2, 5)]
    return {"home": home, "rows": run_a + run_b + good_c, "run_a": run_a, "engine": request.param}


# ~5,000 Parquet bytes per row assumed and 1 MiB files: the 833 good rows make 4 files' worth.
SMALL_FILES = {"COMPACT_BYTES_PER_ROW": "5000", "COMPACT_TARGET_FILE_MB": "1"}


@pytest.fixture(scope="module")
def crashed(scenario: dict) -> Step:
    return compact(scenario["home"], "crash", **SMALL_FILES, **{ENV_CRASH_AT: "after-write"})


@pytest.fixture(scope="module")
def first(scenario: dict, crashed: Step) -> Step:
    home: LakeflowHome = scenario["home"]
    scenario["orphans"] = sorted((home.home / "iceberg").rglob("*.parquet"))
    return compact(home, "first", **SMALL_FILES)


@pytest.fixture(scope="module")
def rerun(scenario: dict, first: Step) -> Step:
    return compact(scenario["home"], "rerun")


@pytest.fixture(scope="module")
def second(scenario: dict, rerun: Step) -> tuple[Step, Step]:
    """New files — one re-delivering committed rows — compacted by two runs started together."""
    home: LakeflowHome = scenario["home"]
    more = readings("run-a", 100, start_ms=START + 600 * 20_000, step_ms=20_000, seq_start=600, seed=4)
    write_parts(home.raw, more, 25)
    (home.raw / "part-again-0-0.json").write_text(json.dumps(scenario["run_a"][100:125]))
    scenario["rows"] = scenario["rows"] + more
    paths = [home.home.parent / f"report-second-{i}.json" for i in (0, 1)]
    procs = [home.start_compact("--report", str(p), "--delete-source", "--delete-min-age", "0s") for p in paths]
    outs = [p.communicate(timeout=300) for p in procs]
    return tuple(Step(p.returncode, o, e, json.loads(path.read_text()) if path.exists() else {})
                 for p, (o, e), path in zip(procs, outs, paths))


def test_crash_after_write_leaves_nothing_visible(scenario: dict, crashed: Step) -> None:
    home: LakeflowHome = scenario["home"]
    assert crashed.code == CRASH_EXIT, crashed.stderr[-2000:]
    assert home.iceberg_table(TARGET).current_snapshot() is None
    orphans = list((home.home / "iceberg").rglob("data/ts_day=*/*.parquet"))
    assert orphans, "the crashed run should have left its renamed data files behind"
    quarantine = quarantined(home)                  # set aside under the table before its commit, never in raw
    assert [(kind, len(runs)) for kind, runs in sorted(quarantine.items())] == [("files", 1), ("records", 1)]
    assert not (home.raw / "_quarantine").exists()
    events = [e for e in read_events(home.home / "lineage") if e["eventType"] != "START"]
    assert events == []


def test_first_run_compacts_every_good_row_exactly_once(scenario: dict, first: Step) -> None:
    home: LakeflowHome = scenario["home"]
    assert first.code == 0, first.stderr[-3000:]
    r = first.report
    assert r["engine"] == scenario["engine"]
    assert table_rows(home) == expected(scenario["rows"])
    on_disk = sorted(str(p) for p in (home.home / "iceberg").rglob("*.parquet"))
    referenced = sorted(f["file_path"].removeprefix("file://")
                        for f in home.iceberg_table(TARGET).inspect.files().to_pylist())
    assert on_disk == referenced, "orphans of the crashed run must be gone"
    assert r["orphans_removed"] == len(scenario["orphans"]) > 0
    assert sorted(p.name.rsplit("__", 1)[0] for p in scenario["orphans"]) == \
        sorted(Path(p).name.rsplit("__", 1)[0] for p in referenced), \
        "same input, same table state: same file names but for the run id"
    assert (r["files_in"], r["files_compacted"], r["files_quarantined"]) == (37, 34, 3)
    assert r["rows_out"] == 808 and r["duplicates_dropped"] == 25 and r["rows_quarantined"] == 2
    assert r["rows_in"] == r["rows_out"] + r["duplicates_dropped"] + r["rows_quarantined"]
    assert r["bytes_out"] == sum(p.stat().st_size for p in (home.home / "iceberg").rglob("*.parquet"))
    # arrow: the batch in about 4 target-size files; spark: each of its 2 tasks writes its own (per day)
    assert r["small_file_reduction"] == round(34 / r["files_out"], 1) >= (6 if scenario["engine"] == "arrow" else 4)
    assert "small-file reduction" in first.stdout and "rows       835 in → 808 out" in first.stdout


def test_data_files_are_named_sized_and_partitioned_by_day(scenario: dict, first: Step) -> None:
    home: LakeflowHome = scenario["home"]
    table = home.iceberg_table(TARGET)
    paths = [Path(f["file_path"].removeprefix("file://")) for f in table.inspect.files().to_pylist()]
    assert len(paths) == first.report["files_out"]
    arrow = scenario["engine"] == "arrow"
    # arrow: 4 contiguous time ranges, one may straddle midnight and split in two; spark: each task's rows
    # (a share of the files, any times) in about 2 files, each split at midnight
    assert 4 <= len(paths) <= (5 if arrow else 8)
    spans = []
    for path in paths:
        times = pq.read_table(path, columns=["timestamp_ms"]).column(0).to_pylist()
        table_name, day, lo, hi, seq, run = path.stem.split("__")
        assert (table_name, path.parent.name, run) == (TARGET, f"ts_day={day}", first.report["run_id"])
        assert (lo, hi) == (timestamp(min(times)), timestamp(max(times)))
        assert {datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d") for ms in times} == {day}
        assert times == sorted(times)
        spans.append((day, min(times), max(times), seq))
    spans.sort()
    assert [s[3] for s in spans] == [f"00000001-{i:03d}" for i in range(1, len(spans) + 1)]
    if arrow:
        assert all(a[2] <= b[1] for a, b in zip(spans, spans[1:])), "files cover consecutive time ranges"
    assert {s[0] for s in spans} == {"2025-11-21", "2025-11-22"}
    assert str(table.spec().fields[0].transform) == "day"
    assert table.current_snapshot().summary["lakeflow.raw-files"] == "34"


def quarantined(home: LakeflowHome) -> dict[str, dict[str, Path]]:
    """The Iceberg table's quarantine: its run folders (``run=<id>``) by kind (``records``, ``files``)."""
    root = Path(Storage(home.iceberg_table(TARGET).location()).local_path("_lakeflow/quarantine"))
    return {kind.name: {run.name: run for run in kind.iterdir()} for kind in root.iterdir()} if root.exists() else {}


def test_bad_input_is_quarantined_with_reasons_not_lost(scenario: dict, first: Step) -> None:
    home: LakeflowHome = scenario["home"]
    reasons = {q["file"]: q["reason"] for q in first.report["quarantined"]}
    assert reasons == {"part-bad-0-0.json": EMPTY, "part-bad-0-1.json": MALFORMED, "part-bad-0-2.json": MALFORMED}
    run = f"run={first.report['run_id']}"           # the crashed run's went with its other files (recovery)
    quarantine = quarantined(home)
    assert {kind: list(runs) for kind, runs in quarantine.items()} == {"files": [run], "records": [run]}
    files, records_dir = quarantine["files"][run], quarantine["records"][run]
    table = Storage(home.iceberg_table(TARGET).location())
    assert first.report["quarantined_files_path"] == table.uri(f"_lakeflow/quarantine/files/{run}")
    assert first.report["records_path"] == table.uri(f"_lakeflow/quarantine/records/{run}")
    for name, reason in reasons.items():            # copied with its reason; the raw file is left in place
        assert (home.raw / name).exists() and (files / name).read_bytes() == (home.raw / name).read_bytes()
        beside = json.loads((files / f"{name}.reason.json").read_text())
        assert (beside["reason"], beside["file"]) == (reason, (home.raw / name).as_uri())
    assert (files / "part-bad-0-1.json").read_text().startswith("[{")
    assert not (home.raw / "_quarantine").exists(), "the compaction writes nothing into the raw table"
    records = [json.loads(line) for p in records_dir.rglob("*.json") for line in p.read_text().splitlines()]
    assert sorted(r["reason"] for r in records) == ["field seq: expected an integer, got a string",
                                                    "missing field location"]
    assert all(r["file"].endswith("part-mixed-0-0.json") for r in records)
    assert any(p.name.startswith(".part-") for p in home.raw.iterdir()), "in-progress file must be left alone"


def test_lineage_events_carry_the_run(scenario: dict, first: Step) -> None:
    home: LakeflowHome = scenario["home"]
    events = [e for e in read_events(home.home / "lineage") if e["run"]["runId"] == first.report["run_id"]]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    done = events[-1]
    (inp,), (out,) = done["inputs"], done["outputs"]
    assert (inp["namespace"], inp["name"]) == ("file", str(home.raw))
    assert inp["facets"]["symlinks"]["identifiers"][0]["name"] == "iot.sensor-readings"
    assert inp["inputFacets"]["inputStatistics"]["fileCount"] == 37
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 808
    assert out["name"].endswith("/iceberg/iot/sensor-readings-compacted")
    facet = done["run"]["facets"]["lakeflow_compaction"]
    assert len(facet["quarantined"]) == 3 and facet["rows_quarantined"] == 2


def test_rerun_without_new_files_adds_nothing(scenario: dict, rerun: Step, first: Step) -> None:
    home: LakeflowHome = scenario["home"]
    assert rerun.code == 0, rerun.stderr[-2000:]
    assert rerun.report["files_in"] == 0 and rerun.report["snapshot_id"] is None
    assert home.iceberg_table(TARGET).current_snapshot().snapshot_id == first.report["snapshot_id"]


def test_new_files_once_even_with_two_concurrent_runs(scenario: dict, second: tuple[Step, Step]) -> None:
    home: LakeflowHome = scenario["home"]
    codes = sorted(s.code for s in second)
    assert codes in ([0, 0], [0, EXIT_BUSY]), [s.stderr[-2000:] for s in second]
    if codes == [0, EXIT_BUSY]:
        refused = next(s for s in second if s.code)
        assert "refused: another compaction of iot.sensor-readings-compacted is running" in \
            refused.stdout + refused.stderr
    worked = next(s for s in second if s.code == 0 and s.report.get("files_in"))
    assert worked.report["rows_out"] == 100 and worked.report["duplicates_dropped"] == 25
    assert table_rows(home) == expected(scenario["rows"])
    left = sorted(p.name for p in home.raw.rglob("part-*.json"))
    assert left == ["part-bad-0-0.json", "part-bad-0-1.json", "part-bad-0-2.json"], \
        "--delete-source removes every compacted raw file, and no quarantined one"
    assert any(p.name.startswith(".part-") for p in home.raw.iterdir())


def test_a_held_lock_refuses_the_run(scenario: dict, second: tuple[Step, Step]) -> None:
    home: LakeflowHome = scenario["home"]
    with Lease(Storage(home.iceberg_table(TARGET).location()), "test-run", "test", ttl_s=60):
        step = compact(home, "locked")
    assert step.code == EXIT_BUSY and "refused: another compaction" in step.stdout + step.stderr
