"""The compaction job (``lakeflow compact``, embedded catalogs) under faults.

- ``compact-kill``: with the Spark engine (local[2]), each cycle adds a batch of raw part files,
  starts a run and SIGKILLs its whole process tree (the Python driver, spark-submit, the JVM) at a
  chosen point — before the write
  (Spark reading), mid-write (Spark writing Parquet), or between write and commit (data files named,
  not committed) — then reruns, kills that rerun too, and reruns to completion. After every kill the
  table shows the batch entirely or not at all; after every completed rerun it holds each reading
  exactly once and no orphan data file.
- ``bad-files`` (Spark engine) and ``bad-files-arrow`` (pyarrow engine): 1,000 part files, one
  corrupt, one truncated, one empty: those three are quarantined and reported with a reason, the
  other 997 compacted, every good reading once.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from tests.chaos.common import Result, progress, tail, timed
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts

TARGET = "sensor-readings-compacted"
DAY = 1763683200000  # 2025-11-21T00:00:00Z
# Where to kill, recognised by the run's progress lines (lakeflow.compaction logs each stage).
KILL_POINTS = {
    "before-write": re.compile(r"\[read\] engine \w+"),
    "mid-write": re.compile(r"\[compact\] \d+ new part files"),  # (+ up to 1.5 s: the executors parse and write)
    "between-write-and-commit": re.compile(r"\[write\] data/\S+ \(\d+ rows, \d+ bytes\)"),
}


def _start(home: LakeflowHome, report: Path) -> subprocess.Popen:
    """``lakeflow compact`` in its own session, so that its whole process tree can be killed."""
    return subprocess.Popen([sys.executable, "-m", "lakeflow.cli", "compact", "--report", str(report)],
                            env=home.env, cwd=home.home, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _kill_at(proc: subprocess.Popen, point: re.Pattern, delay: float, timeout: float = 300) -> Optional[str]:
    """SIGKILL the run's process group when ``point`` shows in its output (after ``delay`` s);
    the line that triggered it, or None when the run ended first."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        if point.search(line):
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
            return line.strip()
        if time.monotonic() > deadline:
            break
    proc.wait(timeout=60)
    return None


def table_keys(home: LakeflowHome) -> list[tuple[str, int]]:
    """(run_id, seq) of every row of the Iceberg table (none before its first commit)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = home.iceberg_table(TARGET)
    except NoSuchTableError:
        return []
    return [(r["run_id"], r["seq"]) for r in table.scan(selected_fields=("run_id", "seq")).to_arrow().to_pylist()]


def orphan_files(home: LakeflowHome) -> list[str]:
    """Parquet files under the table's folder that none of its snapshots references (a file a maintenance
    rewrite replaced stays referenced by the snapshots before it until they expire)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = home.iceberg_table(TARGET)
    except NoSuchTableError:
        return []
    if table.current_snapshot() is None:
        referenced: set[str] = set()
    else:
        referenced = {p.removeprefix("file://") for p in table.inspect.all_data_files()["file_path"].to_pylist()}
    on_disk = {str(p) for p in Path(table.location().removeprefix("file://")).rglob("*.parquet")}
    return sorted(on_disk - referenced)


def compact_kill(workdir: Path, *, kills: int = 10, batch_rows: int = 200, per_file: int = 20,
                 kills_per_batch: int = 2, seed: Optional[int] = None) -> Result:
    result = Result("compact-kill", zeros=("lost", "duplicated", "partial_commits", "orphans", "failed_reruns"))
    rnd = random.Random(seed)
    with timed(result):
        home = make_home(workdir)
        home.env["COMPACT_ENGINE"] = "spark"  # kill spark-submit (the arrow engine: bad-files-arrow)
        points = [name for _ in range(kills) for name in KILL_POINTS][:kills]
        rnd.shuffle(points)
        expected: set[tuple[str, int]] = set()
        lost = duplicated = partial = failed = hits = 0
        orphans: list[str] = []
        by_point: dict[str, int] = {}
        for cycle in range(0, kills, kills_per_batch):
            run_id = f"ingest-run-{cycle % 3}"  # runs reuse seq ranges: (run_id, seq) keeps them apart
            batch = readings(run_id, batch_rows, start_ms=DAY + cycle * 7_200_000, step_ms=30_000,
                             seq_start=cycle * batch_rows, seed=cycle)
            write_parts(home.raw, batch, per_file, job=f"batch{cycle:02d}-{rnd.getrandbits(32):08x}")
            batch_keys = {(r["run_id"], r["seq"]) for r in batch}
            before = set(table_keys(home))
            # the run, then its rerun, each killed; the next rerun completes (it recovers from both)
            for n, point in enumerate(points[cycle:cycle + kills_per_batch]):
                proc = _start(home, workdir / f"report-{cycle}-{n}.json")
                hit = _kill_at(proc, KILL_POINTS[point], rnd.uniform(0.0, 1.5) if point == "mid-write" else 0.0)
                hits += hit is not None
                by_point[point] = by_point.get(point, 0) + (hit is not None)
                if hit is None:
                    result.problems.append(f"batch {cycle}: the run ended (exit {proc.returncode}) before {point}")
                if set(table_keys(home)) not in (before, before | batch_keys):
                    partial += 1  # part of a batch visible: the commit was not atomic
                progress(result.name, f"kill {cycle + n + 1}/{kills}: {point} ({'hit' if hit else 'missed'})")
            rerun = subprocess.run([sys.executable, "-m", "lakeflow.cli", "compact", "--report",
                                    str(workdir / f"report-{cycle}-rerun.json")], env=home.env, cwd=home.home,
                                   capture_output=True, text=True, timeout=600)
            if rerun.returncode != 0:
                failed += 1
                result.problems.append(f"batch {cycle} rerun exit {rerun.returncode}: {tail(rerun.stderr, 3)}")
            expected |= batch_keys
            keys = table_keys(home)
            lost, duplicated = len(expected - set(keys)), len(keys) - len(set(keys))
            orphans = orphan_files(home)
            progress(result.name, f"rerun exit {rerun.returncode}: rows {len(keys)}, lost {lost}, "
                                  f"duplicated {duplicated}, orphans {len(orphans)}")
        result.counts.update(kills=hits, **{p.replace("-", "_"): n for p, n in sorted(by_point.items())},
                             rows=len(expected), lost=lost, duplicated=duplicated, partial_commits=partial,
                             orphans=len(orphans), failed_reruns=failed)
    return result


def bad_files(workdir: Path, *, engine: str = "spark", files: int = 1000, per_file: int = 10) -> Result:
    result = Result("bad-files" if engine == "spark" else f"bad-files-{engine}",
                    zeros=("lost", "duplicated", "unreported"))
    with timed(result):
        home = make_home(workdir)
        home.env["COMPACT_ENGINE"] = engine
        rows = readings("run-bad-files", files * per_file, start_ms=DAY, step_ms=1_000, seed=7)
        paths = write_parts(home.raw, rows, per_file)
        corrupt, truncated, empty = paths[files // 10], paths[files // 2], paths[files * 9 // 10]
        bad_rows = {(r["run_id"], r["seq"]) for p in (corrupt, truncated, empty) for r in json.loads(p.read_text())}
        corrupt.write_bytes(b"\x00\x9c\xff{\"sensor_id\": \x01garbage")
        truncated.write_text(truncated.read_text()[: truncated.stat().st_size // 2])
        empty.write_bytes(b"")
        report_path = workdir / "report.json"
        done = subprocess.run([sys.executable, "-m", "lakeflow.cli", "compact", "--report", str(report_path)],
                              env=home.env, cwd=home.home, capture_output=True, text=True, timeout=900)
        result.check(done.returncode == 0, f"compact exit {done.returncode}: {tail(done.stderr, 3)}")
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        reported = {q["file"].rsplit("/", 1)[-1]: q["reason"] for q in report.get("quarantined", [])}
        bad = {corrupt.name, truncated.name, empty.name}
        keys = table_keys(home)
        good = {(r["run_id"], r["seq"]) for r in rows} - bad_rows
        result.counts.update(files=files, compacted=report.get("files_compacted"), quarantined=len(reported),
                             rows=len(keys), lost=len(good - set(keys)), duplicated=len(keys) - len(set(keys)),
                             unreported=len(bad - set(reported)))
        result.check(set(reported) == bad, f"quarantined {sorted(reported)}")
        result.check(all(reported.get(name) for name in bad), "a quarantined file has no reason")
        result.check(report.get("files_compacted") == files - 3, f"compacted {report.get('files_compacted')}")
        result.check(not (set(keys) & bad_rows), "rows of a quarantined file reached the table")
        result.check(all(f"quarantined {name}" in done.stdout or name in done.stdout for name in bad),
                     "the run's summary does not name every quarantined file")
    return result



def shared_home(workdir: Path, first: LakeflowHome) -> LakeflowHome:
    """A second lakeflow home (as on another host) sharing ``first``'s catalogs and tables, not its
    local state: both compactors work on the same raw and Iceberg tables."""
    home = workdir / "host-b" / "lakeflow-home"
    home.mkdir(parents=True)
    for name in ("catalog.json", ".catalog.lock", "iceberg.db", "iceberg", "warehouse"):
        (home / name).symlink_to(first.home / name)
    return LakeflowHome(home=home, raw=first.raw, env={**first.env, "LAKEFLOW_HOME": str(home)})


def missing_referenced(home: LakeflowHome) -> list[str]:
    """Files some snapshot of the Iceberg table references (data files, manifests) that are gone from disk."""
    from pyiceberg.exceptions import NoSuchTableError

    from lakeflow.compaction.commit import reachable

    try:
        table = home.iceberg_table(TARGET)
    except NoSuchTableError:
        return []
    return sorted(f for f in reachable(table.io, table.metadata.snapshots) if not Path(f.removeprefix("file://")).exists())


def two_compactors(workdir: Path, *, rounds: int = 10, batch_rows: int = 120, per_file: int = 20,
                   seed: Optional[int] = None) -> Result:
    """Two compactors in separate processes and homes (two hosts) on the same tables, started
    together every round; some runs crash between naming their files and committing. Every
    reading once, and no file a snapshot references is ever deleted."""
    result = Result("two-compactors", zeros=("lost", "duplicated", "referenced_deleted", "failed_final"))
    rnd = random.Random(seed)
    with timed(result):
        a = make_home(workdir)
        b = shared_home(workdir, a)
        for home in (a, b):
            home.env["COMPACT_ENGINE"] = "arrow"
        # the Iceberg table is created once, before the rounds: host B's warehouse folder is a symlink
        # to A's (the simulation's shared storage), where pyarrow refuses to create folders
        created = subprocess.run([sys.executable, "-m", "lakeflow.cli", "compact"], env=a.env, cwd=a.home,
                                 capture_output=True, text=True, timeout=600)
        result.check(created.returncode == 0, f"creating the table: exit {created.returncode}: {tail(created.stderr, 3)}")
        sent: list[dict] = []
        outcomes: dict[str, int] = {}
        deleted: set[str] = set()
        for n in range(rounds):
            batch = readings(f"ingest-{n % 3}", batch_rows, start_ms=DAY + n * 3_600_000, step_ms=20_000,
                             seq_start=n * batch_rows, seed=n)
            write_parts(a.raw, batch, per_file, job=f"round{n:02d}-{rnd.getrandbits(32):08x}")
            if sent:  # a re-delivery of rows sent before
                write_parts(a.raw, rnd.sample(sent, 10), 10, job=f"again{n:02d}-{rnd.getrandbits(32):08x}")
            sent += batch
            crash = rnd.random() < 0.4
            procs = []
            for i, home in enumerate((a, b)):
                if i:
                    time.sleep(rnd.uniform(0.0, 0.3))
                env = {**home.env, **({"LAKEFLOW_COMPACT_CRASH_AT": "after-write"} if crash and i == 0 else {})}
                procs.append(subprocess.Popen([sys.executable, "-m", "lakeflow.cli", "compact"], env=env,
                                              cwd=home.home, text=True, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT))
            for proc in procs:
                out, _ = proc.communicate(timeout=600)
                outcome = {0: "ok", 3: "busy", 86: "crashed"}.get(proc.returncode, "error")
                if outcome == "error" and "changed while this run worked" in out:
                    outcome = "conflict"
                elif outcome == "error":
                    result.problems.append(f"round {n}: exit {proc.returncode}: {tail(out, 3)}")
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
            deleted |= set(missing_referenced(a))
            progress(result.name, f"round {n + 1}/{rounds}: {', '.join(f'{k} {v}' for k, v in sorted(outcomes.items()))}; "
                                  f"referenced files deleted so far {len(deleted)}")
        final = subprocess.run([sys.executable, "-m", "lakeflow.cli", "compact"], env=b.env, cwd=b.home,
                               capture_output=True, text=True, timeout=600)
        keys = table_keys(a)
        deleted |= set(missing_referenced(a))
        expected = {(r["run_id"], r["seq"]) for r in sent}
        result.counts.update(rounds=rounds, **{f"runs_{k}": v for k, v in sorted(outcomes.items())},
                             rows=len(keys), lost=len(expected - set(keys)), duplicated=len(keys) - len(set(keys)),
                             referenced_deleted=len(deleted), failed_final=int(final.returncode != 0))
        result.check(final.returncode == 0, f"final run exit {final.returncode}: {tail(final.stderr, 3)}")
    return result

