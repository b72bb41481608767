"""``lakeflow maintain``: a table that compaction runs filled with small files and snapshots, merged,
expired and cleaned — rows identical, each file sorted by time, nothing referenced ever deleted.

Unit tests: they start no process. The real-process tests: tests/integration/test_maintain.py."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

import pytest

from lakeflow.catalog.errors import CommitConflict
from lakeflow.cli.compact import compaction_pipeline, job_options
from lakeflow.compaction import maintain as maintain_module
from lakeflow.compaction.commit import (
    LEDGER_PROPERTY,
    SOURCE_PROPERTY,
    Target,
    commit,
    data_file,
    iceberg_catalog,
    open_target,
    reachable,
)
from lakeflow.compaction.config import CompactOptions, MaintainOptions, load_config
from lakeflow.compaction.maintain import (
    MAINTAIN_PROPERTY,
    live_files,
    maintain,
    pending_runs,
    run_maintain,
)
from lakeflow.compaction.naming import STAGING, STATE_DIR, intent_name
from lakeflow.compaction.recovery import Intent, save_intent
from lakeflow.compaction.rows import WrittenFile
from lakeflow.schema import load_schema
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts, written_file

DAY_MS = 1763683200000                  # 2025-11-21T00:00:00Z


MIDNIGHT = DAY_MS + 86_400_000


DAYS = ("2025-11-21", "2025-11-22")


PARTS = tuple(f"ts_day={day}" for day in DAYS)  # their partitions' paths


SCHEMA = load_schema()  # lakeflow's default, the sensor reading


KEY, NAMES, TIME = SCHEMA.key, SCHEMA.names, SCHEMA.event_time


TARGET = "sensor-readings-compacted"


RUNS = 5


OLD = time.time() - 3 * 86400           # an mtime older than every minimum age below


def compact_in_process(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    """One run of jobs/compact.py (arrow engine) in this process."""
    assert compaction_pipeline()(load_config(job_options(["--engine", "arrow", *args]))) == 0


def batch(n: int) -> list[dict]:
    """Run ``n``'s readings: 40 readings, 20 each side of midnight UTC (one file per day per run)."""
    return readings(f"ingest-{n}", 40, start_ms=MIDNIGHT - 20_000 + 7 * n, step_ms=1000, seed=n)


def rows(table) -> list[tuple]:
    """The table's rows, every column, in key order: equal before and after a rewrite."""
    data = table.scan().to_arrow().sort_by([(k, "ascending") for k in KEY])
    return list(zip(*(data.column(c).to_pylist() for c in (*NAMES, "ts")), strict=True))


def files_per_day(table) -> dict[str, int]:
    return {path.removeprefix("ts_day="): len(files) for path, files in live_files(table).items()}


def table_files(target: Target) -> set[str]:
    """Everything under the table's data/ and metadata/ (table-relative)."""
    return {e.rel for folder in ("data", "metadata") for e in target.storage.list(folder)}


def assert_sorted_files(target: Target) -> None:
    """Every live data file is sorted by the declared order: time, then the key."""
    for files in live_files(target.table).values():
        for f in files:
            data = target.storage.read_parquet(target.storage.relative(f.file_path), [TIME, *KEY]).to_pylist()
            keys = [tuple(r[c] for c in (TIME, *KEY)) for r in data]
            assert keys == sorted(keys), f.file_path


def open_local_target(home: LakeflowHome) -> Target:
    """The compacted table, loaded as a compaction run loads it."""
    config = load_config(env=home.env)
    source = home.iceberg_table(TARGET).properties[SOURCE_PROPERTY]
    return open_target(iceberg_catalog(config.settings), config.namespace, TARGET, source, config.schema)


def other_commit(target: Target, data_files: list[tuple[str, WrittenFile]]) -> None:
    """A compaction run's commit (another writer): ``data_files`` and the same ledger, on fresh metadata."""
    target.table.refresh()
    props = target.table.properties
    commit(target, data_files, props[LEDGER_PROPERTY], props[SOURCE_PROPERTY], str(uuid.uuid4()), {}, SCHEMA)


def options(keep_last: int = 1, orphan_min_age_s: float = 3600, small_file_bytes: int = 1 << 20,
            target_file_bytes: int = 8 << 20) -> MaintainOptions:
    """Maintenance as the tests run it: every snapshot old enough to expire, orphans after an hour."""
    return MaintainOptions(target_file_bytes=target_file_bytes, small_file_bytes=small_file_bytes,
                           expire_older_than_s=0, keep_last=keep_last, orphan_min_age_s=orphan_min_age_s)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LakeflowHome:
    """A compacted table after RUNS compaction runs: RUNS small files in each of two days, RUNS snapshots."""
    home = make_home(tmp_path)
    home.enter(monkeypatch)
    for n in range(RUNS):
        write_parts(home.raw, batch(n), 10)
        compact_in_process(monkeypatch)
    table = home.iceberg_table(TARGET)
    assert files_per_day(table) == {DAYS[0]: RUNS, DAYS[1]: RUNS}
    assert len(table.metadata.snapshots) == RUNS
    return home


def test_maintain_merges_expires_and_removes_orphans(home: LakeflowHome, monkeypatch: pytest.MonkeyPatch) -> None:
    target = open_local_target(home)
    before, ledger = rows(target.table), target.table.properties[LEDGER_PROPERTY]
    storage = target.storage
    day0 = f"data/ts_day={DAYS[0]}"
    planted = {                                            # what the table's folder may hold besides its files
        "old": f"{day0}/stray.parquet",                    # nothing references it, days old: an orphan
        "young": f"{day0}/young.parquet",                  # unreferenced but recent: maybe a commit in flight
        "metadata": "metadata/stray-manifest.avro",        # an old unreferenced metadata file: an orphan
        "staging": f"{STAGING}/{uuid.uuid4()}/ts_day={DAYS[0]}/part-00000.parquet",  # no intent: an orphan
        "quarantine": f"_lakeflow/quarantine/files/run={uuid.uuid4()}/2025-11-21--00/part-x-0-0.json",  # kept
    }
    for rel in planted.values():
        storage.write(rel, b"PAR1 not really")
    for key in ("old", "metadata", "staging", "quarantine"):
        os.utime(storage.uri(planted[key]).removeprefix("file://"), (OLD, OLD))
    crashed = Intent(run_id=str(uuid.uuid4()), planned_snapshot=target.table.metadata.snapshots[0].snapshot_id)
    save_intent(storage, crashed)                           # a compaction that crashed mid-write, runs ago
    storage.write(f"{crashed.staging}/ts_day={DAYS[0]}/part-00000.parquet", b"staged")
    os.utime(storage.uri(f"{crashed.staging}/ts_day={DAYS[0]}/part-00000.parquet").removeprefix("file://"), (OLD, OLD))
    everything = table_files(target)

    config = load_config(CompactOptions(expire_older_than="0s", keep_last=2, orphan_min_age="1h"), home.env)
    dry = replace(config, maintenance=replace(config.maintenance, dry_run=True))
    planned = asdict(run_maintain(dry))
    assert table_files(target) == everything and storage.exists(intent_name(crashed.run_id))   # nothing changed
    assert [(r["partition"], r["files_before"], r["files_after"]) for r in planned["rewrites"]] == [
        (PARTS[0], RUNS, 1), (PARTS[1], RUNS, 1)]
    assert len(planned["snapshots_expired"]) == RUNS - 2
    assert sorted(planned["orphans"]) == sorted([planted["old"], planted["metadata"], planted["staging"]])
    target.table.refresh()
    assert len(target.table.metadata.snapshots) == RUNS

    done = run_maintain(config)
    target.table.refresh()
    table = target.table
    assert files_per_day(table) == {DAYS[0]: 1, DAYS[1]: 1}
    assert rows(table) == before                                          # every row, every column, once
    assert_sorted_files(target)
    snaps = table.metadata.snapshots                                       # keep-last 2: the two rewrites
    summaries = [s.summary for s in snaps if s.summary is not None]
    assert len(summaries) == 2 and all(s.get(MAINTAIN_PROPERTY) == "rewrite" for s in summaries)
    assert summaries[-1].operation.value == "overwrite" and table.properties[LEDGER_PROPERTY] == ledger
    assert len(done.snapshots_expired) == RUNS and done.expired_files_deleted > 0   # the compactions' snapshots
    assert sorted(done.orphans) == sorted([planted["old"], planted["metadata"], planted["staging"]])
    left = table_files(target)
    assert storage.exists(planted["young"]) and storage.exists(planted["quarantine"])  # the quarantine is no orphan
    assert not any(storage.exists(planted[k]) for k in ("old", "metadata", "staging"))
    assert not storage.exists(intent_name(crashed.run_id)) and not storage.list(crashed.staging)  # recovery's
    assert not storage.list(STAGING) and not pending_runs(storage)
    # what is left is what the table references (manifests of expired snapshots went with them), and
    # the young stray; the replaced small files stay while the current snapshot's manifests name them
    referenced = reachable(table.io, snaps) | {table.metadata_location}
    referenced |= {e.metadata_file for e in table.metadata.metadata_log}
    assert left - {storage.relative(u) for u in referenced} == {planted["young"]}

    # the table goes on: a compaction after maintenance adds its rows once, a re-delivery none
    write_parts(home.raw, batch(RUNS) + batch(0)[:5], 10)
    compact_in_process(monkeypatch)
    table.refresh()
    keys = [(r[1], r[2]) for r in rows(table)]
    assert len(keys) == len(set(keys)) == len(before) + 40


def test_only_the_small_files_of_partitions_with_two_of_them_are_rewritten(home: LakeflowHome) -> None:
    target = open_local_target(home)
    big_file = _readings_file(target, "big", readings("bulk", 3000, start_ms=DAY_MS, step_ms=10, seed=5))
    other_commit(target, [big_file])
    big = big_file[0]
    before = rows(target.table)
    files = {path.removeprefix("ts_day="): found for path, found in live_files(target.table).items()}
    small = {day: [f for f in files[day] if f.file_path != big] for day in DAYS}
    sizes = sorted(f.file_size_in_bytes for day in DAYS for f in small[day])
    threshold = sizes[-1] + 1
    assert next(f.file_size_in_bytes for f in files[DAYS[0]] if f.file_path == big) > 3 * threshold
    # nothing is small: nothing is rewritten
    assert maintain(target, options(small_file_bytes=sizes[0], keep_last=10), SCHEMA).rewrites == []
    # the small files merged into files of half their size (two per day); the large one left alone
    target_bytes = sum(f.file_size_in_bytes for f in small[DAYS[0]]) // 2 + 1
    report = maintain(target, options(small_file_bytes=threshold, target_file_bytes=target_bytes, keep_last=10),
                      SCHEMA)
    expected_day1 = -(-sum(f.file_size_in_bytes for f in small[DAYS[1]]) // target_bytes)
    assert [(r.partition, r.merged, r.files_after) for r in report.rewrites] == [(PARTS[0], RUNS, 3),
                                                                                (PARTS[1], RUNS, expected_day1)]
    now = live_files(target.table)
    assert big in {f.file_path for f in now[PARTS[0]]}
    assert rows(target.table) == before
    assert_sorted_files(target)
    merged = sorted((f for f in now[PARTS[0]] if f.file_path != big), key=lambda f: f.file_path)
    times = [target.storage.read_parquet(target.storage.relative(f.file_path), [TIME]).column(TIME).to_pylist()
             for f in merged]
    assert len(times) == 2 and max(times[0]) <= min(times[1])           # consecutive time ranges, in name order
    # one new small file in a partition: not enough to rewrite
    late = _readings_file(target, "late", readings("late", 5, start_ms=DAY_MS + 7_200_000, seed=6))
    other_commit(target, [late])
    assert maintain(target, options(small_file_bytes=threshold, target_file_bytes=target_bytes,
                                    keep_last=10), SCHEMA).rewrites == []


def _readings_file(target: Target, tag: str, data: list[dict]) -> tuple[str, WrittenFile]:
    """``data`` (of one partition) written as the compaction writes data files, under data/<tag>/."""
    return written_file(target, data, tag=tag)


def _before_commit(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None], times: int = 1) -> None:
    """Run ``action`` (another writer's commit) right after the rewrite has staged its files, ``times`` times."""
    real = maintain_module.final_paths
    left = [times]

    def named(*args, **kwargs) -> list[str]:
        if left[0]:
            left[0] -= 1
            action()
        return real(*args, **kwargs)

    monkeypatch.setattr(maintain_module, "final_paths", named)


def _leftovers(target: Target) -> list[str]:
    """Files of rewrites that never committed: intents, staging, unreferenced data files."""
    table = target.table
    table.refresh()
    live = {target.storage.relative(u) for u in reachable(table.io, table.metadata.snapshots)}
    data = [e.rel for e in target.storage.list("data") if e.rel not in live]
    return data + [e.rel for e in target.storage.list(STATE_DIR) if "/intent-" in e.rel]


def test_a_concurrent_compaction_commit_is_retried_on_fresh_metadata(home: LakeflowHome,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    target, other = open_local_target(home), open_local_target(home)
    before = rows(target.table)
    extra = readings("late", 7, start_ms=DAY_MS + 3_600_000, seed=9)
    late = _readings_file(other, "late", extra)

    _before_commit(monkeypatch, lambda: other_commit(other, [late]))
    report = maintain(target, options(keep_last=10), SCHEMA)
    first = report.rewrites[0]
    assert first.partition == PARTS[0] and first.attempts == 2 and first.merged == RUNS
    assert {f.file_path for f in live_files(target.table)[PARTS[0]]} >= {late[0]}  # the other's file kept, not merged
    assert len(rows(target.table)) == len(before) + len(extra)
    keys = [(r[1], r[2]) for r in rows(target.table)]
    assert len(keys) == len(set(keys))
    assert _leftovers(target) == []


def test_a_rewrite_whose_files_changed_leaves_the_table_as_it_was(home: LakeflowHome,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Another rewrite replaced one of the files first: pyiceberg refuses ours; its files are deleted."""
    target, other = open_local_target(home), open_local_target(home)
    victim = min(live_files(target.table)[PARTS[0]], key=lambda f: f.file_path)

    def other_rewrite() -> None:
        other.table.refresh()
        data = other.storage.read_parquet(other.storage.relative(victim.file_path), [*NAMES]).to_pylist()
        uri, copy = _readings_file(other, "copy", data)
        with other.table.transaction() as tx, tx.update_snapshot().overwrite() as rewrite:
            rewrite.delete_data_file(victim)
            rewrite.append_data_file(data_file(uri, copy, other.table.metadata.default_spec_id))

    _before_commit(monkeypatch, other_rewrite)
    before_other = rows(target.table)
    report = maintain(target, options(keep_last=10), SCHEMA)
    assert report.skipped == [PARTS[0]] and [r.partition for r in report.rewrites] == [PARTS[1]]
    assert rows(target.table) == before_other and files_per_day(target.table) == {DAYS[0]: RUNS, DAYS[1]: 1}
    assert _leftovers(target) == []


def test_conflicts_past_the_attempts_fail_cleanly(home: LakeflowHome, monkeypatch: pytest.MonkeyPatch) -> None:
    target, other = open_local_target(home), open_local_target(home)
    snapshots = len(target.table.metadata.snapshots)

    monkeypatch.setattr(maintain_module, "MAX_ATTEMPTS", 1)
    _before_commit(monkeypatch, lambda: other_commit(other, []))   # a run that only advanced the ledger
    with pytest.raises(CommitConflict, match="changed while this run worked"):
        maintain(target, options(keep_last=10), SCHEMA)
    target.table.refresh()
    assert len(target.table.metadata.snapshots) == snapshots + 1           # only the other's commit
    assert files_per_day(target.table) == {DAYS[0]: RUNS, DAYS[1]: RUNS}
    assert _leftovers(target) == []
