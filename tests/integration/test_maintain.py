"""``lakeflow maintain``: a table that compaction runs filled with small files and snapshots, merged,
expired and cleaned — rows identical, each file sorted by time, nothing referenced ever deleted.

The table is made by the real compaction job (arrow engine, embedded SQLite catalog) run several
times in this process; conflicts are real concurrent commits; the lease test runs ``lakeflow
compact`` and ``lakeflow maintain`` as processes together; one test runs against Apache Iceberg's
REST server on moto S3 (tests/support/iceberg_rest.py).

The unit tests (no process): tests/unit/test_maintain.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from lakeflow.schema import load_schema
from lakeflow.compaction.commit import (
    LEDGER_PROPERTY,
    RUN_PROPERTY,
    Target,
    commit,
    reachable,
)
from lakeflow.compaction.maintain import (
    maintain,
)
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts
from tests.unit.test_maintain import (  # noqa: F401 (fixtures, constants)
    DAY_MS,
    DAYS,
    MIDNIGHT,
    RUNS,
    TARGET,
    _readings_file,
    assert_sorted_files,
    batch,
    compact_in_process,
    files_per_day,
    home,
    options,
    rows,
)


def _cli(home: LakeflowHome, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lakeflow.cli", *args], env=home.env, cwd=home.home, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _stopped_holding_the_lease(home: LakeflowHome, *args: str) -> subprocess.Popen:
    """``lakeflow <args>``, stopped (SIGSTOP) once it holds the table's lease: its plan is logged."""
    proc = _cli(home, *args)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if " at snapshot " in line:      # run.plan(), the first step under the lease
            os.kill(proc.pid, signal.SIGSTOP)
            return proc
    raise AssertionError(f"{args} ended before taking the lease: {''.join(seen[-20:])}")


def _resumed(proc: subprocess.Popen) -> tuple[int, str]:
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out + err


@pytest.mark.slow
def test_maintain_and_compact_processes_together_lose_and_double_nothing(tmp_path: Path) -> None:
    """Both as processes at once, each stopped inside its lease while the other starts: the other is
    refused (exit 3) and changes nothing; every reading ends up in the table once."""
    home = make_home(tmp_path)
    home.env.update({"COMPACT_ENGINE": "arrow", "COMPACT_EXPIRE_OLDER_THAN": "0s", "COMPACT_ORPHAN_MIN_AGE": "1h",
                     "COMPACT_LEASE_TTL": "300s"})
    sent = batch(0) + batch(1)
    write_parts(home.raw, batch(0), 10)
    first = _cli(home, "compact")
    assert first.wait(timeout=300) == 0
    write_parts(home.raw, batch(1), 10)
    for holder, other in (("compact", "maintain"), ("maintain", "compact")):
        running = _stopped_holding_the_lease(home, holder)
        refused = _cli(home, other)
        _, err = refused.communicate(timeout=300)
        assert refused.returncode == 3 and f"{other}: refused: another compaction" in err, err[-3000:]
        code, output = _resumed(running)
        assert code == 0, output[-3000:]
    # compact --maintain: new files compacted, then the table maintained under the same lease
    write_parts(home.raw, batch(2), 10)
    sent += batch(2)
    done = _cli(home, "compact", "--maintain", "--keep-last", "1")
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err[-3000:]
    assert "partition(s) rewritten" in out and "snapshots:" in out
    table = home.iceberg_table(TARGET)
    keys = sorted((r[1], r[2]) for r in rows(table))
    assert keys == sorted((r["run_id"], r["seq"]) for r in sent)          # every reading once
    assert files_per_day(table) == {DAYS[0]: 1, DAYS[1]: 1} and len(table.metadata.snapshots) == 1


def test_maintain_cli_help_and_bad_settings(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    shown = subprocess.run([sys.executable, "-m", "lakeflow.cli", "maintain", "--help"], env=home.env, check=False,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0
    for flag in ("--dry-run", "--json", "--expire-older-than", "--keep-last", "--orphan-min-age", "--small-file-mb"):
        assert flag in shown.stdout
    bad = subprocess.run([sys.executable, "-m", "lakeflow.cli", "maintain", "--keep-last", "0"], env=home.env,
                         check=False, capture_output=True, text=True, timeout=120, cwd=home.home)
    assert bad.returncode == 2 and "COMPACT_KEEP_LAST='0'" in bad.stderr


@pytest.fixture
def rest_target(iceberg_rest, tmp_path: Path) -> Iterator[Target]:
    from tests.integration.test_iceberg_rest import _settings, _target

    yield _target(iceberg_rest, _settings(iceberg_rest, tmp_path), f"maintain-{uuid.uuid4().hex[:8]}",
                  "s3://raw-bucket/raw/maintain")


@pytest.mark.slow
def test_maintain_on_the_rest_catalog(rest_target: Target) -> None:
    target, source = rest_target, "s3://raw-bucket/raw/maintain"
    for n in range(3):
        data = readings(f"ingest-{n}", 5, start_ms=DAY_MS + n * 60_000, seed=n)
        written = _readings_file(target, f"part-{n}", data)
        target.table.refresh()
        commit(target, [written], f"{source}/_lakeflow/l{n}.json.gz", source, str(uuid.uuid4()), {}, load_schema())
    before = rows(target.table)
    target.storage.write("data/stray.parquet", b"orphan")
    report = maintain(target, options(orphan_min_age_s=0), load_schema())
    assert [(r.files_before, r.files_after) for r in report.rewrites] == [(3, 1)]
    assert report.orphans == ["data/stray.parquet"] and len(report.snapshots_expired) == 3
    table = target.table
    assert rows(table) == before and len(table.metadata.snapshots) == 1
    assert table.properties[LEDGER_PROPERTY] == f"{source}/_lakeflow/l2.json.gz"
    current = table.current_snapshot()
    assert current is not None and current.summary is not None and current.summary.get(RUN_PROPERTY)
    assert_sorted_files(target)
    live = {target.storage.relative(u) for u in reachable(table.io, table.metadata.snapshots)}
    on_s3 = {e.rel for e in target.storage.list("data")}
    assert on_s3 <= live and len(on_s3) == 4        # the merged file, and the replaced ones its delete entries name
    assert not target.storage.exists("data/stray.parquet")
