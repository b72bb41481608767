"""``make bench-compact``: the compaction job's throughput against a single-process pyarrow baseline.

For each size (default 1,000,000 readings in 10,000 JSON-array files, then 100,000 in 1,000 —
100 readings per file, as Flink's sink writes them), in the same run on the same files:

- **compaction**: ``lakeflow compact`` into a fresh Iceberg table, with its default engine choice
  (``auto``: pyarrow in the driver for batches up to 256 MiB) — timed end to end (interpreter,
  imports, catalogs, commit) and inside the job (its own report's duration); then once more with
  the Spark engine forced (``local[2]``, JVM start-up included), to show what Spark costs here;
- **baseline**: one Python process reads every file (``json.load``), builds one Arrow table and
  writes one zstd Parquet file — what a small script would do, with no ledger, no de-duplication,
  no quarantine and no commit.

Baseline and job run ``--repeats`` times, interleaved; the medians are compared. Prints rows/s
and ratios (target ≥ 1× end to end). Not a test: figures vary with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures_compaction import make_home, readings, write_parts  # noqa: E402

PER_FILE = 100
DAY_MS = 1763683200000


def generate(base: Path, rows: int):
    """A fresh lakeflow home whose raw table holds ``rows`` readings, ``PER_FILE`` per part file."""
    home = make_home(base)
    data = readings("bench-run", rows, start_ms=DAY_MS, step_ms=50, seed=rows)
    write_parts(home.raw, data, PER_FILE)
    return home


def baseline(raw: Path, out: Path) -> int:
    """Single process: every JSON array → one Arrow table → one Parquet file. Returns rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakeflow.compaction.schema import FIELDS

    types = {"string": pa.string(), "bigint": pa.int64(), "double": pa.float64()}
    schema = pa.schema([pa.field(n, types[t]) for n, t in FIELDS])
    rows: list[dict] = []
    for path in sorted(raw.rglob("part-*.json")):
        with open(path, "rb") as f:
            rows.extend(json.load(f))
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, out, compression="zstd")
    return table.num_rows


STAGE_DONE = re.compile(r"\[([a-z-]+)\] done in ([0-9.]+) s")


def compaction(home, report: Path, engine: str) -> tuple[dict, dict[str, float]]:
    """Run the job on a fresh target table; its report and how long each stage took (from its log)."""
    for leftover in (home.home / "iceberg.db", home.home / "iceberg", home.raw / "_lakeflow"):
        shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)
    done = home.compact("--report", str(report), "--engine", engine, timeout=3600)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"compaction failed ({done.returncode}):\n{output[-3000:]}")
    # a stage's outermost "done" line comes last
    return json.loads(report.read_text()), {m[1]: float(m[2]) for m in STAGE_DONE.finditer(output)}


def timed_job(home, tmp: Path, rows: int, engine: str) -> dict:
    t0 = time.monotonic()
    report, stages = compaction(home, tmp / "report.json", engine)
    e2e = time.monotonic() - t0
    assert report["rows_out"] == rows and report["files_compacted"] == rows // PER_FILE, report
    assert engine in ("auto", report["engine"]), report
    print(f"  {engine}: {report['engine']:<6} engine {e2e:6.1f} s end to end, {report['duration_s']:.1f} s in the job "
          f"({report['files_out']} Parquet file(s)); " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()),
          flush=True)
    return {"e2e_s": e2e, "job_s": report["duration_s"]}


def measure(rows: int, repeats: int, spark: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-compact-") as tmp:
        t0 = time.monotonic()
        home = generate(Path(tmp), rows)
        files = rows // PER_FILE
        print(f"  generated {rows:,} readings in {files:,} files ({time.monotonic() - t0:.1f} s)", flush=True)
        base, auto = [], []
        for _ in range(repeats):  # interleaved, so that a noisy moment hits both
            t0 = time.monotonic()
            assert baseline(home.raw, Path(tmp) / "baseline.parquet") == rows
            base.append(time.monotonic() - t0)
            print(f"  baseline      {base[-1]:6.1f} s", flush=True)
            auto.append(timed_job(home, Path(tmp), rows, "auto"))
        out = {"rows": rows, "files": files, "baseline_s": statistics.median(base),
               "e2e_s": statistics.median(a["e2e_s"] for a in auto),
               "job_s": statistics.median(a["job_s"] for a in auto)}
        if spark:
            s = timed_job(home, Path(tmp), rows, "spark")
            out.update(spark_e2e_s=s["e2e_s"], spark_job_s=s["job_s"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,100000", help="readings per round (comma-separated)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of baseline and job per size (median)")
    parser.add_argument("--no-spark", action="store_true", help="skip the forced Spark-engine run")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    results = []
    for rows in (int(s) for s in args.sizes.split(",")):
        print(f"{rows:,} readings:", flush=True)
        results.append(measure(rows, args.repeats, not args.no_spark))

    print(f"\nmedian of {args.repeats}; rows/s (ratio to the baseline)")
    print(f"{'readings':>9} {'files':>7} {'baseline':>10} {'job, end to end':>22} {'job, in the job':>22}"
          f" {'spark engine, e2e':>22}")
    for r in results:
        base = r["rows"] / r["baseline_s"]

        def cell(seconds: float) -> str:
            return f"{r['rows'] / seconds:>11,.0f} ({r['rows'] / seconds / base:4.2f}×)"

        spark = cell(r["spark_e2e_s"]) if "spark_e2e_s" in r else f"{'-':>22}"
        print(f"{r['rows']:>9,} {r['files']:>7,} {base:>10,.0f} {cell(r['e2e_s']):>22} {cell(r['job_s']):>22} {spark:>22}")
    print("\nTarget: the job ≥ 1× the baseline end to end. The baseline only converts; the job also lists,"
          "\ndedupes, quarantines, sorts, sizes files and commits to Iceberg with its ledger. The job uses"
          "\nits default engine choice (auto: arrow up to 256 MiB of raw JSON per batch); the last column"
          "\nforces the Spark engine on the same batch.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
