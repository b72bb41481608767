"""``make bench-longrun``: does a compaction run stay as fast after months of history?

1. **History, generated fast**: ``--history`` (200,000) tiny raw part files (one reading each) in
   hour buckets of ``--per-bucket`` (1,000) files — as the sink lays them out — written in bulk and
   compacted by *one* big run of the job (arrow engine), which writes the ledger's segments.
2. **Long run**: ``--runs`` (300) consecutive runs of jobs/compact.py, each over ``--new`` (20) new
   part files of 50 readings; the files' hour bucket advances every 60 runs (a run a minute). The
   runs execute in this process (``compact()`` of jobs/compact.py, as ``lakeflow compact`` calls it), so per-run wall time is the job's own work, not the
   interpreter's start-up (~1.5 s of imports, the same for every run). They are scheduled as
   docs/compaction.md tells a service to run: ``lakeflow compact --every 60s --maintain-every 30m``
   with ``COMPACT_EXPIRE_OLDER_THAN=30m`` — the first run and every 30th also maintain the table
   (``--maintain``). The runs follow each other within about a second, not a minute, so expiry by
   age is replaced by what it keeps at a run a minute: the newest 30 snapshots (``--keep-last 30
   --expire-older-than 0s``). Printed: the median wall time of the first 50 runs against the last
   50 (**goal ≤ 1.2×**; the maintaining runs are included, and shown apart), and ledger bytes
   read/written and listings per run.
3. **Contrast**: one run with ``--full-scan``, which lists every bucket and reads every segment —
   what every run cost before (the 0.2 ledger also rewrote all entries).
4. **Maintain**: ``lakeflow maintain`` (a process) on the result; data files per partition, and a
   one-day query's time (pyiceberg scan of that day + DuckDB count, in this process) before and after.

Not a test: figures vary with the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import date, datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.fixtures_compaction import json_array, make_home, readings  # noqa: E402

JOB = ROOT / "jobs" / "compact.py"
HOUR_MS = 3_600_000
START_MS = 1763683200000  # 2025-11-21T00:00:00Z
TARGET = "sensor-readings-compacted"


def bucket(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d--%H")


def write_history(raw: Path, files: int, per_bucket: int) -> int:
    """``files`` one-reading part files, ``per_bucket`` per hour bucket; returns the buckets."""
    line = '[{"sensor_id":"sensor-%03d","run_id":"history","seq":%d,"timestamp_ms":%d,"temperature":21.5,' \
           '"humidity":40.25,"pressure":1001.5,"location":"hall"}]\n'
    for i in range(files):
        ms = START_MS + (i // per_bucket) * HOUR_MS + (i % per_bucket) * (HOUR_MS // per_bucket)
        folder = raw / bucket(ms)
        if i % per_bucket == 0:
            folder.mkdir(parents=True)
        (folder / f"part-history-{i % 64}-{i}.json").write_text(line % (i % 100, i, ms))
    return -(-files // per_bucket)


def write_new(raw: Path, run: int, hour0_ms: int, files: int) -> None:
    """Run ``run``'s new files: ``files`` × 50 readings in the bucket of its minute."""
    ms = hour0_ms + run * 60_000
    folder = raw / bucket(ms)
    folder.mkdir(exist_ok=True)
    data = readings("longrun", files * 50, start_ms=ms, step_ms=1, seq_start=run * files * 50, seed=run)
    for n in range(files):
        (folder / f"part-longrun-{n}-{run}.json").write_text(json_array(data[n * 50:(n + 1) * 50]))


def compact(pipeline, home: Path, *args: str) -> tuple[float, dict]:
    """One in-process run of jobs/compact.py (its flags and settings read, then its pipeline); (wall
    seconds, its report)."""
    from lakeflow.cli.compact import job_options
    from lakeflow.compaction.config import load_config

    report = home / "report.json"
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        assert pipeline(load_config(job_options(["--engine", "arrow", "--report", str(report), *args]))) == 0
    return time.perf_counter() - t0, json.loads(report.read_text())


def files_per_partition() -> dict[str, int]:
    from lakeflow.compaction.commit import iceberg_catalog
    from lakeflow.compaction.config import CompactOptions, load_config

    config = load_config(CompactOptions(local=True))
    table = iceberg_catalog(config.settings).load_table((*config.namespace, config.target_table))
    return dict(sorted(Counter(task.file.file_path.split("/")[-2] for task in table.scan().plan_files()).items()))


def query_day(day: date) -> tuple[float, int]:
    """A one-day query (``lakeflow query --day``'s scan and DuckDB): (best of 3 seconds, rows)."""
    from lakeflow.query import day_bounds, load_readings, run_sql, time_filter

    best, rows = float("inf"), 0
    for _ in range(3):
        t0 = time.perf_counter()
        result = run_sql(load_readings(True, None, time_filter(*day_bounds(day))), "SELECT count(*) AS n FROM readings")
        best = min(best, time.perf_counter() - t0)
        assert result is not None
        rows = result.column("n")[0].as_py()
    return best, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=int, default=200_000, help="compacted part files before the runs")
    parser.add_argument("--per-bucket", type=int, default=1_000, help="history part files per hour bucket")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--new", type=int, default=20, help="new part files per run")
    parser.add_argument("--window", type=int, default=50, help="runs compared at each end")
    parser.add_argument("--maintain-every", type=int, default=30,
                        help="runs between maintenances, and snapshots they keep (30: --maintain-every 30m "
                             "and COMPACT_EXPIRE_OLDER_THAN=30m at a run a minute)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="lakeflow-bench-longrun-"))
    home = make_home(base)
    os.environ.clear()
    os.environ.update(home.env)
    os.chdir(home.home)
    from lakeflow.cli.compact import compaction_pipeline

    main_ = compaction_pipeline()
    try:
        t0 = time.perf_counter()
        buckets = write_history(home.raw, args.history, args.per_bucket)
        written = time.perf_counter() - t0
        took, r = compact(main_, home.home)
        assert r["files_in"] == args.history, r
        print(f"history: {args.history:,} part files in {buckets} hour buckets written in {written:.1f} s, "
              f"compacted in one run in {took:.1f} s ({r['files_out']} Parquet files, ledger "
              f"{r['ledger_bytes_written']:,} bytes)")

        hour0 = START_MS + buckets * HOUR_MS
        times, reports, maintained = [], [], {}
        maintain_args = ("--maintain", "--expire-older-than", "0s", "--keep-last", str(args.maintain_every))
        for run in range(args.runs):
            write_new(home.raw, run, hour0, args.new)
            maintain = run % args.maintain_every == 0
            took, r = compact(main_, home.home, *(maintain_args if maintain else ()))
            assert (r["files_in"], r["rows_out"]) == (args.new, args.new * 50), r
            times.append(took)
            reports.append(r)
            if maintain:
                maintained[run] = took
        w = args.window
        first, last = statistics.median(times[:w]), statistics.median(times[-w:])
        print(f"\n{args.runs} runs of {args.new} new part files over {args.history:,} compacted ones "
              f"(in-process; median wall time per run), scheduled as `lakeflow compact --every 60s "
              f"--maintain-every 30m` with COMPACT_EXPIRE_OLDER_THAN=30m at a run a minute: runs "
              f"{', '.join(map(str, maintained))} also maintained ({' '.join(f'{t:.1f}' for t in maintained.values())} "
              f"s), keeping the newest {args.maintain_every} snapshots:")
        print(f"  first {w}: {first * 1000:7.1f} ms   last {w}: {last * 1000:7.1f} ms   "
              f"ratio {last / first:.2f}×  (goal ≤ 1.2×)  {'OK' if last / first <= 1.2 else 'MISSED'}")
        for name, part in (("first", reports[:w]), ("last", reports[-w:])):
            print(f"  {name} {w}: ledger bytes read {statistics.median(x['ledger_bytes_read'] for x in part):,.0f}, "
                  f"written {statistics.median(x['ledger_bytes_written'] for x in part):,.0f}, "
                  f"raw listings {statistics.median(x['list_requests'] for x in part):.0f}, "
                  f"part files listed {statistics.median(x['files_listed'] for x in part):,.0f} (medians per run)")

        write_new(home.raw, args.runs, hour0, args.new)
        took, r = compact(main_, home.home, "--full-scan")
        print(f"\ncontrast — one run with --full-scan (every bucket listed, every segment read; what each run "
              f"cost before): {took * 1000:.0f} ms, {r['files_listed']:,} part files listed, "
              f"{r['list_requests']} listings, ledger bytes read {r['ledger_bytes_read']:,} "
              f"({took / last:.1f}× a windowed run)")

        day = datetime.fromtimestamp((hour0 + args.runs * 60_000) / 1000, tz=timezone.utc).date()
        before_files, (before_q, rows) = files_per_partition(), query_day(day)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "lakeflow.cli", "maintain", "--local", "--expire-older-than",
                               "0s", "--orphan-min-age", "1h"], env=home.env, cwd=home.home,
                              capture_output=True, text=True)
        maintain_s = time.perf_counter() - t0
        assert done.returncode == 0, done.stderr[-2000:]
        after_files, (after_q, rows_after) = files_per_partition(), query_day(day)
        assert rows_after == rows
        print(f"\nmaintain ({maintain_s:.1f} s as a process): data files per partition")
        for part in sorted(set(before_files) | set(after_files)):
            print(f"  {part}: {before_files.get(part, 0):4d} → {after_files.get(part, 0)}")
        print(f"one-day query ({day}, {rows:,} rows; scan + DuckDB count, best of 3): "
              f"{before_q * 1000:.0f} ms before, {after_q * 1000:.0f} ms after ({before_q / after_q:.1f}× faster)")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
