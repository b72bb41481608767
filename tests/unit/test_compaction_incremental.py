"""A run costs O(new buckets), not O(history): it lists the raw table's hour buckets of the look-back
window only and reads and writes the ledger segments of the buckets it touches. Late commits within
the look-back are picked up, older ones by ``--full-scan``; ledgers of before 0.3 are migrated; raw
retention deletes only files compacted long enough ago. In-process runs of jobs/compact.py (arrow
engine) on real files, with the storage's listings and reads counted.

Unit tests: they start no process. The real-process tests: tests/integration/test_compaction_incremental.py."""

from __future__ import annotations

import gzip
import json
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

from lakeflow.cli.compact import compaction_pipeline, job_options
from lakeflow.compaction.commit import LEDGER_PROPERTY, commit, iceberg_catalog, open_target
from lakeflow.compaction.config import load_config
from lakeflow.compaction.discover import list_parts
from lakeflow.compaction.files import Storage
from lakeflow.compaction.ledger import COMPACTED, Ledger, RunRecord, entries_for
from lakeflow.compaction.naming import STATE_DIR
from lakeflow.schema import load_schema
from lakeflow.settings import load_settings
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts

HOUR_MS = 3_600_000


START = 1763683200000          # 2025-11-21T00:00:00Z


BUCKETS = 40                   # compacted hour buckets before the runs under test


TARGET = "sensor-readings-compacted"


def bucket(h: int) -> str:
    return time.strftime("%Y-%m-%d--%H", time.gmtime((START + h * HOUR_MS) / 1000))


def hour(h: int, run: str, n: int = 50) -> list[dict]:
    return readings(run, n, start_ms=START + h * HOUR_MS, step_ms=1000, seq_start=1000 * h, seed=h)


class Calls:
    """What the storage was asked: raw listings (top, then per folder) and ledger files read/written."""

    def __init__(self) -> None:
        self.tops: list[str] = []
        self.listed: list[str] = []
        self.read: list[str] = []
        self.written: list[str] = []


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Calls]:
    c = Calls()
    list_, top, read, write = Storage.list, Storage.list_top, Storage.read, Storage.write

    def counted_list(self: Storage, rel: str = ""):
        c.listed.append(rel if "/warehouse/" in self.location else f"<table>/{rel}")
        return list_(self, rel)

    def counted_top(self: Storage, start_after: str = ""):
        c.tops.append(start_after)
        return top(self, start_after)

    def counted_read(self: Storage, rel: str) -> bytes:
        c.read.append(rel)
        return read(self, rel)

    def counted_write(self: Storage, rel: str, data: bytes) -> None:
        c.written.append(rel)
        write(self, rel, data)

    monkeypatch.setattr(Storage, "list", counted_list)
    monkeypatch.setattr(Storage, "list_top", counted_top)
    monkeypatch.setattr(Storage, "read", counted_read)
    monkeypatch.setattr(Storage, "write", counted_write)
    yield c


def compact(monkeypatch: pytest.MonkeyPatch, home: LakeflowHome, *args: str) -> dict:
    """One run of jobs/compact.py (arrow engine) in this process; its JSON report."""
    report = home.home.parent / f"report-{uuid.uuid4()}.json"
    assert compaction_pipeline()(load_config(job_options(["--engine", "arrow", "--report", str(report), *args]))) == 0
    return json.loads(report.read_text())


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LakeflowHome:
    """A table holding BUCKETS hour buckets of the raw table, compacted in one run."""
    home = make_home(tmp_path)
    home.enter(monkeypatch)
    for h in range(BUCKETS):
        write_parts(home.raw, hour(h, "old"), 25, bucket_folders=True)
    r = compact(monkeypatch, home)
    assert r["files_in"] == 2 * BUCKETS and r["rows_out"] == 50 * BUCKETS
    return home


def index(home: LakeflowHome) -> dict:
    table = home.iceberg_table(TARGET)
    storage = Storage(table.location())
    return json.loads(gzip.decompress(storage.read(storage.relative(table.properties[LEDGER_PROPERTY]))))


def rows(home: LakeflowHome) -> int:
    return home.iceberg_table(TARGET).scan().to_arrow().num_rows


def test_a_run_lists_and_reads_only_the_buckets_it_touches(home: LakeflowHome, calls: Calls,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    newest = BUCKETS - 1
    write_parts(home.raw, hour(BUCKETS, "new", 60), 20, bucket_folders=True)    # 3 files, a new bucket
    before = index(home)
    calls.__init__()
    r = compact(monkeypatch, home)
    assert (r["files_in"], r["rows_out"]) == (3, 60) and rows(home) == 50 * BUCKETS + 60
    # one listing of the top from the window's first bucket (an hour before the newest) on, then
    # only the buckets from there: the window and the new one — never the 38 older ones
    assert calls.tops == [bucket(newest - 1)]
    raw_listed = [rel for rel in calls.listed if not rel.startswith("<table>/")]
    assert sorted(raw_listed) == sorted([bucket(newest - 1), bucket(newest), bucket(BUCKETS)])
    assert r["list_requests"] == 4 and r["files_listed"] == 2 + 2 + 3
    segments_read = [p for p in calls.read if "/segments/" in p]
    assert sorted(p.rsplit("/", 1)[-1] for p in segments_read) == sorted(
        f"{bucket(h)}.json.gz" for h in (newest - 1, newest))
    segments_written = [p for p in calls.written if "/segments/" in p]
    assert [p.rsplit("/", 1)[-1] for p in segments_written] == [f"{bucket(BUCKETS)}.json.gz"]
    after = index(home)
    assert len(after["buckets"]) == BUCKETS + 1
    unchanged = {b: s for b, s in before["buckets"].items()}
    assert all(after["buckets"][b] == s for b, s in unchanged.items()), "untouched buckets keep their segments"
    assert r["ledger_bytes_written"] < 0.2 * sum(os.path.getsize(p) for p in home.home.rglob("segments/*/*"))
    # the superseded index is gone; the segments the index names all exist, no other is left
    table = home.iceberg_table(TARGET)
    state = Path(table.location().removeprefix("file://"))
    assert [p.name for p in (state / STATE_DIR).glob("ledger-*")] == [table.properties[LEDGER_PROPERTY].rsplit("/", 1)[-1]]
    on_disk = {str(p.relative_to(state)) for p in (state / "_lakeflow" / "segments").rglob("*.json.gz")}
    assert on_disk == {s["segment"] for s in after["buckets"].values()}


def test_late_commits_within_the_look_back_are_compacted_older_ones_with_full_scan(
        home: LakeflowHome, monkeypatch: pytest.MonkeyPatch) -> None:
    newest = BUCKETS - 1
    write_parts(home.raw, hour(newest - 1, "late", 10), 10, bucket_folders=True)   # an hour late: in the window
    write_parts(home.raw, hour(newest - 5, "later", 10), 10, bucket_folders=True)  # five hours late: outside
    r = compact(monkeypatch, home)
    assert (r["files_in"], r["rows_out"]) == (1, 10)
    assert compact(monkeypatch, home)["files_in"] == 0                              # still not seen …
    r = compact(monkeypatch, home, "--full-scan")                                  # … until a full scan
    assert (r["files_in"], r["rows_out"], r["files_listed"]) == (1, 10, 2 * BUCKETS + 2)
    assert rows(home) == 50 * BUCKETS + 20
    r = compact(monkeypatch, home, "--full-scan", "--look-back", "6h")
    assert r["files_in"] == 0


def test_a_ledger_of_before_0_3_is_read_and_rewritten_as_segments(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    home = make_home(tmp_path)
    for key, value in home.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(home.home)
    flat = write_parts(home.raw, hour(0, "flat"), 25)                              # 0.2's layout
    hourly = write_parts(home.raw, hour(1, "hourly"), 25, bucket_folders=True)
    r = compact(monkeypatch, home)                                                  # creates the table
    assert r["files_in"] == 4
    # the table as lakeflow 0.2 left it: one ledger file (version 1) holding every entry
    target = open_target(iceberg_catalog(load_settings(home.env)), ("iot",), TARGET, Storage(home.raw.as_uri()).location,
                         load_schema())
    listing = list_parts(Storage(home.raw.as_uri()))
    old = Ledger().advance(listing, entries_for(listing.parts, COMPACTED, "r0"), RunRecord("r0", "2025-11-21T00:00:00+00:00", 1, 100))
    legacy = f"{STATE_DIR}/ledger-{uuid.uuid4()}.json.gz"
    target.storage.write(legacy, old.to_bytes())
    commit(target, [], target.storage.uri(legacy), target.table.properties["lakeflow.compaction.source"], str(uuid.uuid4()), {},
           load_schema())
    assert json.loads(gzip.decompress(target.storage.read(legacy)))["version"] == 1
    write_parts(home.raw, hour(2, "new"), 25, bucket_folders=True)
    r = compact(monkeypatch, home)
    assert (r["files_in"], r["rows_out"]) == (2, 50), "files the old ledger holds are not compacted again"
    assert rows(home) == 150
    after = index(home)
    assert after["version"] == 2 and not target.storage.exists(legacy)
    assert {b: s["files"] for b, s in after["buckets"].items()} == {"": 2, bucket(1): 2, bucket(2): 2}
    assert [p.name for p in flat + hourly if p.exists()] == [p.name for p in flat + hourly]
    assert compact(monkeypatch, home)["files_in"] == 0


def test_raw_retention_deletes_only_files_compacted_long_enough_ago(home: LakeflowHome,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    old_bucket, new_bucket = bucket(0), bucket(BUCKETS - 1)
    (home.raw / old_bucket / "part-bad-0-0.json").write_text("")                    # quarantined, kept
    compact(monkeypatch, home, "--full-scan")
    # the first BUCKETS - 1 buckets were compacted two days ago (the index says when), the newest now
    table = home.iceberg_table(TARGET)
    storage = Storage(table.location())
    pointer = storage.relative(table.properties[LEDGER_PROPERTY])
    body = json.loads(gzip.decompress(storage.read(pointer)))
    for name, b in body["buckets"].items():
        if name != new_bucket:
            b["consumed_at"] = "2025-11-19T00:00:00+00:00"
    storage.write(pointer, gzip.compress(json.dumps(body).encode()))
    unconsumed = write_parts(home.raw, hour(1, "unseen", 5), 5, bucket_folders=True)  # beyond the look-back
    old_time = time.time() - 3 * 86400
    for p in home.raw.rglob("*.json"):
        os.utime(p, (old_time, old_time))
    r = compact(monkeypatch, home, "--raw-retention", "1d", "--delete-min-age", "0s")
    # visiting bucket 1 for retention finds the late file: compacted now, so that bucket stays
    assert (r["files_in"], r["rows_out"]) == (1, 5)
    assert r["source_files_deleted"] == 2 * (BUCKETS - 2)
    left = Counter(p.parent.name for p in home.raw.rglob("*.json"))  # (nothing quarantined is written there)
    assert left == {new_bucket: 2, old_bucket: 1, bucket(1): 3}
    assert (home.raw / old_bucket / "part-bad-0-0.json").exists() and unconsumed[0].exists()
    # the next run that commits drops the deleted files' entries (each old bucket visited once more)
    write_parts(home.raw, hour(BUCKETS - 1, "more", 5), 5, bucket_folders=True)
    compact(monkeypatch, home, "--raw-retention", "1d", "--delete-min-age", "0s")
    buckets = index(home)["buckets"]
    assert set(buckets) == {new_bucket, old_bucket, bucket(1)}
    assert (buckets[old_bucket]["files"], buckets[old_bucket]["compacted"]) == (1, 0)
    # emptied bucket folders are removed: only those still holding files are left to list
    assert sorted(p.name for p in home.raw.iterdir()) == sorted([old_bucket, bucket(1), new_bucket])
    assert compact(monkeypatch, home, "--raw-retention", "1d")["list_requests"] == 1 + 1  # top + the window
    assert rows(home) == 50 * BUCKETS + 10


def test_delete_source_reaches_buckets_outside_the_window(home: LakeflowHome, monkeypatch: pytest.MonkeyPatch) -> None:
    old_time = time.time() - 3 * 86400
    for p in home.raw.rglob("*.json"):
        os.utime(p, (old_time, old_time))
    r = compact(monkeypatch, home, "--delete-source")
    assert r["source_files_deleted"] == 2 * BUCKETS
    assert not list(home.raw.rglob("part-*.json"))
    write_parts(home.raw, hour(BUCKETS, "more", 5), 5, bucket_folders=True)
    compact(monkeypatch, home, "--delete-source", "--delete-min-age", "1h")
    assert set(index(home)["buckets"]) == {bucket(BUCKETS)}, "entries of deleted files dropped at the next commit"


def test_a_backlog_is_compacted_in_runs_of_at_most_the_batch_limit_oldest_first(
        home: LakeflowHome, monkeypatch: pytest.MonkeyPatch) -> None:
    """COMPACT_MAX_BATCH_MB: a run takes the oldest new files up to the limit (at least one); the rest
    pend for the next run, and no row is lost or kept twice."""
    from lakeflow.compaction.run import first_bytes
    from lakeflow.compaction.files import FileEntry

    entries = [FileEntry(f"{bucket(h)}/part-{h}.json", 600_000, None) for h in (3, 1, 2)]
    assert [f.rel for f in first_bytes(entries, 1 << 20)] == [f"{bucket(1)}/part-1.json"]
    assert [f.rel for f in first_bytes(entries, 1)] == [f"{bucket(1)}/part-1.json"]  # at least one
    assert len(first_bytes(entries, 2 << 20)) == 3

    for h in range(BUCKETS, BUCKETS + 3):
        write_parts(home.raw, hour(h, "backlog", 40), 40, bucket_folders=True)  # 3 files, one per bucket
    monkeypatch.setenv("COMPACT_MAX_BATCH_MB", "1")
    monkeypatch.setattr("lakeflow.compaction.run.first_bytes", lambda files, limit: first_bytes(files, 1))
    deferred = []
    while (r := compact(monkeypatch, home))["files_in"]:
        deferred.append(r["files_deferred"])
    assert deferred == [2, 1, 0] and rows(home) == 50 * BUCKETS + 120
