"""``make bench-compact``: the compaction job's throughput against a single-process pyarrow baseline.

For each size (default 1,000,000 readings in 10,000 JSON-array files, then 100,000 in 1,000 —
100 readings per file, as Flink's sink writes them), in the same run on the same files:

- **compaction**: ``lakeflow compact`` (spark-submit, ``local[2]``) into a fresh Iceberg table —
  timed end to end (JVM start-up included) and inside the job (its own report's duration);
- **baseline**: one Python process reads every file (``json.load``), builds one Arrow table and
  writes one zstd Parquet file — what a small script would do, with no ledger, no de-duplication,
  no quarantine and no commit.

Prints rows/s of both and their ratio (target ≥ 1×). Not a test: figures vary with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


def compaction(home, report: Path) -> tuple[dict, dict[str, float]]:
    """Run the job; its report and how long each of its stages took (from its log)."""
    done = home.compact("--report", str(report), timeout=3600)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"compaction failed ({done.returncode}):\n{output[-3000:]}")
    return json.loads(report.read_text()), {m[1]: float(m[2]) for m in STAGE_DONE.finditer(output)}


def measure(rows: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-compact-") as tmp:
        t0 = time.monotonic()
        home = generate(Path(tmp), rows)
        files = rows // PER_FILE
        print(f"  generated {rows:,} readings in {files:,} files ({time.monotonic() - t0:.1f} s)", flush=True)

        t0 = time.monotonic()
        got = baseline(home.raw, Path(tmp) / "baseline.parquet")
        base_s = time.monotonic() - t0
        assert got == rows, (got, rows)
        print(f"  baseline   {base_s:7.1f} s", flush=True)

        t0 = time.monotonic()
        report, stages = compaction(home, Path(tmp) / "report.json")
        job_e2e = time.monotonic() - t0
        assert report["rows_out"] == rows and report["files_compacted"] == files, report
        print(f"  compaction {job_e2e:7.1f} s end to end, {report['duration_s']:.1f} s in the job "
              f"({report['files_out']} Parquet file(s)); stages: "
              + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()), flush=True)
    return {"rows": rows, "files": files, "baseline_s": base_s, "e2e_s": job_e2e, "job_s": report["duration_s"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,100000", help="readings per round (comma-separated)")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    results = []
    for rows in (int(s) for s in args.sizes.split(",")):
        print(f"{rows:,} readings:", flush=True)
        results.append(measure(rows))

    print("\nreadings    files   baseline rows/s   compaction rows/s (end to end | in job)   ratio (e2e | job)")
    for r in results:
        base = r["rows"] / r["baseline_s"]
        e2e, job = r["rows"] / r["e2e_s"], r["rows"] / r["job_s"]
        print(f"{r['rows']:>9,} {r['files']:>8,} {base:>17,.0f}   {e2e:>17,.0f} | {job:>9,.0f}"
              f"{'':>14}{e2e / base:>6.2f}× | {job / base:.2f}×")
    print("\nTarget: compaction ≥ 1× the baseline. The baseline only converts; the job also lists, dedupes,"
          "\nquarantines, sorts, sizes files and commits to Iceberg with its ledger.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
