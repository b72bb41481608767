"""Compaction building blocks without Spark: discovery, names, ledger, recovery, the Iceberg commit,
lineage identities, configuration and the launcher. Real files, real pyiceberg (SQLite)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pyiceberg.exceptions import ServiceUnavailableError

from lakeflow.catalog.errors import CatalogUnavailable
from lakeflow.catalog.local import LocalCatalog
from lakeflow.compaction import launch
from lakeflow.compaction.commit import (
    LEDGER_PROPERTY,
    CommitConflict,
    commit,
    iceberg_catalog,
    open_target,
    rest_properties,
)
from lakeflow.cli.compact import job_argv, options_of
from lakeflow.cli.compact import register as register_compact
from lakeflow.compaction.config import CRASH_POINTS, CompactOptions, load_config
from lakeflow.compaction.discover import list_parts
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.ledger import COMPACTED, QUARANTINED, Ledger, LedgerError, RunRecord, entries_for, load_ledger
from lakeflow.compaction.lineage import lineage_run, raw_datasets
from lakeflow.compaction.naming import data_file_name, final_paths, is_data_file_of, timestamp
from lakeflow.compaction.parse import EMPTY, MALFORMED
from lakeflow.compaction.quarantine import copy_quarantined, sort_files
from lakeflow.compaction.rows import WrittenFile
from lakeflow.compaction.report import CompactionReport
from lakeflow.compaction.source import raw_table
from lakeflow.readings import is_committed_part
from lakeflow.schema import load_schema
from lakeflow.settings import SettingsError, load_settings
from lakeflow.uris import iceberg_uri
from tests.standins.http_stub import QuietHandler, send_json, serve, stop, url_of
from tests.support.fixtures_compaction import json_array, make_home, readings, written_file

DAY_MS = 1763683200000  # 2025-11-21T00:00:00Z
SCHEMA = load_schema()  # lakeflow's default: the sensor reading


def settings_env(home: Path, **extra: str) -> dict:
    return {"LAKEFLOW_HOME": str(home), "LAKEFLOW_ENV_FILE": str(home / "none.env"), **extra}


# --- discovery ------------------------------------------------------------------------------

@pytest.mark.parametrize("rel, committed", [
    ("part-6f1c-0-0.json", True),
    ("2026-11-21--10/part-6f1c-1-7.json", True),
    (".part-6f1c-0-1.json.inprogress.5e2a", False),           # Flink in-progress / pending
    ("2026-11-21--10/.part-6f1c-0-1.json.inprogress.5e2a", False),
    ("part-6f1c-0-1.json.inprogress.5e2a", False),
    ("_quarantine/part-6f1c-0-0.json", False),                # bookkeeping folders
    ("_lakeflow/compaction/x/ledger-1.json.gz", False),
    (".hidden/part-1-0-0.json", False),
    ("_SUCCESS", False),
    ("part-6f1c-0-0.csv", False),
])
def test_committed_part_files_only(rel: str, committed: bool) -> None:
    assert is_committed_part(rel) is committed


def test_listing_walks_sub_folders_and_counts_the_rest(tmp_path: Path) -> None:
    for rel in ("part-a-0-0.json", "2026-11-21--10/part-a-1-0.json", ".part-a-0-1.json.inprogress.x",
                "_quarantine/part-b-0-0.json", "notes.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("[]")
    listing = list_parts(Storage(tmp_path.as_uri()))
    assert [p.rel for p in listing.parts] == ["2026-11-21--10/part-a-1-0.json", "part-a-0-0.json"]
    assert listing.ignored == 3
    assert all(p.size == 2 for p in listing.parts)


def test_storage_paths(tmp_path: Path) -> None:
    s = Storage(tmp_path.as_uri() + "/")
    assert s.uri("a/b.json") == f"file://{tmp_path}/a/b.json"
    assert s.relative(f"file:{tmp_path}/a/b.json") == "a/b.json"        # Spark's spelling
    assert s.relative(f"file://{tmp_path}/a/b.json") == "a/b.json"
    with pytest.raises(ValueError, match=f"^file://{tmp_path.parent}/elsewhere.json is not under {s.location}$"):
        s.relative(f"file://{tmp_path.parent}/elsewhere.json")
    assert Storage("s3://bucket/raw/t", {"s3.region": "us-east-1"}).uri("p=1/x.json") == "s3://bucket/raw/t/p=1/x.json"
    assert iceberg_uri("s3a://bucket/raw/t") == "s3://bucket/raw/t"
    assert iceberg_uri("file:/tmp/x") == "file:///tmp/x"


def test_storage_keeps_bytes_as_given(tmp_path: Path) -> None:
    """A ``.gz`` name must not make pyarrow (de)compress behind our back."""
    s = Storage(tmp_path.as_uri())
    s.write("d/ledger-1.json.gz", b"\x1f\x8b not really gzip")
    assert s.read("d/ledger-1.json.gz") == b"\x1f\x8b not really gzip"
    s.move("d/ledger-1.json.gz", "e/x.json.gz")
    assert not s.exists("d/ledger-1.json.gz") and s.exists("e/x.json.gz")
    s.delete("e/x.json.gz")
    s.delete("e/x.json.gz")  # missing: fine
    s.delete_dir("nowhere")


# --- names ----------------------------------------------------------------------------------

RUN = "0b6a3f3e-5c2d-4f7e-9a1b-2c3d4e5f6a7b"


def test_data_file_names_are_informative_and_unique_per_run() -> None:
    assert timestamp(DAY_MS + 36_900_123) == "20251121T101500123Z"
    name = data_file_name("sensor-readings-compacted", "2025-11-21", DAY_MS + 36_900_123, DAY_MS + 43_199_999, 7, 1, RUN)
    assert name == ("sensor-readings-compacted__2025-11-21__20251121T101500123Z__20251121T115959999Z"
                    f"__00000007-001__{RUN}.parquet")
    staged = [WrittenFile("s/ts_day=2025-11-22/p1.parquet", (20414,), "ts_day=2025-11-22", 10, 100,
                          DAY_MS + 86_400_000, DAY_MS + 86_500_000, {}),
              WrittenFile("s/ts_day=2025-11-21/p0.parquet", (20413,), "ts_day=2025-11-21", 10, 100, DAY_MS + 5,
                          DAY_MS + 9, {})]
    paths = final_paths(staged, "t", 3, RUN)
    assert paths == [f"data/ts_day=2025-11-22/t__2025-11-22__20251122T000000000Z__20251122T000140000Z__00000003-002__{RUN}.parquet",
                     f"data/ts_day=2025-11-21/t__2025-11-21__20251121T000000005Z__20251121T000000009Z__00000003-001__{RUN}.parquet"]
    assert final_paths(list(reversed(staged)), "t", 3, RUN) == list(reversed(paths))
    other = "1b6a3f3e-5c2d-4f7e-9a1b-2c3d4e5f6a7b"
    assert final_paths(staged, "t", 3, other) != paths  # two runs on the same table state never collide
    assert all(is_data_file_of(p, RUN) for p in paths) and not any(is_data_file_of(p, other) for p in paths)
    by_place = WrittenFile("s/location=lab%20one/b=3/p.parquet", ("lab one", 3), "location=lab%20one/b=3", 1, 1, 5, 9, {})
    (path,) = final_paths([by_place], "t", 1, RUN)  # other partitionings: the folders Iceberg names, values in the name
    assert path == f"data/location=lab%20one/b=3/t__lab_20one-3__19700101T000000005Z__19700101T000000009Z__00000001-001__{RUN}.parquet"
    assert is_data_file_of(path, RUN)
    unpartitioned = WrittenFile("s/p.parquet", (), "", 1, 1, 5, 9, {})
    assert final_paths([unpartitioned], "t", 1, RUN)[0].startswith("data/t__all__")
    assert not is_data_file_of(f"data/_staging/{RUN}/ts_day=2025-11-21/t__x__{RUN}.parquet", RUN)


# --- ledger ---------------------------------------------------------------------------------

def _listing(tmp_path: Path, names: list[str]):
    for n in names:
        (tmp_path / n).write_text("[]")
    return list_parts(Storage(tmp_path.as_uri()))


def test_ledger_tracks_consumed_files_and_forgets_vanished_ones(tmp_path: Path) -> None:
    listing = _listing(tmp_path, ["part-a-0-0.json", "part-a-0-1.json", "part-a-0-2.json"])
    first = Ledger().advance(listing, {**entries_for(listing.parts[:1], COMPACTED, "r1", rows={"part-a-0-0.json": 5}),
                                       **entries_for(listing.parts[1:2], QUARANTINED, "r1",
                                                     reasons={"part-a-0-1.json": EMPTY})},
                             RunRecord("r1", "t", 1, 5))
    assert [f.rel for f in first.new_parts(listing)] == ["part-a-0-2.json"]
    assert [f.rel for f in first.consumed(listing, QUARANTINED)] == ["part-a-0-1.json"]
    assert first.files["part-a-0-0.json"].rows == 5 and first.committed("r1") and not first.committed("r2")

    (tmp_path / "part-a-0-0.json").unlink()  # deleted after compaction (--delete-source)
    listing2 = list_parts(Storage(tmp_path.as_uri()))
    second = first.advance(listing2, entries_for(listing2.parts[-1:], COMPACTED, "r2"), RunRecord("r2", "t", 1, 0))
    assert sorted(second.files) == ["part-a-0-1.json", "part-a-0-2.json"]
    assert [r.run_id for r in second.runs] == ["r1", "r2"]
    again = Ledger.from_bytes(second.to_bytes(), uri="x")
    assert again.files == second.files and again.runs == second.runs


def test_load_ledger_refuses_a_missing_or_foreign_ledger(tmp_path: Path) -> None:
    s, raw = Storage((tmp_path / "ice").as_uri()), Storage((tmp_path / "raw").as_uri())
    assert load_ledger(None, s, raw).files == {}
    with pytest.raises(LedgerError, match="missing"):
        load_ledger(s.uri("_lakeflow/ledger-gone.json.gz"), s, raw)
    with pytest.raises(LedgerError, match="neither under the table nor under the raw table"):
        load_ledger("s3://elsewhere/ledger.json.gz", s, raw)
    s.write("_lakeflow/bad.json.gz", b"garbage")
    with pytest.raises(LedgerError, match="unreadable"):
        load_ledger(s.uri("_lakeflow/bad.json.gz"), s, raw)
    raw.write("_lakeflow/old.json.gz", Ledger(runs=(RunRecord("r0", "t", 1, 1),)).to_bytes())  # before 0.2
    assert load_ledger(raw.uri("_lakeflow/old.json.gz"), s, raw).committed("r0")


# --- quarantine -----------------------------------------------------------------------------

def test_sort_files_sets_aside_empty_and_malformed(tmp_path: Path) -> None:
    unread = [FileEntry(rel, 1, None) for rel in ("zero.json", "blank.json", "garbage.json", "none.json")]
    reasons = {"zero.json": EMPTY, "blank.json": EMPTY, "garbage.json": MALFORMED}
    files = [FileEntry("a.json", 100, None), *unread]
    s = sort_files(files, reasons, rows={"a.json": 4},
                   bad_rows={"a.json": 1})
    assert [f.rel for f in s.compacted] == ["a.json", "none.json"]
    assert [f.rel for f in s.quarantined] == ["zero.json", "blank.json", "garbage.json"]
    assert s.rows == {"a.json": 4, "none.json": 0} and s.bad_rows == {"a.json": 1, "none.json": 0}

    raw, target = Storage((tmp_path / "raw").as_uri()), Storage((tmp_path / "table").as_uri())
    raw.write("2026-11-21--10/bad.json", b"[{")
    before = raw.list()
    copied = copy_quarantined(raw, target, [FileEntry("2026-11-21--10/bad.json", 2, None)],
                              {"2026-11-21--10/bad.json": MALFORMED}, "r1")
    assert copied == 1 and raw.list() == before                       # the raw table: left as it was
    copy = "_lakeflow/quarantine/files/run=r1/2026-11-21--10/bad.json"
    assert target.read(copy) == b"[{"
    reason = json.loads(target.read(f"{copy}.reason.json"))
    assert reason == {"file": raw.uri("2026-11-21--10/bad.json"), "size": 2, "reason": MALFORMED, "run_id": "r1"}


def test_a_run_quarantines_under_the_iceberg_table_and_status_shows_where(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-process run over a good file, one with a bad record and an empty one: the raw table is left
    file for file as it was; the record and a copy of the empty file are under the Iceberg table's
    quarantine, which ``lakeflow status`` names, with the last commit's records."""
    from lakeflow.cli.compact import compaction_pipeline, job_options
    from lakeflow.compaction.status import table_status

    home = make_home(tmp_path)
    home.enter(monkeypatch)
    rows = readings("run-q", 6, start_ms=DAY_MS, seed=5)
    rows[3]["seq"] = "three"
    (home.raw / "part-q-0-0.json").write_text(json_array(rows))
    (home.raw / "part-q-0-1.json").write_text("")
    before = {p: p.read_bytes() for p in home.raw.rglob("*")}
    assert compaction_pipeline()(load_config(job_options(["--engine", "arrow"]))) == 0
    assert {p: p.read_bytes() for p in home.raw.rglob("*")} == before

    status = table_status(load_config(env=home.env))
    table = Storage(home.iceberg_table().location())
    assert status.quarantine == table.uri("_lakeflow/quarantine")
    run = status.last_commit["run_id"]
    assert status.last_commit["records"] == table.uri(f"_lakeflow/quarantine/records/run={run}")
    assert {e.rel for e in table.list("_lakeflow/quarantine")} == {
        f"_lakeflow/quarantine/records/run={run}/part-00000.json",
        f"_lakeflow/quarantine/files/run={run}/part-q-0-1.json",
        f"_lakeflow/quarantine/files/run={run}/part-q-0-1.json.reason.json"}
    lines = status.lines()
    assert f"quarantine: {status.quarantine} (bad records and copies of bad files, by run)" in lines
    assert any(line.endswith(f"; quarantined records: {status.last_commit['records']}") for line in lines)


# --- the Iceberg commit ---------------------------------------------------------------------

def _written(target, rows: list[dict], folder: str) -> list[tuple[str, WrittenFile]]:
    """``rows`` (of the default schema, one day's) written as the engines write a table's data files."""
    return [written_file(target, rows, tag=folder)]


def _reading(seq: int, ms: int) -> dict:
    return {"sensor_id": "sensor-001", "run_id": "r", "seq": seq, "timestamp_ms": ms, "temperature": 1.0,
            "humidity": 50.0, "pressure": 1000.0, "location": "lab"}


def test_commit_adds_files_and_ledger_atomically_and_rejects_a_stale_run(tmp_path: Path) -> None:
    settings = load_settings(settings_env(tmp_path))
    source = (tmp_path / "raw").as_uri()
    target = open_target(iceberg_catalog(settings), ("iot",), "t", source, SCHEMA)
    assert target.table.spec().fields[0].name == "ts_day" and str(target.table.spec().fields[0].transform) == "day"
    stale = open_target(iceberg_catalog(settings), ("iot",), "t", source, SCHEMA)  # a concurrent run's view
    data = _written(target, [_reading(1, DAY_MS + 1), _reading(2, DAY_MS + 2)], "f1")

    assert target.next_sequence == 1
    snap = commit(target, data, f"{source}/_lakeflow/l1.json.gz", source, "run-1", {"lakeflow.raw-files": "2"},
                  SCHEMA)
    table = iceberg_catalog(settings).load_table(("iot", "t"))
    assert table.current_snapshot().snapshot_id == snap
    assert table.properties[LEDGER_PROPERTY] == f"{source}/_lakeflow/l1.json.gz"
    assert table.current_snapshot().summary["lakeflow.raw-files"] == "2"
    assert table.scan().to_arrow().num_rows == 2
    assert target.files_overlapping(DAY_MS, DAY_MS + 1, "timestamp_ms") == [data[0][0]]
    assert target.files_overlapping(DAY_MS + 10, DAY_MS + 20, "timestamp_ms") == []
    (entry,) = table.scan().plan_files()
    assert entry.file.partition[0] == 20413 and entry.file.record_count == 2  # day(ts) 2025-11-21, as the writer said
    assert entry.file.lower_bounds[4] and entry.file.upper_bounds[4]  # bounds of timestamp_ms (id 4): pruning works

    other = _written(target, [_reading(3, DAY_MS + 3)], "f2")
    with pytest.raises(CommitConflict, match="changed while this run worked"):
        commit(stale, other, f"{source}/_lakeflow/l2.json.gz", source, "run-2", {}, SCHEMA)
    table = iceberg_catalog(settings).load_table(("iot", "t"))
    assert table.scan().to_arrow().num_rows == 2 and table.properties[LEDGER_PROPERTY].endswith("l1.json.gz")

    with pytest.raises(CommitConflict, match="compacted from"):
        open_target(iceberg_catalog(settings), ("iot",), "t", (tmp_path / "other-raw").as_uri(), SCHEMA)


CONFIG = {"defaults": {"prefix": "0190-wh"}, "overrides": {}, "endpoints": []}


class _IcebergConfig(QuietHandler):
    """Answers the Iceberg REST ``GET /v1/config`` the way Lakekeeper does; records the request."""

    seen: list = []

    def do_GET(self) -> None:  # noqa: N802
        type(self).seen.append((self.path, self.headers.get("Authorization"), self.headers.get("x-project-id")))
        send_json(self, 200, CONFIG)


def test_rest_catalog_sends_the_lakekeeper_auth_and_warehouse(tmp_path: Path) -> None:
    server = serve(_IcebergConfig)
    try:
        url = url_of(server)
        settings = load_settings(settings_env(tmp_path, LAKEKEEPER=url, WAREHOUSE_ID="demo", TOKEN="tok-123",
                                              PROJECT_ID="p1"))
        catalog = iceberg_catalog(settings)
        assert _IcebergConfig.seen[-1] == ("/catalog/v1/config?warehouse=demo", "Bearer tok-123", "p1")
        assert "tok-123" not in repr(catalog)
    finally:
        stop(server)
    oauth = load_settings(settings_env(tmp_path, LAKEKEEPER=url, WAREHOUSE_ID="demo", OAUTH_TOKEN_URL=f"{url}/token",
                                       OAUTH_CLIENT_ID="cid", OAUTH_CLIENT_SECRET="s3cr3t"))
    props = rest_properties(oauth)
    assert props["credential"] == "cid:s3cr3t" and props["oauth2-server-uri"] == f"{url}/token"
    assert props["scope"] == "lakekeeper" and "token" not in props


class _SlowIceberg(QuietHandler):
    """An Iceberg REST catalog that hangs on ``/hang`` paths, answers a POST with 503 and the
    config (after one 503 on ``/fail-once`` paths) normally; records each request."""

    seen: list = []

    def do_GET(self) -> None:  # noqa: N802
        type(self).seen.append(("GET", self.path))
        if "/hang/" in self.path:
            time.sleep(30)
        first = sum(1 for m, p in type(self).seen if m == "GET" and "/fail-once/" in p) == 1
        send_json(self, 503, {}) if first else send_json(self, 200, CONFIG)

    def do_POST(self) -> None:  # noqa: N802
        type(self).seen.append(("POST", self.path))
        send_json(self, 503, {"error": {"message": "busy", "type": "ServiceUnavailable", "code": 503}})


def test_rest_catalog_times_out_and_never_resends_a_write(tmp_path: Path) -> None:
    server = serve(_SlowIceberg)
    url = url_of(server)
    try:
        env = dict(WAREHOUSE_ID="demo", TOKEN="t", HTTP_TIMEOUT_S="1", HTTP_MAX_RETRIES="0")
        started = time.monotonic()
        with pytest.raises(CatalogUnavailable, match="did not answer: .*Read timed out"):  # urllib3's, no retry
            iceberg_catalog(load_settings(settings_env(tmp_path, LAKEKEEPER=f"{url}/hang", **env)))
        assert time.monotonic() - started < 10
        catalog = iceberg_catalog(load_settings(settings_env(tmp_path, LAKEKEEPER=f"{url}/fail-once",
                                                             **{**env, "HTTP_MAX_RETRIES": "2"})))
        assert [m for m, p in _SlowIceberg.seen if "/fail-once/" in p] == ["GET", "GET"]  # a read: retried
        with pytest.raises(ServiceUnavailableError, match="busy"):
            catalog.create_namespace(("iot",))
        assert [m for m, p in _SlowIceberg.seen if "/fail-once/" in p] == ["GET", "GET", "POST"]  # a write: once
    finally:
        stop(server)


# --- lineage --------------------------------------------------------------------------------

def test_lineage_names_join_the_flink_side_and_fail_is_recorded(tmp_path: Path) -> None:
    from lakeflow.ingest.job import IngestJob, TableWrite
    from lakeflow.lineage import datasets
    from lakeflow.lineage.stored_runs import read_runs

    env = settings_env(tmp_path / "home")
    config = load_config(env=env)
    handle = LocalCatalog(config.settings.home).register(("iot",), "sensor-readings")
    raw = raw_table(handle)
    declared = IngestJob.plan(config.settings, [TableWrite.of(config.stream, handle)]).job_parameters()
    canonical, alias = raw_datasets(config, raw)
    assert canonical == datasets.from_location(declared[datasets.PARAM_LOCATION])
    assert alias == datasets.catalog_alias(declared[datasets.PARAM_CATALOG_URI], declared[datasets.PARAM_WAREHOUSE],
                                           declared[datasets.PARAM_NAMESPACE], declared[datasets.PARAM_TABLE])

    target = open_target(iceberg_catalog(config.settings), ("iot",), config.target_table, raw.location, config.schema)
    report = CompactionReport(run_id=config.run_id, source=raw.location, target=config.target_name)
    with pytest.raises(RuntimeError, match="boom"):
        with lineage_run(config, raw, target, report):
            report.rows_in = 7
            raise RuntimeError("boom")
    (run,) = read_runs(config.settings.lineage_dir)
    assert run.run_id == config.run_id and run.event_type == "FAIL" and "boom" in run.properties["error"]
    assert run.inputs == (canonical,) and run.aliases[canonical] == (alias,)
    assert run.outputs == (datasets.from_location(target.location),)
    assert report.status == "failed"


# --- configuration, launcher --------------------------------------------------------------

def test_config_defaults_and_errors_name_the_variable(tmp_path: Path) -> None:
    c = load_config(env=settings_env(tmp_path))
    assert (c.target_table, c.target_file_bytes, c.delete_source) == ("sensor-readings-compacted", 128 << 20, False)
    assert (c.delete_min_age_s, c.lease_ttl_s) == (15 * 60, 60)
    c = load_config(CompactOptions(target_file_mb=8, delete_source=True, report=Path("r.json")),
                    settings_env(tmp_path, COMPACT_TABLE="readings_ice"))
    assert (c.target_table, c.target_file_bytes, c.delete_source) == ("readings_ice", 8 << 20, True)
    with pytest.raises(SettingsError) as err:
        load_config(env=settings_env(tmp_path, COMPACT_TARGET_FILE_MB="big", COMPACT_TABLE="sensor-readings",
                                     LAKEFLOW_COMPACT_CRASH_AT="never"))
    text = str(err.value)
    assert "COMPACT_TARGET_FILE_MB='big'" in text and "COMPACT_TABLE='sensor-readings'" in text
    assert "LAKEFLOW_COMPACT_CRASH_AT='never'" in text and CRASH_POINTS[0] in text


def test_launcher_puts_no_secret_on_the_command_line(tmp_path: Path) -> None:
    import argparse
    import shlex

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    register_compact(sub)
    args = parser.parse_args(["compact", "--delete-source", "--target-file-mb", "64", "--report", "r.json",
                              "--engine", "spark", "--spark-conf", "spark.sql.shuffle.partitions=4"])
    options = launch.spark_options(args.master, args.spark_conf)
    job = [str(launch.JOB), "--target-file-mb", "64", "--engine", "spark", "--delete-source", "--report",
           str(Path("r.json").resolve())]
    cmd = launch.submit_command(job_argv(options_of(args)), options)
    assert cmd[0].endswith("pyspark/bin/spark-submit") and cmd[1:3] == ["--master", "local[2]"]
    assert cmd[-len(job):] == job
    assert "spark.sql.shuffle.partitions=4" in cmd and "spark.ui.enabled=false" in cmd
    env = launch.submit_env({"TOKEN": "tok-123", "PATH": "/usr/bin"}, options)
    assert env["TOKEN"] == "tok-123" and not any("tok-123" in part for part in cmd)
    assert env["SPARK_HOME"].endswith("pyspark") and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert shlex.split(env["PYSPARK_SUBMIT_ARGS"]) == [*options, "pyspark-shell"]


def test_report_summary(tmp_path: Path) -> None:
    r = CompactionReport(run_id="r1", source="file:///raw", target="iot.t", files_in=12, files_compacted=10,
               files_quarantined=2, files_out=2, rows_in=100, rows_out=90, rows_quarantined=4,
               duplicates_dropped=6, quarantined=[{"file": "x.json", "reason": EMPTY}])
    r.finish()
    assert r.small_file_reduction == 5.0 and r.rows_in == r.rows_out + r.rows_quarantined + r.duplicates_dropped
    text = "\n".join(r.summary_lines())
    assert "small-file reduction 5.0×" in text and "x.json: empty file" in text
    r.write_json(tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["small_file_reduction"] == 5.0


# --- auto: which engine a batch gets -------------------------------------------------------------

@pytest.mark.parametrize("layout", ["v2", "v1"])
def test_auto_gives_arrow_what_is_below_the_crossover_and_fits_in_half_the_memory_left_under_the_containers_limit(
        layout: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakeflow.compaction.engine import ARROW_PEAK_PER_RAW_BYTE, CROSSOVER_BYTES, arrow_limit, choose
    from lakeflow.runtime import memory

    group = tmp_path / ("memory/pod-1" if layout == "v1" else "pod-1")
    group.mkdir(parents=True)
    limit, usage = ("memory.limit_in_bytes", "memory.usage_in_bytes") if layout == "v1" else ("memory.max",
                                                                                              "memory.current")
    (group / limit).write_text(f"{4 << 30}\n")
    (group / usage).write_text(f"{1 << 30}\n")
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/pod-1\n1:cpu:/\n" if layout == "v1" else "0::/pod-1\n")
    monkeypatch.setattr(memory, "CGROUP", tmp_path)
    monkeypatch.setattr(memory, "PROC_CGROUP", proc)
    assert memory.total_bytes() == min(4 << 30, memory.os.sysconf("SC_PAGE_SIZE") * memory.os.sysconf("SC_PHYS_PAGES"))
    assert memory.available_bytes() <= 3 << 30                      # 4 GiB limit, 1 GiB used
    bound = arrow_limit(None)
    fits = bound.max_bytes
    assert fits == int(memory.available_bytes() / 2 / ARROW_PEAK_PER_RAW_BYTE) < CROSSOVER_BYTES  # memory is less
    assert "memory" in bound.source
    assert [choose("auto", size, bound)[0] for size in (fits, fits + 1)] == ["arrow", "spark"]
    assert choose("auto", fits + 1, bound)[1] == f"auto: {(fits + 1) / 2**20:,.0f} MiB of new JSON > " \
        f"{fits / 2**20:,.0f} MiB, what arrow holds in half the memory available"
    assert arrow_limit(5 << 20) == type(bound)(5 << 20, "COMPACT_ARROW_MAX_MB")  # COMPACT_ARROW_MAX_MB wins
    assert choose("spark", 1, bound) == ("spark", "as configured")
    assert choose("arrow", 10 * fits, bound) == ("arrow", "as configured")
    (group / limit).write_text("max\n" if layout == "v2" else f"{2**63 - 4096}\n")  # no limit: the machine's
    assert memory.total_bytes() == memory.os.sysconf("SC_PAGE_SIZE") * memory.os.sysconf("SC_PHYS_PAGES")
    monkeypatch.setattr(memory, "available_bytes", lambda: 64 << 30)  # memory to spare: the crossover decides
    assert arrow_limit(None).max_bytes == CROSSOVER_BYTES
    assert choose("auto", CROSSOVER_BYTES + 1, arrow_limit(None))[1].endswith("the engines' crossover (make bench-compact)")


def test_arrow_allocates_from_jemalloc_unless_a_pool_was_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The arrow engine's allocations come from jemalloc (less time in the kernel than mimalloc), unless
    ARROW_DEFAULT_MEMORY_POOL chose a pool, or pyarrow has no jemalloc."""
    import pyarrow as pa

    from lakeflow.runtime import memory

    before = pa.default_memory_pool()
    try:
        pa.set_memory_pool(pa.system_memory_pool())
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "system")
        memory.arrow_from_jemalloc()
        assert pa.default_memory_pool().backend_name == "system"
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
        memory.arrow_from_jemalloc()
        has = "jemalloc" in pa.supported_memory_backends()
        assert pa.default_memory_pool().backend_name == ("jemalloc" if has else "system")
    finally:
        pa.set_memory_pool(before)


def test_what_modules_make_while_loading_is_frozen_only_in_a_process_that_keeps_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The collector is paused while modules load; in the CLI's own process (one command, then the end),
    what they made is frozen out of its reach; in any other (a test calling main()), nothing is."""
    import gc

    from lakeflow.runtime import memory

    before = gc.get_freeze_count()
    with memory.modules_loading():
        assert not gc.isenabled()
        made = [[] for _ in range(100)]
    assert gc.isenabled() and gc.get_freeze_count() == before
    monkeypatch.setattr(memory, "_freeze_loaded", True)
    try:
        with memory.modules_loading():
            made += [[] for _ in range(100)]
        assert gc.isenabled() and gc.get_freeze_count() >= before + 200
    finally:
        gc.unfreeze()


def test_compact_arrow_max_mb_unset_means_by_memory_and_set_is_a_number_of_mib(tmp_path: Path) -> None:
    assert load_config(env=settings_env(tmp_path)).arrow_max_bytes is None
    assert load_config(env=settings_env(tmp_path, COMPACT_ARROW_MAX_MB="64")).arrow_max_bytes == 64 << 20
    with pytest.raises(SettingsError, match="COMPACT_ARROW_MAX_MB"):
        load_config(env=settings_env(tmp_path, COMPACT_ARROW_MAX_MB="0"))


def test_spark_shares_are_runs_of_neighbouring_files_balanced_by_bytes_and_ids_rank_larger_files_first() -> None:
    pytest.importorskip("pyspark")
    from lakeflow.compaction.spark.engine import balanced
    from lakeflow.compaction.task import file_ids

    at = [datetime(2026, 11, 28, tzinfo=timezone.utc) + timedelta(seconds=s) for s in (5, 0, 4, 1, 3, 2)]
    parts = [FileEntry(f"part-x-0-{n}.json", size, at[n]) for n, size in enumerate([3, 9, 2, 8, 3, 1])]
    batches = balanced(parts, 2)  # commit order: 1 (9), 3 (8), 5 (1), 4 (3), 2 (2), 0 (3)
    assert [[p.rel[-6] for p in b] for b in batches] == [["1", "3"], ["5", "4", "2", "0"]]
    assert [sum(p.size for p in b) for b in batches] == [17, 9]  # the cut nearest the half: 9 | 8 would be 9 vs 17
    assert [[p.rel for p in b] for b in balanced([FileEntry(p.rel, p.size, None) for p in parts], 3)] == [
        ["part-x-0-0.json", "part-x-0-1.json"], ["part-x-0-2.json"],
        ["part-x-0-3.json", "part-x-0-4.json", "part-x-0-5.json"]]  # no modification time: path order
    assert balanced(parts[:1], 4) == [[parts[0]]] and balanced([], 2) == []  # no empty shares
    assert file_ids(parts) == {"part-x-0-1.json": 0, "part-x-0-3.json": 1, "part-x-0-0.json": 2,
                               "part-x-0-4.json": 3, "part-x-0-2.json": 4, "part-x-0-5.json": 5}


def test_key_hashes_are_a_function_of_the_key_alone() -> None:
    """Spark tasks meet on them: equal keys hash alike in every process (no per-process seed), a null is
    not the empty string nor 0, and 200,000 distinct keys do not collide."""
    import numpy as np
    import pyarrow as pa

    from lakeflow.compaction.rows import key_hashes

    keys = pa.table({"id": ["sensor-001", "sensor-001", "", None, "sensor-002"],
                     "run": pa.array([None, None, None, None, "r"]),
                     "seq": pa.array([7, 7, 0, 0, 7], pa.int64())})
    h = key_hashes(keys).view(np.int64).tolist()
    assert h[0] == h[1] and len(set(h)) == 4
    assert h[0] == 1826982407907998  # pinned: a process with another PYTHONHASHSEED gets the same
    many = pa.table({"id": [f"dev-{i % 97}" for i in range(200_000)], "seq": pa.array(range(200_000), pa.int64())})
    assert len(np.unique(key_hashes(many))) == 200_000
    from decimal import Decimal
    dated = pa.table({"d": pa.array([0, 1, None], pa.date32()),
                      "x": pa.array([Decimal("1.5"), Decimal("1.5"), None], pa.decimal128(5, 2))})
    assert len(set(key_hashes(dated).tolist())) == 3


@pytest.mark.parametrize("colliding", [False, True])
def test_the_first_of_each_key_is_kept_whether_or_not_key_hashes_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, colliding: bool
) -> None:
    """The de-duplication proves keys distinct by their hashes and compares exactly only rows whose hash
    is shared: with every hash made equal, it keeps the same rows as with real hashes — of each key the
    record of the lowest file id, then the earliest in it; a null key part a value of its own."""
    import numpy as np
    import pyarrow as pa

    import lakeflow.compaction.rows as rows_module
    from lakeflow.compaction.files import Storage
    from lakeflow.compaction.parse import FILE

    if colliding:
        monkeypatch.setattr(rows_module, "key_hashes", lambda keys: np.zeros(keys.num_rows, np.uint64))
    readings = [_reading(1, 10), _reading(2, 20), _reading(1, 30), _reading(3, 40), _reading(2, 50)]
    readings.append({**_reading(4, 60), "run_id": None})
    readings.append({**_reading(4, 70), "run_id": None})
    readings.append({**_reading(4, 80), "run_id": "r"})
    table = pa.Table.from_pylist(readings).append_column(FILE, pa.array([3, 3, 1, 2, 3, 5, 4, 5], pa.int32()))
    writer = rows_module.Writer(
        SCHEMA, SCHEMA.iceberg_schema(), SCHEMA.partition_spec(SCHEMA.iceberg_schema()), {},
        Storage(tmp_path.as_uri()),
    )
    kept = writer.first_per_key(table)
    assert kept.column("timestamp_ms").to_pylist() == [20, 30, 40, 70, 80]
    assert kept.num_rows == writer.first_per_key(kept).num_rows
    given = rows_module.key_hashes(table.select(list(SCHEMA.key)))  # as the readers' threads hash them
    assert writer.first_per_key(table, given).column("timestamp_ms").to_pylist() == [20, 30, 40, 70, 80]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_partition_too_small_for_two_target_files_is_split_a_file_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    """With two threads, a partition the target size would write as one file becomes two files of at least
    SPLIT_MIN_ROWS rows (both cores encode Parquet), each sorted, the second's rows after the first's, in
    the order of their names; a partition too small stays one file, and one thread writes one file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import lakeflow.compaction.rows as rows_module
    from lakeflow.compaction.files import Storage
    from lakeflow.compaction.parse import FILE

    monkeypatch.setattr(rows_module, "SPLIT_MIN_ROWS", 3)
    readings = [_reading(seq, DAY_MS + 1000 * ((seq * 7) % 10)) for seq in range(10)]  # one day, shuffled
    readings += [_reading(seq, 2 * DAY_MS + seq) for seq in (11, 10)]  # the next day: two rows
    table = pa.Table.from_pylist(readings).append_column(FILE, pa.array([0] * len(readings), pa.int32()))
    writer = rows_module.Writer(
        SCHEMA, SCHEMA.iceberg_schema(), SCHEMA.partition_spec(SCHEMA.iceberg_schema()), {},
        Storage(tmp_path.as_uri()), threads=threads,
    )
    written = writer.write(table, 1, "staging", "part")
    assert [w.records for w in written] == ([6, 4, 2] if threads == 2 else [10, 2])  # (12 rows: 6 a thread)
    assert [w.rel for w in written] == sorted(w.rel for w in written)
    times = [pq.read_table(tmp_path / w.rel).column("timestamp_ms").to_pylist() for w in written]
    assert [t for file in times for t in file] == sorted(r["timestamp_ms"] for r in readings)
    assert [(w.min_ms, w.max_ms) for w in written] == [(min(t), max(t)) for t in times]


def test_partition_values_are_sorted_on_their_own_unless_the_sort_order_implies_them(tmp_path: Path) -> None:
    """Days of the first sort column follow its order: the rows are sorted by the sort columns alone, and
    each file holds one day. A partition on another column (identity of the location) must be sorted
    first: each file then holds one location, its rows in time order."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    import lakeflow.compaction.rows as rows_module
    from lakeflow.compaction.files import Storage
    from lakeflow.compaction.parse import FILE

    table = SCHEMA.iceberg_schema()
    by_location = PartitionSpec(PartitionField(
        source_id=table.find_field("location").field_id, field_id=1000, transform=IdentityTransform(),
        name="location"))
    day = 86_400_000
    readings = [{**_reading(seq, DAY_MS + seq * day // 3), "location": "zeta" if seq % 2 else "alpha"}
                for seq in (5, 2, 7, 0, 3, 6, 1, 4)]  # three days, two locations, shuffled
    rows = pa.Table.from_pylist(readings).append_column(FILE, pa.array([0] * len(readings), pa.int32()))
    for spec, implied, value_of in ((SCHEMA.partition_spec(table), True, lambda r: (r["timestamp_ms"] - DAY_MS) // day),
                                    (by_location, False, lambda r: r["location"])):
        folder = tmp_path / str(implied)
        writer = rows_module.Writer(SCHEMA, table, spec, {}, Storage(folder.as_uri()))
        assert writer._sorted_by_partition() is implied
        written = writer.write(rows, 1, "staging", "part")
        files = [pq.read_table(folder / w.rel).to_pylist() for w in written]
        assert [len({value_of(r) for r in f}) for f in files] == [1] * len(files)  # one partition a file
        assert len(files) == len({value_of(r) for r in readings})
        assert all([r["timestamp_ms"] for r in f] == sorted(r["timestamp_ms"] for r in f) for f in files)


@pytest.mark.parametrize("transform", ["day", "hour"])
def test_day_and_hour_partition_values_are_icebergs_across_chunks_and_before_1970(
    tmp_path: Path, transform: str
) -> None:
    """The day (hour) of each event time, computed chunk by chunk, is the value pyiceberg's transform gives,
    before the epoch too (floor division), with nulls or without."""
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform, HourTransform
    from pyiceberg.types import TimestamptzType

    import lakeflow.compaction.rows as rows_module
    from lakeflow.compaction.files import Storage

    table = SCHEMA.iceberg_schema()
    iceberg = DayTransform() if transform == "day" else HourTransform()
    spec = PartitionSpec(PartitionField(source_id=table.find_field(SCHEMA.event_time_column).field_id,
                                        field_id=1000, transform=iceberg, name="p"))
    writer = rows_module.Writer(SCHEMA, table, spec, {}, Storage(tmp_path.as_uri()))
    us = [-86_400_000_001, -1, 0, 1, 3_599_999_999, 3_600_000_000, 86_399_999_999, 1_764_000_000_123_456]
    expected = [iceberg.transform(TimestamptzType())(u) for u in us]
    for values, want in ((us, expected), ([*us, None], [*expected, None])):
        chunks = [pa.array(values[:3], pa.timestamp("us", tz="UTC")), pa.array(values[3:], pa.timestamp("us", tz="UTC"))]
        rows = pa.table({SCHEMA.event_time_column: pa.chunked_array(chunks)})
        (got,) = writer.partition_values(rows)
        assert got.to_pylist() == want


def test_a_commit_whose_files_were_written_under_another_schema_is_refused(tmp_path: Path) -> None:
    """Two compactors racing an evolution: the loser's files were written with the schema it planned; the
    winner changed the table's schema meanwhile, so the loser's commit conflicts instead of landing files
    whose field ids the table no longer means."""
    from pyiceberg.types import LongType

    from lakeflow.compaction.commit import evolved

    settings = load_settings(settings_env(tmp_path))
    source = (tmp_path / "raw").as_uri()
    ours = open_target(iceberg_catalog(settings), ("iot",), "t", source, SCHEMA)
    theirs = open_target(iceberg_catalog(settings), ("iot",), "t", source, SCHEMA)
    planned = evolved(ours, [])
    with theirs.table.update_schema() as update:  # the other compactor's evolution lands first
        update.add_column("rssi", LongType())
    ours.table.refresh()  # (a commit on fresh metadata: only the schema assertion can catch it)
    data = _written(ours, [_reading(1, DAY_MS + 1)], "f1")
    with pytest.raises(CommitConflict, match="schema .* changed while this run wrote its files"):
        commit(ours, data, f"{source}/_lakeflow/l1.json.gz", source, "run-1", {}, SCHEMA, [], planned)
    assert iceberg_catalog(settings).load_table(("iot", "t")).current_snapshot() is None


def test_a_storage_travels_to_spark_tasks_as_its_location_and_properties(tmp_path: Path) -> None:
    """The Spark engine broadcasts both tables' Storage: pickled as location + properties, each task
    builds its own file system from them; the secret shows in no repr."""
    import pickle

    s = Storage("s3://bucket/raw/t", {"s3.region": "us-east-1", "s3.access-key-id": "AKIAEXAMPLE",
                                      "s3.secret-access-key": "s3cr3t-value",
                                      "s3.path-style-access": "true"})
    again = pickle.loads(pickle.dumps(s))
    assert again.location == s.location and again.uri("a.json") == "s3://bucket/raw/t/a.json"
    assert "s3cr3t-value" not in repr(again)
    local = pickle.loads(pickle.dumps(Storage(tmp_path.as_uri())))
    local.write("x/y.json", b"[]")
    assert Storage(tmp_path.as_uri()).read("x/y.json") == b"[]"
