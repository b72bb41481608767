"""The end-to-end lag an operator sees: each compaction commit records the newest event time in the
table (its snapshot's summary, carried by maintenance's rewrites); ``lakeflow status`` and the
compactor's ``lakeflow_end_to_end_lag_seconds`` show now minus it, the figure ``make bench-freshness``
measures per message.

Unit tests: they start no process (compaction runs in this process, arrow engine)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lakeflow.cli.compact import compaction_pipeline, job_options
from lakeflow.compaction.commit import NEWEST_EVENT_PROPERTY, newest_event_ms
from lakeflow.compaction.config import CompactOptions, load_config
from lakeflow.compaction.maintain import MAINTAIN_PROPERTY, run_maintain
from lakeflow.compaction.metrics import CompactorMetrics
from lakeflow.compaction.status import table_status
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts

TARGET = "sensor-readings-compacted"
TABLE = f"iot.{TARGET}"  # the metrics' table label


def compact(home: LakeflowHome) -> dict:
    """One run of jobs/compact.py (arrow engine) in this process; its JSON report."""
    report = home.home / "report.json"
    assert compaction_pipeline()(load_config(job_options(["--engine", "arrow", "--report", str(report)]))) == 0
    return json.loads(report.read_text())


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LakeflowHome:
    home = make_home(tmp_path)
    home.enter(monkeypatch)
    return home


def test_each_commit_records_the_newest_event_time_and_its_lag(home: LakeflowHome) -> None:
    now_ms = int(time.time() * 1000)
    first = readings("a", 30, start_ms=now_ms - 90_000, step_ms=1000)     # newest: 61 s ago
    write_parts(home.raw, first, 10, bucket_folders=True)
    report = compact(home)
    newest = now_ms - 90_000 + 29_000
    assert report["newest_event_ms"] == newest
    table = home.iceberg_table(TARGET)
    snap = table.current_snapshot()
    assert snap.summary[NEWEST_EVENT_PROPERTY] == str(newest)
    assert report["commit_lag_s"] == pytest.approx((snap.timestamp_ms - newest) / 1000, abs=0.001)
    assert 61 <= report["commit_lag_s"] < 61 + 60

    # late data (older than what the table holds) leaves the newest event time where it was
    write_parts(home.raw, readings("late", 5, start_ms=now_ms - 600_000, step_ms=1000), 5, bucket_folders=True)
    late = compact(home)
    assert late["newest_event_ms"] == newest
    assert late["commit_lag_s"] >= 595                  # its own rows' newest: ten minutes old when committed
    assert home.iceberg_table(TARGET).current_snapshot().summary[NEWEST_EVENT_PROPERTY] == str(newest)

    # a run that finds nothing new commits nothing and still reports the table's newest event time
    idle = compact(home)
    assert (idle["newest_event_ms"], idle["commit_lag_s"], idle["snapshot_id"]) == (newest, None, None)


def test_the_service_hears_of_the_commit_before_the_run_ends(home: LakeflowHome) -> None:
    """``lakeflow compact --every`` passes its metrics' ``committed`` as ``on_commit``: the lag they serve
    moves at the commit, not after the run's tidy-up and maintenance."""
    now_ms = int(time.time() * 1000)
    write_parts(home.raw, readings("a", 10, start_ms=now_ms - 20_000, step_ms=1000), 10, bucket_folders=True)
    heard: list[dict] = []
    config = replace(load_config(job_options(["--engine", "arrow", "--maintain"])), on_commit=heard.append)
    assert compaction_pipeline()(config) == 0
    (report,) = heard
    assert report["status"] == "running" and report["maintenance"] == {}        # before the run's maintenance
    assert report["newest_event_ms"] == now_ms - 20_000 + 9_000 and report["commit_lag_s"] >= 11
    metrics = CompactorMetrics()
    metrics.committed(TABLE, report)
    assert 11 <= _sample(metrics, "lakeflow_end_to_end_lag_seconds") < 60


def test_status_shows_the_end_to_end_lag(home: LakeflowHome) -> None:
    config = load_config(CompactOptions(local=True))
    assert table_status(config).end_to_end_lag_s is None              # no table yet
    now_ms = int(time.time() * 1000)
    write_parts(home.raw, readings("a", 20, start_ms=now_ms - 300_000, step_ms=1000), 10, bucket_folders=True)
    compact(home)
    status = table_status(config)
    newest_s = (now_ms - 300_000 + 19_000) / 1000
    assert status.end_to_end_lag_s == pytest.approx(time.time() - newest_s, abs=2)
    assert status.newest_event_at.startswith(time.strftime("%Y-%m-%dT", time.gmtime(newest_s)))
    assert any(line.startswith("end-to-end lag: 5 min (newest event time in the table: ") for line in status.lines()), status.lines()
    assert status.to_dict()["end_to_end_lag_s"] == status.end_to_end_lag_s


def test_maintenance_rewrites_carry_the_newest_event_time(home: LakeflowHome) -> None:
    now_ms = int(time.time() * 1000)
    for n in range(3):                                    # three small files in today's partition
        write_parts(home.raw, readings(f"r{n}", 10, start_ms=now_ms - 60_000 + n * 10_000), 10)
        compact(home)
    newest = now_ms - 60_000 + 2 * 10_000 + 9_000
    run_maintain(load_config(CompactOptions(local=True, expire_older_than="0s", keep_last=1)))
    table = home.iceberg_table(TARGET)
    snap = table.current_snapshot()
    assert snap.summary.get(MAINTAIN_PROPERTY) == "rewrite" and len(table.metadata.snapshots) == 1
    assert snap.summary[NEWEST_EVENT_PROPERTY] == str(newest) and newest_event_ms(table) == newest


def test_the_metric_is_now_minus_the_newest_event_time() -> None:
    metrics = CompactorMetrics()
    metrics.follow(TABLE)
    assert math.isnan(_sample(metrics, "lakeflow_end_to_end_lag_seconds"))   # no run has read the table yet
    newest = time.time() - 42
    metrics.record(TABLE, {"newest_event_ms": int(newest * 1000), "commit_lag_s": 12.5, "duration_s": 1.0}, 0, 1.0)
    assert 42 <= _sample(metrics, "lakeflow_end_to_end_lag_seconds") < 44
    assert _sample(metrics, "lakeflow_table_newest_event_timestamp_seconds") == pytest.approx(newest, abs=0.001)
    assert _sample(metrics, "lakeflow_compaction_commit_lag_seconds") == 12.5
    metrics.record(TABLE, {"duration_s": 1.0}, 2, 1.0)          # a failed run: the table is as it was, the lag grows
    assert 42 <= _sample(metrics, "lakeflow_end_to_end_lag_seconds") < 44
    metrics.record(TABLE, {"newest_event_ms": int((time.time() + 30) * 1000)}, 0, 1.0)  # a clock ahead: never negative
    assert _sample(metrics, "lakeflow_end_to_end_lag_seconds") == 0


def _sample(metrics: CompactorMetrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name, {"table": TABLE})
    assert value is not None, name
    return value
